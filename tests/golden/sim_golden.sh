#!/bin/bash
# muster-sim's results on a small fixed workload, per policy, against the JSON kept in
# tests/data/sim/golden/: a change to the scheduling core, the engine or the metrics that moves a
# figure shows up here as a diff. After a change that is meant to move them, rewrite them with
#   tests/golden/sim_golden.sh build/release/bin/muster-sim tests/data/sim --update
# and say in the commit why the figures moved.
set -euo pipefail
sim=$1
data=$2
update=${3:-}
# A 400-job SWF workload on its own 64-CPU machine, under every order and backfill; and a
# 300-job GPU workload (tests/data/sim/golden_gpu.csv: gangs of up to 32 GPUs from four accounts)
# on 16 nodes of 8 GPUs in leaves of 4, under each placement (random with seed 1). Tenants: the
# SWF's groups with equal shares (fair:), the GPU workload's accounts with equal GPU quotas that
# lend (lend:) or hold each to its guarantee (strict:).
policies=(muster fcfs+none fcfs+strict sjf+strict f1+strict wfp3+strict unicep+strict fcfs+easy
          fcfs+conservative fcfs+easy/shortest hrrn+easy f1+easy~1h
          gpu:muster gpu:muster@first_fit gpu:muster@random gpu:f1+easy~2h
          fair:muster lend:muster strict:muster)
gpu_cluster=(--format csv --nodes 16 --gpus-per-node 8 --cpus-per-node 64 --leaf-size 4 --seed 1)
failed=0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for p in "${policies[@]}"; do
  name=${p//+/_}
  name=${name//\//_}
  name=${name//:/_}
  name=${name//@/_}
  name=${name//\~/_}
  trace=("$data/golden.swf")
  case $p in
    gpu:*) trace=("$data/golden_gpu.csv" "${gpu_cluster[@]}") ;;
    fair:*) trace+=(--tenants equal) ;;
    lend:*) trace=("$data/golden_gpu.csv" "${gpu_cluster[@]}" --tenants equal --quotas lend) ;;
    strict:*) trace=("$data/golden_gpu.csv" "${gpu_cluster[@]}" --tenants equal --quotas strict) ;;
  esac
  label=$p
  p=${p#*:}
  "$sim" --trace "${trace[@]}" --policy "$p" --threads 1 --json "$out/$name.json" 2>"$out/$name.err" ||
    { echo "FAIL $label: muster-sim failed"; cat "$out/$name.err"; failed=1; continue; }
  if [[ $update == --update ]]; then
    cp "$out/$name.json" "$data/golden/$name.json"
  elif ! diff -u "$data/golden/$name.json" "$out/$name.json" > "$out/$name.diff"; then
    echo "FAIL $label: the figures moved (- kept, + now):"
    cat "$out/$name.diff"
    failed=1
  fi
done
# The same run twice gives the same bytes (nothing in the replay reads a clock or a thread).
"$sim" --trace "$data/golden.swf" --policy muster --threads 1 --json "$out/again.json" 2>/dev/null
cmp -s "$out/again.json" "$out/muster.json" || { echo "FAIL: two runs differ"; failed=1; }
# Options that cannot work are refused with a message that says why (exit 2), never run.
refused() {  # expected words, then muster-sim's arguments
  local want=$1
  shift
  local err rc=0
  err=$("$sim" "$@" 2>&1 >/dev/null) || rc=$?
  if [[ $rc != 2 || $err != *"$want"* ]]; then
    echo "FAIL: muster-sim $* gave exit $rc and '$err', not exit 2 saying '$want'"
    failed=1
  fi
}
swf=(--trace "$data/golden.swf")
refused "--tenants takes equal" "${swf[@]}" --tenants foo
refused "--tenants takes equal" "${swf[@]}" --tenants ''
refused "at least 1" "${swf[@]}" --tenants equal:0
refused "--quotas needs --tenants" "${swf[@]}" --quotas lend
refused "the cluster has no GPUs" "${swf[@]}" --tenants equal --quotas lend
refused "quotas are 'strict'" "${swf[@]}" --tenants equal --quotas borrow
refused "needs the cluster's shape" "${swf[@]}" --procs-as-gpus
refused "asks for GPUs already" --trace "$data/golden_gpu.csv" "${gpu_cluster[@]}" --procs-as-gpus
[[ $failed == 0 ]] && echo "sim golden: ${#policies[@]} policies as kept, bad options refused"
exit $failed
