#!/usr/bin/env bash
# System test: a hot standby (`muster local up --standby`: an etcd of its own on loopback, ctl-a
# and ctl-b) while concurrent clients submit, cancel, hold and release jobs and drain and resume
# nodes: each round stops the leading controller with SIGKILL or (every other round) SIGSTOP; the
# standby must serve (the takeover time is reported), a frozen leader must stop on its own once
# thawed (fenced), and nothing acknowledged is lost or doubled (tests/bench/crash_harness.cc,
# --failover). ROUNDS (default 6) rounds.
#   usage: failover_stest.sh BIN_DIR HARNESS [HARNESS_OPTIONS...]
set -euo pipefail
BIN=$(cd "${1:?usage: $0 BIN_DIR HARNESS}" && pwd)
HARNESS=${2:?usage: $0 BIN_DIR HARNESS}
ROUNDS=${ROUNDS:-6}
if [ ! -x /usr/bin/etcd ]; then echo "SKIP: needs etcd (Debian's etcd-server)"; exit 77; fi
DIR=$(mktemp -d /tmp/muster-failover.XXXXXX)
cleanup() {
  rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
    kept=$(mktemp -d /tmp/muster-failover-failed.XXXXXX)
    cp -a "$DIR/cluster/log" "$kept/" 2>/dev/null || true
    echo "--- FAILED (rc=$rc); logs kept in $kept; controllers' logs:" >&2
    tail -n 20 "$DIR"/cluster/log/musterctld-ctl-*.log >&2 || true
  fi
  "$BIN/muster" local down --dir "$DIR/cluster" --purge >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT
"$BIN/muster" local up --dir "$DIR/cluster" --nodes 4 --gpus-per-node 8 --standby >/dev/null
mkdir -p "$DIR/cluster/work"
"$HARNESS" --cluster "$DIR/cluster" --musterctld "$BIN/musterctld" --rounds "$ROUNDS" \
  --clients 4 --failover --summary "$DIR/summary.json" ${SEED:+--seed "$SEED"} "${@:3}"
# Every takeover within 5 s of the leader's stop (a 2 s lease here).
python3 - "$DIR/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["violations"] == 0, s
assert s["restart_ms_max"] < 5000, "a takeover took %.0f ms" % s["restart_ms_max"]
print("takeovers: median %.0f ms, max %.0f ms over %d rounds (%d frozen)" %
      (s["restart_ms_median"], s["restart_ms_max"], s["rounds"], s["frozen_rounds"]))
PY
