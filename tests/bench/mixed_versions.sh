#!/usr/bin/env bash
# A rolling upgrade, as the admin guide's "Upgrades" has it, from an earlier build to this one on
# a local cluster: everything starts on the OLD binaries with a 2-node gang running (jobs kept
# across an agent restart: kill_jobs_on_stop = false, as on real nodes); the controller is
# replaced by the NEW one (old agents, old and new commands against it, a new job run on old
# agents); then the agents one at a time. The gang runs throughout and is cancelled at the end
# by the new agents that adopted it. Exits non-zero at the first thing that does not hold.
#   usage: tests/bench/mixed_versions.sh OLD_BIN_DIR NEW_BIN_DIR
#   e.g.: git archive 24fd3bc | tar -x -C /tmp/old && cmake -S /tmp/old -B /tmp/old/build -G Ninja \
#           -DCMAKE_BUILD_TYPE=Release -DMUSTER_BUILD_TESTS=OFF && ninja -C /tmp/old/build \
#           musterctld musterd muster muster-stepd muster-keeper
#         tests/bench/mixed_versions.sh /tmp/old/build/bin build/release/bin
set -euo pipefail
OLD=$(cd "${1:?usage: $0 OLD_BIN_DIR NEW_BIN_DIR}" && pwd)
NEW=$(cd "${2:?usage: $0 OLD_BIN_DIR NEW_BIN_DIR}" && pwd)
DIR=$(mktemp -d /tmp/muster-mixed.XXXXXX)
C=$DIR/c
cleanup() {
  rc=$?
  "$NEW/muster" local down --dir "$C" --purge >/dev/null 2>&1 || true
  [ $rc -eq 0 ] || tail -n 5 "$C"/log/*.log >&2 2>/dev/null || true
  rm -rf "$DIR"
  exit $rc
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
wait_for() {  # wait_for SECONDS WHAT CMD...
  local deadline=$(($(date +%s) + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "timed out waiting for $what"
    sleep 0.2
  done
}
state() { "$NEW/muster" job show "$1" --json | grep -o '"state":"[A-Z_]*"' | head -1 | cut -d'"' -f4; }
is() { [ "$(state "$1")" = "$2" ]; }
all_up() {  # every node registered and responding
  [ "$("$NEW/muster" nodes --json | grep -oE '"state":"(idle|mixed|allocated)"' | wc -l)" = 4 ]
}
# registered_since LINE NODE: the controller's log has NODE registering after line LINE (a new
# registration, of the new controller or of a new agent).
registered_since() {
  tail -n +"$(($1 + 1))" "$C/log/musterctld.log" | grep -q "register node=$2 "
}
log_lines() { wc -l <"$C/log/musterctld.log"; }
# swap PIDFILE BIN_DIR: the daemon of PIDFILE stopped (SIGTERM, by pid) and started again from
# BIN_DIR with the same arguments and log, as a package upgrade's restart would.
swap() {
  local pidfile=$1 bin=$2 pid args=() prog log
  pid=$(cat "$pidfile")
  mapfile -d '' -t args <"/proc/$pid/cmdline"
  prog=$(basename "${args[0]}")
  log=$C/log/$(basename "$pidfile" .pid).log
  kill -TERM "$pid"
  for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && fail "$prog (pid $pid) did not stop"
  setsid "$bin/$prog" "${args[@]:1}" </dev/null >>"$log" 2>&1 &
  echo $! >"$pidfile"
  echo "  $prog: pid $pid ($(basename "$(dirname "${args[0]}")")) -> $! ($bin)"
}

echo "== everything on the old build ($("$OLD/muster" version))"
"$OLD/muster" local up --dir "$C" --nodes 4 --gpus-per-node 8 >/dev/null 2>&1
"$OLD/muster" local down --dir "$C" >/dev/null 2>&1
sed -i 's/^kill_jobs_on_stop = true$/kill_jobs_on_stop = false/' "$C/muster.toml"
grep -q '^kill_jobs_on_stop = false$' "$C/muster.toml" || fail "could not keep jobs across restarts"
"$OLD/muster" local up --dir "$C" --nodes 4 --gpus-per-node 8 >/dev/null 2>&1
export MUSTER_CONF=$C/muster.toml
cd "$DIR"
gang=$("$OLD/muster" submit --parsable -N 2 --gpus-per-node=8 -t 30 -o gang.out \
  --wrap 'echo started; sleep 600')
wait_for 30 "the gang to run" is "$gang" RUNNING

echo "== the controller upgraded; old agents"
gang_nodes=$("$NEW/muster" job show "$gang" --json | grep -o '"nodes":\[[^]]*\]' | head -1 | grep -o 'node[0-9]')
[ "$(wc -l <<<"$gang_nodes")" = 2 ] || fail "the gang's nodes: $gang_nodes"
echo "  the gang: job $gang on $(echo $gang_nodes)"
mark=$(log_lines)
swap "$C/run/musterctld.pid" "$NEW"
for n in 1 2 3 4; do wait_for 60 "old node$n to register with the new controller" registered_since "$mark" "node$n"; done
wait_for 60 "the old agents to respond" all_up
is "$gang" RUNNING || fail "the gang is $(state "$gang") after the controller's upgrade"
"$OLD/muster" queue | grep -q "$gang" || fail "the old muster cannot list the queue"
"$OLD/muster" job show "$gang" >/dev/null || fail "the old muster cannot show the gang"
one=$("$NEW/muster" submit --parsable -N 2 --gpus-per-node=8 -t 5 -o one.out --wrap 'hostname')
wait_for 60 "a new job on old agents" is "$one" COMPLETED
two=$("$OLD/muster" submit --parsable -N 1 -t 5 -o two.out --wrap 'true')
wait_for 60 "a job the old muster submitted" is "$two" COMPLETED

echo "== the agents upgraded one at a time, the gang running"
for n in 1 2 3 4; do
  mark=$(log_lines)
  swap "$C/run/musterd-node$n.pid" "$NEW"
  wait_for 60 "the new agent of node$n to register" registered_since "$mark" "node$n"
  wait_for 60 "node$n back" all_up
  if grep -qx "node$n" <<<"$gang_nodes"; then
    # It adopted the gang's part the old agent left running.
    tail -n +"$((mark + 1))" "$C/log/musterctld.log" | grep "register node=node$n " | grep -q "jobs=1" ||
      fail "the new agent of node$n did not report the gang"
  fi
  is "$gang" RUNNING || fail "the gang is $(state "$gang") after node$n's upgrade"
done
three=$("$NEW/muster" submit --parsable -N 4 -t 5 -o three.out --wrap 'true')
wait_for 60 "a 4-node job on the new agents" is "$three" COMPLETED
"$NEW/muster" cancel "$gang"
wait_for 60 "the gang to end" is "$gang" CANCELLED
grep -q started gang.out || fail "the gang's output is gone"
echo "mixed versions: OK (old $("$OLD/muster" version | cut -d' ' -f2), new $("$NEW/muster" version | cut -d' ' -f2))"
