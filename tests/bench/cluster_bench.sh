#!/usr/bin/env bash
# End-to-end throughput and latency of a local cluster, measured the way
# ../shared/reference/slurm/run_bench.sh measures real Slurm 22.05 on this kind of machine.
#   usage: tests/bench/cluster_bench.sh [BIN_DIR]     (default build/release/bin)
# Env: N (jobs for throughput, default 1000), LAT_N (latency samples, default 20), NODES (4),
# TLS (1: the daemons talk mutual TLS, as `muster local up` sets up by default; 0: plain),
# GROUP_COMMIT (1: the default; 0: one synced write per change), STANDBY (1: a hot standby,
# `muster local up --standby`: every acknowledgement waits for the standby's copy too).
# Prints one line per figure; docs/benchmarks.md records the results.
set -euo pipefail
BIN=$(cd "${1:-build/release/bin}" && pwd)
export PATH="$BIN:$PATH"
N=${N:-1000}
LAT_N=${LAT_N:-20}
NODES=${NODES:-4}
DIR=$(mktemp -d /tmp/muster-bench.XXXXXX)
trap 'muster local down --dir "$DIR/cluster" --purge >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
TLS_FLAG=$([ "${TLS:-1}" = 0 ] && echo --no-tls || true)
STANDBY_FLAG=$([ "${STANDBY:-0}" = 1 ] && echo --standby || true)
eval "$(muster local up --dir "$DIR/cluster" --nodes "$NODES" --gpus-per-node 8 $TLS_FLAG $STANDBY_FLAG 2>/dev/null)"
if [ -n "$STANDBY_FLAG" ]; then
  # Measured once the standby is in sync: from then on every acknowledgement waits for it.
  deadline=$(( $(date +%s) + 60 ))
  until muster diag | grep -q '^Standbys in sync  ctl-b'; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "the standby never came in sync" >&2; exit 1; }
    sleep 0.1
  done
fi
if [ "${GROUP_COMMIT:-1}" = 0 ]; then
  # One synced write per change, on the controller's strand (controller.group_commit = false).
  sed -i 's/^\[controller\]$/[controller]\ngroup_commit = false/' "$MUSTER_CONF"
  ctld=$(cat "$DIR/cluster/run/musterctld.pid")
  kill "$ctld"
  while kill -0 "$ctld" 2>/dev/null; do sleep 0.05; done
  muster local up --dir "$DIR/cluster" --nodes "$NODES" --gpus-per-node 8 $TLS_FLAG >/dev/null 2>&1
fi
cd "$DIR"

now() { echo "${EPOCHREALTIME/./}"; }  # microseconds
# wait_file FILE LINES: until FILE has LINES lines (60 s at most).
wait_file() {
  local deadline=$(( $(date +%s) + 60 ))
  until [ "$( (wc -l < "$1") 2>/dev/null || echo 0)" -ge "$2" ]; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "timed out waiting for $1" >&2; exit 1; }
    sleep 0.005
  done
}
queue_empty() { [ -z "$(muster queue --noheader)" ]; }
wait_empty() { until queue_empty; do sleep 0.2; done; }
median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.1f", m}'; }
p90() { sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int(NR*0.9+0.5)]}'; }

# (a) sequential submissions; (b) from the first submission until every job has finished.
t0=$(now)
for ((i = 0; i < N; i++)); do muster submit --wrap true -o /dev/null >/dev/null; done
t1=$(now)
wait_empty
t2=$(now)
awk -v n="$N" -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN {
  printf "submit: %d sequential muster submit: %.0f jobs/s (%.2f ms per call)\n", n, n / ((b - a) / 1e6), (b - a) / 1e3 / n
  printf "drain: %d trivial jobs, first submit -> all finished: %.0f jobs/s (%.2f s)\n", n, n / ((c - a) / 1e6), (c - a) / 1e6 }'

# (c) submit -> job start on an idle cluster: the job writes the time it started.
sleep 0.5
: > lat.txt
for ((i = 0; i < LAT_N; i++)); do
  s=$(now)
  id=$(muster submit --parsable -o /dev/null --wrap "date +%s%6N > $DIR/start.$i")
  wait_file "$DIR/start.$i" 1
  e=$(cat "$DIR/start.$i")
  echo $(( (e - s) / 1000 )) >> lat.txt
  wait_empty
done
echo "latency: submit -> start, $LAT_N jobs: p50 $(median < lat.txt) ms, p90 $(p90 < lat.txt) ms"

# (d) a 4-node gang with `muster run` on every node: submit -> last task started.
: > gang.txt
for ((i = 0; i < 10; i++)); do
  s=$(now)
  muster submit -N "$NODES" --gpus-per-node 8 -o /dev/null \
    --wrap "muster run date +%s%6N >> $DIR/gang.$i" >/dev/null
  wait_file "$DIR/gang.$i" "$NODES"
  e=$(sort -n "$DIR/gang.$i" | tail -1)
  echo $(( (e - s) / 1000 )) >> gang.txt
  wait_empty
done
echo "gang: $NODES-node job, submit -> all tasks of a muster run step started, 10 jobs: p50 $(median < gang.txt) ms, p90 $(p90 < gang.txt) ms"

# (e) queue views with many pending jobs (held, so nothing runs).
for ((i = 0; i < 1000; i++)); do muster submit -H --wrap true -o /dev/null >/dev/null; done
: > q.txt
for ((i = 0; i < 20; i++)); do s=$(now); muster queue >/dev/null; e=$(now); echo $(( (e - s) / 1000 )) >> q.txt; done
echo "queue: muster queue with 1000 pending, 20 calls: p50 $(median < q.txt) ms"
