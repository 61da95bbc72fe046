#!/usr/bin/env bash
# The Slurm front ends of two builds against one cluster: how long sbatch, squeue and srun take
# with each, interleaved run by run on the same cluster (the daemons are NEW's), beside the
# machine's floor (starting /bin/true) measured in the same run.
#   usage: tests/bench/cli_versions_bench.sh OLD_BIN_DIR NEW_BIN_DIR
# Env: QUEUED (held jobs in the queue, default 2000), SAMPLES (per command and build, default 30).
set -euo pipefail
OLD=$(cd "${1:?usage: $0 OLD_BIN_DIR NEW_BIN_DIR}" && pwd)
NEW=$(cd "${2:?usage: $0 OLD_BIN_DIR NEW_BIN_DIR}" && pwd)
QUEUED=${QUEUED:-2000}
SAMPLES=${SAMPLES:-30}
DIR=$(mktemp -d /tmp/muster-cliver.XXXXXX)
trap '"$NEW/muster" local down --dir "$DIR/cluster" --purge >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
cd "$DIR"
"$OLD/muster" compat install "$DIR/old" >/dev/null
"$NEW/muster" compat install "$DIR/new" >/dev/null
eval "$("$NEW/muster" local up --dir "$DIR/cluster" --nodes 4 --gpus-per-node 8 2>/dev/null)"
seq "$QUEUED" | xargs -P 2 -I{} "$NEW/muster" submit -H -o /dev/null --wrap true >/dev/null

us() { echo "${EPOCHREALTIME/./}"; }
# sample CMD...: one duration in microseconds.
sample() {
  local s e
  s=$(us)
  "$@" >/dev/null 2>&1
  e=$(us)
  echo $((e - s))
}
median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f", m / 1000}'; }
declare -A runs
for ((i = 0; i < SAMPLES; i++)); do
  runs[floor]+="$(sample /bin/true) "
  for v in old new; do
    runs[$v.sbatch]+="$(sample "$DIR/$v/sbatch" --parsable -H -o /dev/null --wrap true) "
    runs[$v.squeue]+="$(sample "$DIR/$v/squeue") "
    runs[$v.squeue_fmt]+="$(sample "$DIR/$v/squeue" -h -o '%i %t %R') "
    runs[$v.srun]+="$(sample "$DIR/$v/srun" -N1 true) "
  done
done
printf '%-22s %10s %10s %8s\n' command "old ms" "new ms" new/old
for c in sbatch squeue squeue_fmt srun; do
  o=$(tr ' ' '\n' <<<"${runs[old.$c]}" | grep . | median)
  n=$(tr ' ' '\n' <<<"${runs[new.$c]}" | grep . | median)
  printf '%-22s %10s %10s %8s\n' "$c" "$o" "$n" "$(awk -v a="$n" -v b="$o" 'BEGIN {printf "%.2f", a / b}')"
done
printf 'floor: /bin/true median %s ms (%d samples each; %d jobs queued)\n' \
  "$(tr ' ' '\n' <<<"${runs[floor]}" | grep . | median)" "$SAMPLES" "$QUEUED"
