#!/usr/bin/env bash
# A held submission's call, Muster against Slurm 22.05, interleaved: both clusters up at once
# (4 nodes each, loopback), then ROUNDS rounds of one job and of a 1,000-task array through each
# (`sbatch --parsable --hold [--array=1-1000]` and the same through `muster submit`), every call
# timed with $EPOCHREALTIME and cancelled after. Prints each round and the medians.
#   usage: tests/bench/array_vs_slurm.sh [BIN_DIR]     (default build/release/bin; as root)
# Env: ROUNDS (default 7), SLURM_REF (default ../shared/reference/slurm beside the project).
set -euo pipefail
BIN=$(cd "${1:-build/release/bin}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REF=${SLURM_REF:-$ROOT/../shared/reference/slurm}
ROUNDS=${ROUNDS:-7}
[ -x "$REF/start_cluster.sh" ] || { echo "no Slurm reference in $REF (set SLURM_REF)"; exit 2; }
DIR=$(mktemp -d /tmp/muster-vs-slurm.XXXXXX)
cleanup() {
  "$BIN/muster" local down --dir "$DIR/cluster" --purge >/dev/null 2>&1 || true
  "$REF/stop_cluster.sh" >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT
"$REF/start_cluster.sh" 4 default >"$DIR/slurm-start.log" 2>&1
export SLURM_CONF=/tmp/slurmbench/etc/slurm.conf
eval "$("$BIN/muster" local up --dir "$DIR/cluster" --nodes 4 --gpus-per-node 8 2>/dev/null)"
sleep 2  # the agents' first heartbeats, out of the way
now() { echo "${EPOCHREALTIME/./}"; }  # microseconds
# call KIND [ARGS]: one held submission's call in microseconds, then its cancel.
call() {
  local kind=$1 t0 t1 id
  shift
  t0=$(now)
  if [ "$kind" = slurm ]; then
    id=$(sbatch --parsable --hold -o /dev/null --wrap true "$@")
  else
    id=$("$BIN/muster" submit --parsable --hold -o /dev/null --wrap true "$@")
  fi
  t1=$(now)
  if [ "$kind" = slurm ]; then scancel "$id"; else "$BIN/muster" cancel "$id"; fi
  echo $((t1 - t0))
}
declare -A all
for ((r = 1; r <= ROUNDS; r++)); do
  line="round $r:"
  for what in "slurm single" "muster single" "slurm array" "muster array"; do
    set -- $what
    if [ "$2" = array ]; then us=$(call "$1" --array=1-1000); else us=$(call "$1"); fi
    all[$what]+="$us "
    line+=" $what $(awk -v u="$us" 'BEGIN { printf "%.1f", u / 1e3 }') ms;"
  done
  echo "$line"
  sleep 0.5
done
for what in "slurm single" "muster single" "slurm array" "muster array"; do
  echo "${all[$what]}" | tr ' ' '\n' | grep . | sort -n |
    awk -v w="$what" '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2;
      printf "%-14s median %.1f ms over %d calls\n", w, m / 1e3, NR}'
done
