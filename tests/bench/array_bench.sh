#!/usr/bin/env bash
# One job array of trivial jobs on a local cluster: the submission call and the drain (first
# submission until the queue is empty), the issue's array figures.
#   usage: tests/bench/array_bench.sh [BIN_DIR]     (default build/release/bin)
# Env: N (tasks, default 1000; past 1000 the cluster's scheduling.max_array_size is raised to
# N + 1), RUNS (default 3), HOLD (1: submit the array held and time the submission call only,
# then cancel it: no drain), JOB_STATE_ON_DISK (1: the jobs' state in the agents' spool on disk,
# as without agent.job_state_dir, instead of the tmpfs /dev/shm that `muster local up` picks).
set -euo pipefail
BIN=$(cd "${1:-build/release/bin}" && pwd)
N=${N:-1000}
RUNS=${RUNS:-3}
export PATH="$BIN:$PATH"
now() { echo "${EPOCHREALTIME/./}"; }  # microseconds
for ((run = 1; run <= RUNS; run++)); do
  DIR=$(mktemp -d /tmp/muster-array-bench.XXXXXX)
  trap 'muster local down --dir "$DIR/cluster" --purge >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
  if [ "${JOB_STATE_ON_DISK:-0}" = 1 ] || [ "$N" -gt 1000 ]; then
    # A first start writes the config; it is edited before the cluster that is measured starts.
    muster local up --dir "$DIR/cluster" --nodes 4 --gpus-per-node 8 >/dev/null 2>&1
    muster local down --dir "$DIR/cluster" >/dev/null
    if [ "$N" -gt 1000 ]; then
      sed -i "s/^\[scheduling\]\$/[scheduling]\nmax_array_size = $((N + 1))/" "$DIR/cluster/muster.toml"
    fi
  fi
  if [ "${JOB_STATE_ON_DISK:-0}" = 1 ]; then
    # The tmpfs directory that first start made is ours to remove; `local down --purge` only
    # removes the one the config still names.
    shm=$(sed -n 's/^job_state_dir = "\(\/dev\/shm\/muster-local-[0-9a-f]*\)"$/\1/p' "$DIR/cluster/muster.toml")
    [ -z "$shm" ] || rm -rf "$shm"
    sed -i '/^job_state_dir = /d' "$DIR/cluster/muster.toml"
  fi
  eval "$(muster local up --dir "$DIR/cluster" --nodes 4 --gpus-per-node 8 2>/dev/null)"
  sleep 1  # the agents' first heartbeats, out of the way
  t0=$(now)
  if [ "${HOLD:-0}" = 1 ]; then
    id=$(muster submit --parsable --hold --array="1-$N" -o /dev/null --wrap true)
    t1=$(now)
    awk -v n="$N" -v a="$t0" -v b="$t1" -v r="$run" 'BEGIN {
      printf "run %d: %d-task array, held: submission call %.1f ms\n", r, n, (b - a) / 1e3 }'
    muster cancel "$id"
    muster local down --dir "$DIR/cluster" --purge >/dev/null 2>&1 || true
    rm -rf "$DIR"
    trap - EXIT
    continue
  fi
  muster submit --array="1-$N" -o /dev/null --wrap true >/dev/null
  t1=$(now)
  until [ -z "$(muster queue --noheader)" ]; do sleep 0.05; done
  t2=$(now)
  awk -v n="$N" -v a="$t0" -v b="$t1" -v c="$t2" -v r="$run" 'BEGIN {
    printf "run %d: %d-task array: submission call %.1f ms; drained %.0f tasks/s (%.2f s)\n",
           r, n, (b - a) / 1e3, n / ((c - a) / 1e6), (c - a) / 1e6 }'
  muster local down --dir "$DIR/cluster" --purge >/dev/null 2>&1 || true
  rm -rf "$DIR"
  trap - EXIT
done
