#!/usr/bin/env bash
# System test: network partitions between the controller and a compute node. The controller and
# three compute nodes each live in a network namespace of their own, joined through a bridge by
# veth pairs this test creates; a node is cut off by taking its port on the bridge down.
#   usage: partition_stest.sh BIN_DIR
# Checks (heartbeat 200 ms, NOT_RESPONDING after 1 s of silence, DOWN after 3 s):
#   - a node cut off goes NOT_RESPONDING, then DOWN; the 2-node gang on it is stopped on its
#     other node and requeued within the down timeout plus a second;
#   - when the link heals, the node registers again and the run it still had of the requeued gang
#     is killed there; the gang then runs again, once;
#   - a node whose link flaps faster than the down timeout never goes DOWN and its job is never
#     requeued.
# Needs root and iproute2; exits 77 (skipped) without them. Stops exactly the processes it
# started, by pid, and removes what it made.
set -euo pipefail
BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
. "$(dirname "$0")/lib.sh"
TAG="pt$$"
skip_without_netns "$TAG"
NS_SW="$TAG-sw" NS_CTL="$TAG-ctl"
NET=10.214.9
CTL_IP=$NET.1
DIR=$(mktemp -d /tmp/muster-pt.XXXXXX)
chmod 755 "$DIR"
cd "$DIR"  # batch output (slurm-%j.out) lands here, not where the test was started
PIDS=()
NAMESPACES=()
cleanup() {
  rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
    echo "--- FAILED (rc=$rc); logs:" >&2
    for f in "$DIR"/log/*.log; do echo "--- $f" >&2; tail -n 25 "$f" >&2; done
  fi
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  reap_leftovers "$DIR" || rc=1
  for ns in "${NAMESPACES[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$DIR"
  exit $rc
}
trap cleanup EXIT
now_ms() { echo $(( ${EPOCHREALTIME/./} / 1000 )); }

echo "== hosts: namespaces, a bridge, veth pairs"
ip netns add "$NS_SW"
NAMESPACES+=("$NS_SW")
ip -n "$NS_SW" link set lo up
ip -n "$NS_SW" link add br0 type bridge
ip -n "$NS_SW" link set br0 up
plug() {  # plug NAME IP: a host NAME with eth0 at IP, its port on the bridge named pNAME
  local ns="$TAG-$1"
  ip netns add "$ns"
  NAMESPACES+=("$ns")
  ip -n "$ns" link set lo up
  ip -n "$NS_SW" link add "p$1" type veth peer name eth0 netns "$ns"
  ip -n "$NS_SW" link set "p$1" master br0 up
  ip -n "$ns" addr add "$2/24" dev eth0
  ip -n "$ns" link set eth0 up
}
cut() { ip -n "$NS_SW" link set "p$1" down; }
heal() { ip -n "$NS_SW" link set "p$1" up; }
plug ctl $CTL_IP
for n in 1 2 3; do plug "n$n" "$NET.1$n"; done

mkdir -p "$DIR"/{log,run,state,spool}
CONF="$DIR/muster.toml"
cat > "$CONF" <<EOF
cluster_name = "pt"
[controller]
socket = "$DIR/run/musterctld.sock"
agent_address = "$CTL_IP:6817"
state_dir = "$DIR/state"
# The test's own bridge, nothing else on it.
insecure = true
[scheduling]
heartbeat_interval_ms = 200
node_not_responding_ms = 1000
node_down_ms = 3000
kill_grace_ms = 1000
[agent]
spool_dir = "$DIR/spool"
kill_jobs_on_stop = true
cgroup_root = "muster-$TAG"
[node_auth]
key_file = "$DIR/node-keys/%n.key"
[[nodes]]
names = "node[1-3]"
cpus = 4
memory_mb = 8000
gpus = 2
gpu_type = "h100"
[[partition]]
name = "gpu"
nodes = "node[1-3]"
default = true
EOF
"$BIN/muster" certs --node-keys --dir "$DIR/node-keys" --node 'node[1-3]' >/dev/null
cat > "$DIR/gpus.toml" <<EOF
[node]
cpus = 4
memory_mb = 8000
[gpus]
count = 2
model = "NVIDIA H100 80GB HBM3"
type = "h100"
memory_mb = 81559
EOF
export MUSTER_CONF="$CONF" PATH="$BIN:$PATH"

echo "== start: musterctld and three agents, each on its own host"
ip netns exec "$NS_CTL" "$BIN/musterctld" --config "$CONF" >"$DIR/log/musterctld.log" 2>&1 &
PIDS+=($!)
wait_for 20 muster info
for n in 1 2 3; do
  ip netns exec "$TAG-n$n" "$BIN/musterd" --config "$CONF" --name "node$n" \
    --gpu-fixture "$DIR/gpus.toml" --spool "$DIR/spool/node$n" \
    --step-address "$NET.1$n:0" >"$DIR/log/musterd-node$n.log" 2>&1 &
  PIDS+=($!)
done
idle_nodes() { [ "$(muster nodes | grep -c ' idle ')" = 3 ]; }
wait_for 30 idle_nodes
node_state() { muster nodes | awk -v n="$1" '$1 == n {print $2}'; }
job_json() { muster job show "$1" --json; }
state() { job_json "$1" | sed -n 's/.*"state":"\([A-Z_]*\)".*/\1/p'; }
requeues() { job_json "$1" | sed -n 's/.*"requeue_count":\([0-9]*\).*/\1/p'; }
is_state() { [ "$(state "$1")" = "$2" ]; }
# Each run of a job appends "JOBID RESTARTS HOST PID" as it starts.
RUNS="$DIR/runs"
touch "$RUNS"
chmod 666 "$RUNS"
script="echo \"\$SLURM_JOB_ID \$SLURM_RESTART_COUNT \$(hostname) \$\$\" >> $RUNS; exec sleep 600"

echo "== a node cut off: NOT_RESPONDING, then DOWN; its gang requeued within 3 s + 1 s"
# Not pinned: once requeued, the gang could start at once on the two nodes left.
gang=$(muster submit --parsable -N 2 --gpus-per-node=2 --wrap "$script")
wait_for 30 is_state "$gang" RUNNING
wait_for 10 grep -q "^$gang 0 " "$RUNS"
old_pid=$(awk -v j="$gang" '$1 == j && $2 == 0 {print $4}' "$RUNS")
kill -0 "$old_pid" || fail "the gang's batch script (pid $old_pid) is not running"
# The node running the batch script is the one cut off.
read -r first other < <(job_json "$gang" | sed -n 's/.*"nodes":\["\(node[0-9]\)","\(node[0-9]\)"\].*/\1 \2/p')
[ -n "$first" ] && [ -n "$other" ] || fail "cannot read the gang's nodes: $(job_json "$gang")"
t0=$(now_ms)
cut "n${first#node}"
wait_for 5 bash -c "muster nodes | grep -qE '^$first +not_responding'"
seen_nr=$(( $(now_ms) - t0 ))
wait_for 10 bash -c "[ \"\$(muster job show $gang --json | sed -n 's/.*\"requeue_count\":\([0-9]*\).*/\1/p')\" = 1 ]"
requeued=$(( $(now_ms) - t0 ))
echo "   NOT_RESPONDING seen after ${seen_nr} ms, requeued after ${requeued} ms"
[ "$seen_nr" -ge 700 ] || fail "node1 NOT_RESPONDING after only ${seen_nr} ms"
[ "$requeued" -le 4000 ] || fail "the gang was requeued ${requeued} ms after the cut (limit 4000)"
[ "$(node_state "$first")" = down ] || fail "$first is $(node_state "$first"), not down"
grep -q "node=$first DOWN" "$DIR/log/musterctld.log" || fail "no DOWN line for $first in the log"
is_state "$gang" PENDING || fail "the requeued gang is $(state "$gang")"
# Its batch script runs on the cut-off node; the other node it held was told to stop it.
wait_for 5 grep -q "job=$gang node=$other terminating" "$DIR/log/musterd-$other.log"

echo "== while cut off: the old run goes on there, so the gang starts nowhere else"
sleep 2  # two nodes are free all along
is_state "$gang" PENDING || fail "the requeued gang is $(state "$gang") while $first may still run it"
[ "$(grep -c "^$gang " "$RUNS")" = 1 ] || { cat "$RUNS"; fail "the gang started again meanwhile"; }
kill -0 "$old_pid" || fail "the old run on the cut-off node ended by itself"
muster job show "$gang" | grep -q "confirm-down $first" ||
  fail "the reason does not say what it waits for: $(muster job show "$gang")"

echo "== the link heals: $first registers again, its stale run is killed, then the gang runs again"
heal "n${first#node}"
# Checked every 50 ms: the new run never starts while the old one lives.
deadline=$(( $(date +%s) + 30 ))
until grep -q "^$gang 1 " "$RUNS"; do
  [ "$(date +%s)" -lt "$deadline" ] || fail "the gang did not run again within 30 s of the heal"
  sleep 0.05
done
! kill -0 "$old_pid" 2>/dev/null || fail "the gang runs again while its old run still runs"
wait_for 30 is_state "$gang" RUNNING
[ "$(grep -c "^$gang " "$RUNS")" = 2 ] || { cat "$RUNS"; fail "the gang started other than twice"; }
[ "$(requeues "$gang")" = 1 ] || fail "the gang was requeued $(requeues "$gang") times"
muster cancel "$gang"
wait_for 20 is_state "$gang" CANCELLED

echo "== a link that flaps faster than the down timeout: never DOWN, never requeued"
solo=$(muster submit --parsable -w node3 --wrap "$script")
wait_for 30 is_state "$solo" RUNNING
for _ in 1 2 3 4; do
  cut n3
  sleep 1.8
  heal n3
  sleep 1.2
done
wait_for 10 bash -c "muster nodes | grep -qE '^node3 +(allocated|mixed)'"
[ "$(requeues "$solo")" = 0 ] || fail "the flapping node's job was requeued $(requeues "$solo") times"
is_state "$solo" RUNNING || fail "the flapping node's job is $(state "$solo")"
! grep -q "node=node3 DOWN" "$DIR/log/musterctld.log" || fail "node3 was declared down while flapping"
grep -q "node=node3 NOT_RESPONDING" "$DIR/log/musterctld.log" ||
  fail "node3 never went NOT_RESPONDING: the link did not flap"
[ "$(grep -c "^$solo " "$RUNS")" = 1 ] || fail "the flapping node's job started more than once"
muster cancel "$solo"
wait_for 20 is_state "$solo" CANCELLED
echo "PASS"
