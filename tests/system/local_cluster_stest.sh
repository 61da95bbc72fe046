#!/usr/bin/env bash
# System test: the real binaries and the real CLI, as a newcomer would use them.
#   usage: local_cluster_stest.sh BIN_DIR
# Starts `muster local up` (4 nodes x 8 fake H100), runs a 2-node gang job whose script uses
# `muster run`, kills the controller with SIGKILL while jobs run and wait, restarts it, and checks
# that every acknowledged job finishes. Stops exactly the processes it started (pid files).
set -euo pipefail
BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$BIN:$PATH"
DIR=$(mktemp -d /tmp/muster-stest.XXXXXX)
WORK="$DIR/work"
mkdir -p "$WORK"
cd "$WORK"
cleanup() {
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "--- FAILED (rc=$rc); logs:" >&2
    tail -n 30 "$DIR"/cluster/log/*.log >&2 || true
  fi
  muster local down --dir "$DIR/cluster" --purge >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
# wait_for SECONDS COMMAND...: poll until COMMAND succeeds.
wait_for() {
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "timed out waiting for: $*"
    sleep 0.1
  done
}
state() { muster job show "$1" --json | sed -n 's/.*"state":"\([A-Z_]*\)".*/\1/p'; }
is_state() { [ "$(state "$1")" = "$2" ]; }
json_field() { sed -n "s/.*\"$2\":\\([^,}]*\\).*/\\1/p" <<<"$1"; }

echo "== local up"
eval "$(muster local up --dir "$DIR/cluster" --nodes 4 --gpus-per-node 8)"
[ -n "${MUSTER_CONF:-}" ] || fail "local up printed no MUSTER_CONF"
[ "$(muster nodes | grep -c ' idle ')" = 4 ] || { muster nodes; fail "expected 4 idle nodes"; }

echo "== usage errors"
set +e
muster submit --no-such-option --wrap true 2>/dev/null; rc=$?
set -e
[ $rc = 2 ] || fail "unknown option should exit 2, got $rc"
set +e
out=$(muster submit --gres=gpu:9 --wrap true 2>&1); rc=$?
set -e
[ $rc = 1 ] && grep -q "asks for 9 GPUs per node" <<<"$out" || fail "impossible request not refused: $out"

echo "== 2-node gang job with muster run"
cat > gang.sh <<'SCRIPT'
#!/bin/bash
#SBATCH -J gang
#SBATCH -N 2
#SBATCH --gpus-per-node=8
muster run env
SCRIPT
id=$(muster submit --parsable gang.sh)
wait_for 60 is_state "$id" COMPLETED
out="slurm-$id.out"
[ -f "$out" ] || fail "no output file $out"
[ "$(grep -c '^SLURM_PROCID=' "$out")" = 2 ] || { cat "$out"; fail "expected 2 tasks"; }
grep -q '^SLURM_PROCID=0$' "$out" && grep -q '^SLURM_PROCID=1$' "$out" || fail "task ids"
[ "$(grep -c '^CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7$' "$out")" = 2 ] || fail "GPU binding"
grep -q '^SLURMD_NODENAME=node1$' "$out" && grep -q '^SLURMD_NODENAME=node2$' "$out" || fail "nodes"
grep -q '^SLURM_JOB_NODELIST=node\[1-2\]$' "$out" || fail "nodelist"
json=$(muster job show "$id" --json)
for f in '"id":' '"name":"gang"' '"user":' '"state":"COMPLETED"' '"reason":' '"nodes":\["node1","node2"\]' '"exit_code":0'; do
  grep -q "$f" <<<"$json" || fail "job JSON lacks $f: $json"
done
muster queue --all | grep -qE "^ +$id +gpu +gang" || fail "queue does not show job $id"

echo "== backfill: a reservation for the blocked gang, a short job runs beside it"
blocker=$(muster submit --parsable -N 3 --gpus-per-node=8 -t 10 --wrap 'sleep 300')
wait_for 30 is_state "$blocker" RUNNING
wide=$(muster submit --parsable -N 4 --gpus-per-node=8 -t 10 --wrap true)
short=$(muster submit --parsable -N 1 --gpus-per-node=8 -t 5 --wrap 'sleep 300')
wait_for 30 is_state "$short" RUNNING
is_state "$wide" PENDING || fail "the 4-node gang should wait for the 3-node job"
start=$(muster queue --start --noheader -j "$wide")
grep -qE "^ +$wide +gpu .* 20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T" <<<"$start" || fail "no expected start: $start"
muster job show "$wide" | grep -q "reserved for this job" || fail "no reservation detail"
muster queue --priority --noheader -j "$wide" | grep -qE "^ +$wide +gpu" || fail "no priority view"
muster cancel "$blocker" "$wide" "$short"
for id in "$blocker" "$wide" "$short"; do wait_for 30 is_state "$id" CANCELLED; done

echo "== node constraints: --nodelist, --exclude, --constraint, --topology"
on4=$(muster submit --parsable -w node4 --wrap true)
not1=$(muster submit --parsable -N 3 -x node1 --wrap true)
leaf1=$(muster submit --parsable -N 2 -C 'leaf1&h100' --topology=nvlink --wrap true)
range=$(muster submit --parsable -N 2-4 --gpus-per-node=8 -o range.out \
  --wrap 'echo "nodes=$SLURM_NNODES tasks=$SLURM_NTASKS"')
shard=$(muster submit --parsable --gres=shard:2 -o shard.out \
  --wrap 'echo "gpus=$CUDA_VISIBLE_DEVICES shards=$SLURM_SHARDS_ON_NODE"')
for id in "$on4" "$not1" "$leaf1" "$range" "$shard"; do wait_for 30 is_state "$id" COMPLETED; done
grep -qE '^gpus=[0-7] shards=2$' shard.out || fail "--gres=shard:2: $(cat shard.out)"
grep -qE '^nodes=[2-4] tasks=[2-4]$' range.out || fail "-N 2-4: $(cat range.out)"
muster job show "$on4" --json | grep -q '"nodes":\["node4"\]' || fail "-w node4 ran elsewhere"
muster job show "$not1" --json | grep -q '"nodes":\["node2","node3","node4"\]' || fail "-x node1"
muster job show "$leaf1" --json | grep -q '"nodes":\["node1","node2"\]' || fail "-C leaf1"
muster job show "$on4" | grep -q "ReqNodeList=node4 " || fail "job show lacks ReqNodeList"
set +e
out=$(muster submit -w node9 --wrap true 2>&1); rc=$?
set -e
[ $rc = 1 ] && grep -q "no such node: node9" <<<"$out" || fail "unknown node not refused: $out"
set +e
out=$(muster submit -C fpga --wrap true 2>&1); rc=$?
set -e
[ $rc = 1 ] && grep -q "features fpga" <<<"$out" || fail "unknown feature not refused: $out"

echo "== cancel and time limit"
long=$(muster submit --parsable --wrap 'sleep 300')
limited=$(muster submit --parsable -t 0:01 --wrap 'sleep 300')
wait_for 30 is_state "$long" RUNNING
muster cancel "$long"
wait_for 30 is_state "$long" CANCELLED
wait_for 30 is_state "$limited" TIMEOUT

echo "== controller killed with SIGKILL while jobs run and queue"
ids=()
for i in 1 2 3 4 5 6; do ids+=("$(muster submit --parsable -N 2 --gpus-per-node=8 --wrap 'sleep 1')"); done
wait_for 30 is_state "${ids[0]}" RUNNING
ctld=$(cat "$DIR/cluster/run/musterctld.pid")
kill -9 "$ctld"
wait_for 10 bash -c "! kill -0 $ctld"
muster local up --dir "$DIR/cluster" --nodes 4 --gpus-per-node 8 >/dev/null
for id in "${ids[@]}"; do wait_for 60 is_state "$id" COMPLETED; done
next=$(muster submit --parsable --wrap true)
[ "$next" -gt "${ids[5]}" ] || fail "job id $next reused"

echo "== what the agents found and how they isolate jobs"
json=$(muster nodes --json)
grep -q '"isolation":"' <<<"$json" || fail "no isolation in nodes --json: $json"
grep -q '"health":""' <<<"$json" || fail "no GPU health in nodes --json"
probe=$("$BIN/musterd" --probe --name probe-node --gpu-fixture "$DIR/cluster/gpus.toml")
grep -q '^gpu7: uuid=GPU-fixture-0007 ' <<<"$probe" || fail "musterd --probe: $probe"
grep -q '^\[\[nodes\]\]$' <<<"$probe" || fail "musterd --probe prints no [[nodes]] entry"
topo=$(muster topology ibnetdiscover "$ROOT/tests/data/ib/ibnetdiscover_dgx-h100-superpod_ndr-leaf-spine.out")
grep -q 'names = "a07-p1-dgx-03-c\[01-18\]"' <<<"$topo" || fail "topology ibnetdiscover: $topo"

echo "== Slurm front ends (issue 5, first step): sbatch through a link"
muster compat install "$DIR/compat" >/dev/null
id=$("$DIR/compat/sbatch" --parsable -o /dev/null --wrap true)
wait_for 30 is_state "$id" COMPLETED
out=$("$DIR/compat/sbatch" -o /dev/null --wrap true)
[[ "$out" =~ ^Submitted\ batch\ job\ [0-9]+$ ]] || fail "sbatch said: $out"
set +e
err=$("$DIR/compat/sbatch" -p nosuch --wrap true 2>&1); rc=$?
set -e
[ $rc = 1 ] && [[ "$err" == "sbatch: error: "* ]] || fail "sbatch error: rc=$rc $err"
held=$("$DIR/compat/sbatch" --parsable -H -J held -o /dev/null --wrap true)
line=$("$DIR/compat/squeue" -h -j "$held" -o '%i|%j|%T|%t|%D|%R|%r|%a|%K')
[ "$line" = "$held|held|PENDING|PD|1|(JobHeldUser)|JobHeldUser|(null)|N/A" ] || fail "squeue -o: $line"
hdr=$("$DIR/compat/squeue" -j "$held" | head -1)
[ "$hdr" = "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)" ] ||
  fail "squeue header: $hdr"
[ "$("$DIR/compat/squeue" -h -j "$held" -o '%.6i|%5j|')" = "$(printf '%6s' "$held")|held |" ] ||
  fail "squeue widths"
"$DIR/compat/scancel" "$held" || fail "scancel $held"
wait_for 30 is_state "$held" CANCELLED
err=$("$DIR/compat/scancel" 999999 2>&1) || fail "scancel of an unknown id must exit 0, as Slurm's"
[ "$err" = "scancel: error: Kill job error on job id 999999: Invalid job id specified" ] ||
  fail "scancel said: $err"
mkdir -p "$DIR/slurm" && touch "$DIR/slurm/sbatch"
if muster compat install "$DIR/slurm" >/dev/null 2>&1; then fail "compat install replaced a file"; fi
muster compat remove "$DIR/compat" >/dev/null
[ ! -e "$DIR/compat/sbatch" ] || fail "compat remove left the link"

echo "== local down stops exactly its processes"
pids=$(cat "$DIR"/cluster/run/*.pid)
muster local down --dir "$DIR/cluster"
for p in $pids; do
  if kill -0 "$p" 2>/dev/null && ! grep -q '^State:.*Z' /proc/"$p"/status; then fail "pid $p still runs"; fi
done
echo "PASS"
