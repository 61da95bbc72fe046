#!/usr/bin/env bash
# The crash harness's long run: ROUNDS (default 500) SIGKILLs of the controller under 4
# concurrent clients on a 4-node local cluster; prints each round and the summary (violations,
# which must be 0, and the restart times: start to first answered request).
#   usage: tests/bench/crash_bench.sh [BUILD_DIR]     (default build/release)
# Env: ROUNDS, SEED (default: the clock), SUMMARY (a file for the summary's JSON).
set -euo pipefail
BUILD=$(cd "${1:-build/release}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ROUNDS=${ROUNDS:-500} SEED=${SEED:-} exec bash "$ROOT/tests/system/crash_stest.sh" \
  "$BUILD/bin" "$BUILD/bench/crash_harness" ${SUMMARY:+--summary "$SUMMARY"}
