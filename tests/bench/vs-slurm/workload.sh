#!/usr/bin/env bash
# The workload run.sh runs against each system, through Slurm's command names only (whichever
# sbatch, squeue, scancel the PATH finds): prints "metric<TAB>value" lines.
#   usage: workload.sh rounds|queue     Env: WORK (a directory of its own), N, BIG, LAT_N, GANG_N
set -euo pipefail
mode=${1:?usage: $0 rounds|queue}
mkdir -p "$WORK"
now() { echo "${EPOCHREALTIME/./}"; }  # microseconds
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b - a) / 1e3 }'; }
per_s() { awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { printf "%.1f", n / ((b - a) / 1e6) }'; }
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
# The queue is empty (a squeue that fails is not an empty queue).
empty() {
  local out
  out=$(squeue -h -o %i 2>/dev/null) || return 1
  [ -z "$out" ]
}
wait_empty() {
  for _ in $(seq 3000); do empty && return 0; sleep 0.2; done
  echo "workload.sh: the queue did not empty" >&2
  exit 1
}
# p50 of COUNT timed runs of a command (ms), its output dropped.
timed_p50() {
  local count=$1 t0 t1
  shift
  for ((i = 0; i < count; i++)); do
    t0=$(now)
    "$@" >/dev/null || { echo "workload.sh: $* failed" >&2; exit 1; }
    t1=$(now)
    ms "$t0" "$t1"
    echo
  done | grep . | median
}

if [ "$mode" = rounds ]; then
  wait_empty
  # N sequential submissions of a trivial job; then until they have all run.
  t0=$(now)
  for ((i = 0; i < N; i++)); do sbatch --parsable -o /dev/null --wrap true >/dev/null; done
  t1=$(now)
  wait_empty
  t2=$(now)
  printf 'seq_sbatch_per_s\t%s\nseq_done_per_s\t%s\n' "$(per_s "$N" "$t0" "$t1")" "$(per_s "$N" "$t0" "$t2")"
  # One array of N tasks: the call, then until every task has run.
  t0=$(now)
  sbatch --parsable -o /dev/null --array=1-"$N" --wrap true >/dev/null
  t1=$(now)
  wait_empty
  t2=$(now)
  printf 'array_call_ms\t%s\narray_done_per_s\t%s\n' "$(ms "$t0" "$t1")" "$(per_s "$N" "$t0" "$t2")"
  # Submit -> start on an idle cluster: the job writes the time it started.
  printf '#!/bin/bash\necho "${EPOCHREALTIME/./}" > "$1"\n' >"$WORK/stamp.sh"
  for ((i = 0; i < LAT_N; i++)); do
    sleep 0.5
    t0=$(now)
    sbatch -o /dev/null "$WORK/stamp.sh" "$WORK/lat.$i" >/dev/null
    for _ in $(seq 1500); do [ -s "$WORK/lat.$i" ] && break; sleep 0.01; done
    [ -s "$WORK/lat.$i" ] || { echo "workload.sh: job $i did not start" >&2; exit 1; }
    ms "$t0" "$(cat "$WORK/lat.$i")"
    echo
  done >"$WORK/lat.ms"
  printf 'latency_p50_ms\t%s\n' "$(grep . "$WORK/lat.ms" | median)"
  # A 4-node gang: submit -> the last of its 4 srun tasks started.
  printf '#!/bin/bash\nsrun bash -c '"'"'echo "${EPOCHREALTIME/./}" >> "$0"'"'"' "$1"\n' >"$WORK/gang.sh"
  for ((i = 0; i < GANG_N; i++)); do
    wait_empty
    sleep 0.5
    t0=$(now)
    sbatch -N4 --ntasks-per-node=1 --gres=gpu:8 -o /dev/null "$WORK/gang.sh" "$WORK/gang.$i" >/dev/null
    for _ in $(seq 3000); do [ "$(cat "$WORK/gang.$i" 2>/dev/null | wc -l)" -ge 4 ] && break; sleep 0.01; done
    [ "$(cat "$WORK/gang.$i" 2>/dev/null | wc -l)" -ge 4 ] ||
      { echo "workload.sh: gang $i did not start its 4 tasks" >&2; exit 1; }
    ms "$t0" "$(sort -n "$WORK/gang.$i" | tail -1)"
    echo
  done >"$WORK/gang.ms"
  printf 'gang_p50_ms\t%s\n' "$(grep . "$WORK/gang.ms" | median)"
  wait_empty
  exit 0
fi

# queue: squeue and squeue --json with N, then BIG, held jobs queued.
wait_empty
for ((i = 0; i < N; i++)); do sbatch -H -o /dev/null --wrap true >/dev/null; done
[ "$(squeue -h -o %i | wc -l)" = "$N" ] || { echo "workload.sh: not $N jobs queued" >&2; exit 1; }
v=$(timed_p50 20 squeue)
printf 'squeue_1k_ms\t%s\n' "$v"
v=$(timed_p50 5 squeue --json)
printf 'squeue_json_1k_ms\t%s\n' "$v"
for ((i = N; i < BIG; i++)); do sbatch -H -o /dev/null --wrap true >/dev/null; done
[ "$(squeue -h -o %i | wc -l)" = "$BIG" ] || { echo "workload.sh: not $BIG jobs queued" >&2; exit 1; }
v=$(timed_p50 10 squeue)
printf 'squeue_10k_ms\t%s\n' "$v"
v=$(timed_p50 3 squeue --json)
printf 'squeue_json_10k_ms\t%s\n' "$v"
squeue -h -o %i | xargs -n 1000 scancel
wait_empty
