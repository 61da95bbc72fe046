#!/usr/bin/env bash
# System test: the controller killed with SIGKILL at random moments (during recovery too) while
# concurrent clients submit, cancel, hold and release jobs and drain and resume nodes; after every
# round, nothing acknowledged is lost or doubled (tests/bench/crash_harness.cc says what is
# checked). ROUNDS (default 20) rounds; the benchmark variant is tests/bench/crash_bench.sh.
#   usage: crash_stest.sh BIN_DIR HARNESS [HARNESS_OPTIONS...]
set -euo pipefail
BIN=$(cd "${1:?usage: $0 BIN_DIR HARNESS}" && pwd)
HARNESS=${2:?usage: $0 BIN_DIR HARNESS}
ROUNDS=${ROUNDS:-20}
DIR=$(mktemp -d /tmp/muster-crash.XXXXXX)
cleanup() {
  rc=$?
  if [ $rc -ne 0 ]; then
    # The logs (and the state) stay for the post-mortem: the violation names jobs and rounds.
    kept=$(mktemp -d /tmp/muster-crash-failed.XXXXXX)
    cp -a "$DIR/cluster/log" "$DIR/cluster/state" "$kept/" 2>/dev/null || true
    echo "--- FAILED (rc=$rc); logs and state kept in $kept; controller log:" >&2
    tail -n 40 "$DIR"/cluster/log/musterctld.log >&2 || true
  fi
  "$BIN/muster" local down --dir "$DIR/cluster" --purge >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT
"$BIN/muster" local up --dir "$DIR/cluster" --nodes 4 --gpus-per-node 8 >/dev/null
mkdir -p "$DIR/cluster/work"
"$HARNESS" --cluster "$DIR/cluster" --musterctld "$BIN/musterctld" --rounds "$ROUNDS" \
  --clients 4 ${SEED:+--seed "$SEED"} "${@:3}"
