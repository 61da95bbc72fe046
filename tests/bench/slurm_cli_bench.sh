#!/usr/bin/env bash
# Issue 5's figures, through the Slurm front ends on a local cluster:
#   (a) srun -N4 true inside an allocation (step launch latency);
#   (b) squeue and squeue --json with QUEUED jobs pending (held, so nothing runs);
#   (c) sacct over HISTORY finished jobs (written into the controller's store by history_fill).
#   usage: tests/bench/slurm_cli_bench.sh [BUILD_DIR]     (default build/release)
# Env: QUEUED (default 10000), HISTORY (default 100000), SAMPLES (default 20).
set -euo pipefail
BUILD=$(cd "${1:-build/release}" && pwd)
BIN="$BUILD/bin"
QUEUED=${QUEUED:-10000}
HISTORY=${HISTORY:-100000}
SAMPLES=${SAMPLES:-20}
DIR=$(mktemp -d /tmp/muster-clibench.XXXXXX)
trap '"$BIN/muster" local down --dir "$DIR/cluster" --purge >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
cd "$DIR"
"$BIN/muster" compat install "$DIR/compat" >/dev/null
export PATH="$DIR/compat:$BIN:$PATH"
eval "$(muster local up --dir "$DIR/cluster" --nodes 4 --gpus-per-node 8 2>/dev/null)"

median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.1f", m / 1000}'; }
p90() { sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int(NR*0.9+0.5)] / 1000}'; }
# time_cmd N CMD...: N runs, one duration in microseconds per line.
time_cmd() {
  local n=$1; shift
  for ((i = 0; i < n; i++)); do
    # Read the clock in this shell: a $(...) would time a fork of bash too (about 1 ms).
    local s=${EPOCHREALTIME/./}; "$@" >/dev/null; local e=${EPOCHREALTIME/./}; echo $(( e - s ))
  done
}

# (a) Step launch inside an allocation: srun -N4 true, measured inside salloc.
salloc -N4 bash -c "
  srun -N4 true  # warm
  for ((i = 0; i < $SAMPLES; i++)); do s=\${EPOCHREALTIME/./}; srun -N4 true; e=\${EPOCHREALTIME/./}; echo \$(( e - s )); done
" > step.txt 2>/dev/null
echo "srun -N4 true inside salloc -N4, $SAMPLES runs: p50 $(median < step.txt) ms, p90 $(p90 < step.txt) ms"
time_cmd "$SAMPLES" srun -N4 true > alloc_step.txt
echo "srun -N4 true outside a job (allocate, run, release), $SAMPLES runs: p50 $(median < alloc_step.txt) ms"

# (b) Queue views with QUEUED pending jobs.
for ((i = 0; i < QUEUED; i++)); do sbatch -H --wrap true -o /dev/null >/dev/null; done
time_cmd "$SAMPLES" squeue > q.txt
time_cmd "$SAMPLES" squeue --json > qj.txt
time_cmd "$SAMPLES" squeue -h -o '%i %T' > qo.txt
echo "squeue with $QUEUED pending, $SAMPLES calls: p50 $(median < q.txt) ms; --json p50 $(median < qj.txt) ms; -h -o '%i %T' p50 $(median < qo.txt) ms"
echo "  output sizes: $(squeue | wc -c) bytes, --json $(squeue --json | wc -c) bytes"
scancel $(squeue -h -o %i) >/dev/null

# (c) sacct over HISTORY finished jobs.
muster local down --dir "$DIR/cluster" >/dev/null
"$BUILD/bench/history_fill" "$DIR/cluster/state" "$HISTORY" >/dev/null
eval "$(muster local up --dir "$DIR/cluster" --nodes 4 --gpus-per-node 8 2>/dev/null)"
time_cmd 5 sacct -a -S now-30days > a.txt
time_cmd 5 sacct -a -X -P -S now-30days > ax.txt
time_cmd 5 sacct -a -X -P -S now-1days > a1.txt
last=$(sacct -a -X -n -P -o JobID -S now-1days | tail -1)
time_cmd "$SAMPLES" sacct -j "$last" > aj.txt
# The controller keeps answering while a long sacct scans the archive (off its strand).
sacct -a -S now-30days >/dev/null &
scan=$!
sleep 0.05
time_cmd 10 muster info > during.txt
wait $scan
time_cmd 10 muster info > idle.txt
echo "muster info while sacct scans $HISTORY records: p50 $(median < during.txt) ms, max $(sort -n during.txt | tail -1 | awk '{printf "%.1f", $1/1000}') ms; idle p50 $(median < idle.txt) ms"
echo "sacct over $HISTORY finished jobs (+ $QUEUED cancelled): all with steps p50 $(median < a.txt) ms ($(sacct -a -S now-30days | wc -l) lines); -X -P p50 $(median < ax.txt) ms; last day -X -P p50 $(median < a1.txt) ms; one job (-j) p50 $(median < aj.txt) ms"
