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
  # What the test started in the background, by PID, and every job's steps: once the test has
  # made its agents keep jobs across a stop, a failure would otherwise leave steps (and the
  # srun holding them) running after the cluster is gone.
  for p in ${srun_pid:-} ${pty_pid:-}; do kill "$p" 2>/dev/null || true; done
  if muster cancel --user "$(id -un)" >/dev/null 2>&1; then
    for _ in $(seq 100); do
      [ -z "$(muster queue --noheader 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  muster local down --dir "$DIR/cluster" --purge >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT

. "$ROOT/tests/system/lib.sh"
# --json keeps a job's bytes as they are (names and paths need not be UTF-8): read it bytewise.
state() { muster job show "$1" --json | LC_ALL=C sed -n 's/.*"state":"\([A-Z_]*\)".*/\1/p'; }
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
# A 100 MB script is refused by the CLI itself, after reading no more than the limit.
{ echo '#!/bin/sh'; head -c 100000000 /dev/zero | tr '\0' '#'; } > huge.sh
set +e
out=$(muster submit huge.sh 2>&1); rc=$?
set -e
rm -f huge.sh
[ $rc = 2 ] && grep -q "larger than 4 MiB" <<<"$out" || fail "100 MB script not refused: $rc $out"

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

# Unix paths and names are bytes: a job submitted from a Latin-1 directory with a Latin-1 name
# runs there, writes its output there, and views escape what is not UTF-8.
latin=$(printf 'caf\351')
mkdir -p "$latin"
id=$(cd "$latin" && muster submit --parsable -J "$(printf 'r\351sultat')" \
  -o "$(printf 'sortie-\351t\351-%%j.out')" --wrap pwd) || fail "a Latin-1 job is refused"
wait_for 60 is_state "$id" COMPLETED
out="$latin/$(printf 'sortie-\351t\351-')$id.out"
[ -f "$out" ] || { ls "$latin"; fail "no output file in the Latin-1 directory"; }
[ "$(cat "$out")" = "$PWD/$latin" ] || fail "the job ran in $(cat "$out"), not $PWD/$latin"
muster queue --all | grep -qF ' r\xe9sul ' || fail "the queue does not escape the job's name"
muster job show "$id" | grep -qF 'JobName=r\xe9sultat' || fail "job show does not escape the name"
muster job show "$id" | grep -qF 'WorkDir=/' || fail "job show has no WorkDir"
muster job show "$id" | LC_ALL=C grep -q "$(printf '\351')" && fail "job show prints a byte that is not UTF-8"
# A launch that fails on such a path reports it (the agent's message names the path) and the
# node's session goes on: the next job runs.
id=$(muster submit --parsable -D "/nonexistent/$latin" --wrap true) || fail "-D refused"
wait_for 60 is_state "$id" FAILED
muster job show "$id" | grep -qF 'caf\xe9' || { muster job show "$id"; fail "no reason naming the path"; }
id=$(muster submit --parsable --wrap true)
wait_for 60 is_state "$id" COMPLETED

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
# The state directory checked offline, beside the running controller, read-only.
check=$("$BIN/musterctld" --check-state "$DIR/cluster/state") || fail "--check-state: $check"
grep -q "^sound$" <<<"$check" && grep -q "^  jobs " <<<"$check" || fail "--check-state said: $check"

echo "== what the agents found and how they isolate jobs"
json=$(muster nodes --json)
grep -q '"isolation":"' <<<"$json" || fail "no isolation in nodes --json: $json"
grep -q '"health":""' <<<"$json" || fail "no GPU health in nodes --json"
probe=$("$BIN/musterd" --probe --name probe-node --gpu-fixture "$DIR/cluster/gpus.toml")
grep -q '^gpu7: uuid=GPU-fixture-0007 ' <<<"$probe" || fail "musterd --probe: $probe"
grep -q '^\[\[nodes\]\]$' <<<"$probe" || fail "musterd --probe prints no [[nodes]] entry"
topo=$(muster topology ibnetdiscover "$ROOT/tests/data/ib/ibnetdiscover_dgx-h100-superpod_ndr-leaf-spine.out")
grep -q 'names = "a07-p1-dgx-03-c\[01-18\]"' <<<"$topo" || fail "topology ibnetdiscover: $topo"

echo "== Slurm front ends: sbatch, squeue, scancel through links"
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
[ "$("$DIR/compat/squeue" -h -j "$held" -O 'JobID:.6,Name:5,State:8')" = "$(printf '%6s' "$held")held PENDING " ] ||
  fail "squeue -O: $("$DIR/compat/squeue" -h -j "$held" -O 'JobID:.6,Name:5,State:8')"
# squeue --json: Slurm's shape and field names (muster queue --json keeps Muster's).
"$DIR/compat/squeue" --json -j "$held" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["meta"]["plugin"]["type"] == "openapi/v0.0.38" and d["errors"] == [], d["meta"]
j = d["jobs"][0]
assert j["job_state"] == "PENDING" and j["state_reason"] == "JobHeldUser", j
assert j["name"] == "held" and j["user_name"] and j["array_task_id"] is None, j
assert isinstance(j["submit_time"], int) and j["node_count"] == 1, j
' || fail "squeue --json is not Slurm-shaped"
muster queue --json -j "$held" | grep -q '"state":"PENDING"' || fail "muster queue --json"
# The default view streams rows as squeue orders them: pending first, then running (with nodes).
busy=$("$DIR/compat/sbatch" --parsable -J busy -N2 -o /dev/null --wrap 'sleep 60')
wait_for 30 is_state "$busy" RUNNING
rows=$("$DIR/compat/squeue" -h -j "$busy,$held" | awk '{print $1, $3, $5, $7, $8}')
[ "$rows" = "$(printf '%s held PD 1 (JobHeldUser)\n%s busy R 2 node[1-2]' "$held" "$busy")" ] ||
  fail "squeue default rows: $rows"
# A batch library's active and waiting lists, as it asks for them: every Slurm state code taken.
me=$(id -un)
active=$("$DIR/compat/squeue" --user="$me" --states=R,S,CG,RS,SI,SO,ST --noheader --format=%i -r)
waiting=$("$DIR/compat/squeue" --user="$me" --states=PD,CF,RF,RH,RQ,SE --noheader --format=%i -r)
[ "$active" = "$busy" ] && [ "$waiting" = "$held" ] ||
  fail "squeue by Slurm's state codes: active=[$active] waiting=[$waiting]"
[ "$("$DIR/compat/squeue" --me -h -o %i | sort -n | tr '\n' ' ')" = "$(printf '%s\n%s\n' "$held" "$busy" | sort -n | tr '\n' ' ')" ] ||
  fail "squeue --me: $("$DIR/compat/squeue" --me -h -o %i)"
long=$("$DIR/compat/squeue" -l -j "$busy")
[[ "$(sed -n 2p <<<"$long")" =~ ^\ +JOBID\ PARTITION\ +NAME\ +USER\ +STATE\ +TIME\ TIME_LIMI\ +NODES\ NODELIST ]] &&
  [[ "$(sed -n 3p <<<"$long")" =~ \ RUNNING\  ]] || fail "squeue -l: $long"
# The same manager's task launch and status fallback, as it runs them.
out=$("$DIR/compat/srun" --jobid="$busy" --overlap -n1 --cpu-bind=q hostname 2>&1) ||
  fail "srun --cpu-bind=q: $out"
"$DIR/compat/scontrol" show jobid -dd "$busy" | grep -q "^JobId=$busy " ||
  fail "scontrol show jobid -dd: $("$DIR/compat/scontrol" show jobid -dd "$busy" 2>&1)"
one=$("$DIR/compat/scontrol" -o show job "$busy")
[ "$(wc -l <<<"$one")" = 1 ] && [[ "$one" =~ ^JobId=$busy\ JobName=busy\ UserId= ]] ||
  fail "scontrol -o show job: $one"
[ "$("$DIR/compat/scontrol" --oneliner show partition gpu | wc -l)" = 1 ] || fail "scontrol -o show partition"
# A workflow engine's start-up: the configuration in Slurm's lines, the controller's ping.
config=$("$DIR/compat/scontrol" show config) || fail "scontrol show config"
grep -q '^SchedulerTimeSlice      = 30 sec$' <<<"$config" &&
  grep -q "^SLURM_CONF              = $MUSTER_CONF\$" <<<"$config" &&
  grep -q ' is UP$' <<<"$config" || fail "scontrol show config: $config"
[ "$("$DIR/compat/scontrol" ping)" = "Slurmctld(primary) at 127.0.0.1 is UP" ] ||
  fail "scontrol ping: $("$DIR/compat/scontrol" ping)"
[ "$("$DIR/compat/scontrol" version | head -1)" = "slurm 22.05.0" ] || fail "scontrol version"
for c in sbatch srun salloc squeue sinfo sacct scancel scontrol sacctmgr sshare sprio sreport sdiag; do
  [ "$("$DIR/compat/$c" --version | head -1)" = "slurm 22.05.0" ] || fail "$c --version"
done
# --test-only forecasts and submits nothing; explain says what a waiting job waits for.
err=$("$DIR/compat/sbatch" --test-only -N1 -o /dev/null --wrap true 2>&1 >/dev/null) ||
  fail "sbatch --test-only: $err"
[[ "$err" =~ ^sbatch:\ Job\ [0-9]+\ to\ start\ at\ [0-9T:-]+\ using\ 1\ processors\ on\ nodes\ node[1-4]\ in\ partition\ gpu$ ]] ||
  fail "sbatch --test-only said: $err"
[ "$("$DIR/compat/squeue" -h | wc -l)" = 2 ] || fail "--test-only submitted a job"
wide=$("$DIR/compat/sbatch" --parsable -N4 --exclusive -o /dev/null --wrap true)
has_reason() { [ "$("$DIR/compat/squeue" -h -j "$1" -o %r)" = "$2" ]; }
wait_for 10 has_reason "$wide" Resources
x=$(muster explain "$wide")
grep -q "^Partition gpu: 4 nodes; the job needs 4, 2 could take one of its slots now$" <<<"$x" ||
  fail "muster explain: $x"
grep -qE "^ +2 nodes +not idle \(the job wants whole nodes\) +node\[1-2\]$" <<<"$x" || fail "explain groups: $x"
grep -q "job $busy (.*) on node\[1-2\], ends no time limit" <<<"$x" || fail "explain holders: $x"
muster explain "$wide" --json | grep -q '"fit_now":2' || fail "explain --json"
"$DIR/compat/scontrol" show job "$wide" | grep -q "^   Explain=Resources; 2 of 4 nodes in gpu can take it now, it needs 4; rank 1 of 1" ||
  fail "scontrol Explain=: $("$DIR/compat/scontrol" show job "$wide")"
"$DIR/compat/scancel" "$wide" || fail "scancel $wide"
# Selectors that match none of them cancel none: another account, a reservation, a wckey.
"$DIR/compat/scancel" --me -A nosuch && "$DIR/compat/scancel" --me -R nosuch &&
  "$DIR/compat/scancel" --me --wckey=w --hurry -v || fail "scancel selectors"
[ "$(state "$held")" = PENDING ] && [ "$(state "$busy")" = RUNNING ] ||
  fail "scancel selectors cancelled what they do not name"
"$DIR/compat/scancel" "$held" "$busy" || fail "scancel $held $busy"
wait_for 30 is_state "$held" CANCELLED
wait_for 30 is_state "$busy" CANCELLED
err=$("$DIR/compat/scancel" 999999 2>&1) || fail "scancel of an unknown id must exit 0, as Slurm's"
[ "$err" = "scancel: error: Kill job error on job id 999999: Invalid job id specified" ] ||
  fail "scancel said: $err"

echo "== srun, salloc and sacct through links"
C="$DIR/compat"
export PATH="$C:$PATH"  # as a Slurm user would: the compat directory first
out=$("$C/srun" -N2 -n4 -l sh -c 'echo $SLURM_PROCID/$SLURM_NTASKS/$SLURM_NODEID' | sort)
[ "$out" = "$(printf '0: 0/4/0\n1: 1/4/0\n2: 2/4/1\n3: 3/4/1')" ] || fail "srun -N2 -n4 -l: $out"
# -m: which task ids each node gets (each node's count stays): cyclic deals them round the
# nodes, plane=N in runs of N; -l labels, SLURM_LOCALID and SLURM_GTIDS follow.
out=$("$C/srun" -N2 -n4 -m cyclic -l sh -c 'echo $SLURMD_NODENAME $SLURM_NODEID $SLURM_LOCALID $SLURM_GTIDS $SLURM_DISTRIBUTION' | sort)
[ "$out" = "$(printf '0: node1 0 0 0,2 cyclic\n1: node2 1 0 1,3 cyclic\n2: node1 0 1 0,2 cyclic\n3: node2 1 1 1,3 cyclic')" ] ||
  fail "srun -N2 -n4 -m cyclic: $out"
out=$("$C/srun" -N2 -n8 -m plane=2 sh -c 'echo $SLURM_NODEID/$SLURM_PROCID' | sort | tr '\n' ' ')
[ "$out" = "0/0 0/1 0/4 0/5 1/2 1/3 1/6 1/7 " ] || fail "srun -N2 -n8 -m plane=2: $out"
out=$("$C/srun" -N2 -n5 -m cyclic sh -c 'echo $SLURM_NODEID/$SLURM_PROCID' | sort | tr '\n' ' ')
[ "$out" = "0/0 0/2 0/4 1/1 1/3 " ] || fail "srun -N2 -n5 -m cyclic: $out"
err=$("$C/srun" -N2 -m arbitrary true 2>&1) && fail "srun -m arbitrary was not refused"
grep -q "SLURM_HOSTFILE" <<<"$err" || fail "srun -m arbitrary said: $err"
# sbatch -m sets the job's steps' layout (SLURM_DISTRIBUTION); srun's own -m wins.
dist=$("$C/sbatch" --parsable -N2 -n4 -m plane=1 -o dist.out --wrap \
  'echo "batch $SLURM_DISTRIBUTION $SLURM_DIST_PLANESIZE"; srun sh -c "echo step \$SLURM_NODEID/\$SLURM_PROCID"; srun -m block sh -c "echo block \$SLURM_NODEID/\$SLURM_PROCID"')
wait_for 60 is_state "$dist" COMPLETED
# (Only the tasks' lines: srun may say on stderr that it waited for the first step's end.)
[ "$(grep -E '^(batch|step|block) ' dist.out | sort | tr '\n' ' ')" = "batch plane 1 block 0/0 block 0/1 block 1/2 block 1/3 step 0/0 step 0/2 step 1/1 step 1/3 " ] ||
  fail "sbatch -m plane=1: $(cat dist.out)"
set +e
"$C/srun" -N2 sh -c 'exit $((SLURM_PROCID * 3))' 2>/dev/null; rc=$?
set -e
[ $rc = 3 ] || fail "srun exit code is the highest task's: got $rc"
# A failing task with -K takes the step down at once, and srun says which task failed.
start=$(date +%s)
set +e
err=$("$C/srun" -K -N2 sh -c '[ $SLURM_PROCID = 1 ] && exit 7; sleep 30' 2>&1); rc=$?
set -e
[ $rc = 7 ] && [ $(( $(date +%s) - start )) -lt 10 ] || fail "srun -K: rc=$rc $err"
grep -q "srun: error: node2: task 1: Exited with exit code 7" <<<"$err" || fail "srun -K said: $err"
# Ctrl-C reaches the tasks, and their exit code comes back.
"$C/srun" -N2 sh -c 'trap "echo INT\$SLURM_PROCID; exit 3" INT; touch int.ready.$SLURM_PROCID; sleep 30 & wait' >int.out 2>int.err &
srun_pid=$!
# Each task says when its trap is set.
both_ready() { [ -e int.ready.0 ] && [ -e int.ready.1 ]; }
wait_for 10 both_ready
kill -INT $srun_pid
set +e
wait $srun_pid; rc=$?
set -e
[ $rc = 3 ] && [ "$(sort int.out | tr '\n' ' ')" = "INT0 INT1 " ] ||
  fail "srun did not forward SIGINT: rc=$rc $(cat int.out int.err)"
# Standard input: task 0 by default, every task with --input=all, one with -i N, a file.
out=$(echo "in" | "$C/srun" -N2 -n3 sh -c 'read x; echo "$SLURM_PROCID [$x]"' | sort | tr '\n' ' ')
[ "$out" = "0 [in] 1 [] 2 [] " ] || fail "srun stdin to task 0: $out"
out=$(printf 'a\nb\n' | "$C/srun" -N2 -n2 --input=all sh -c 'echo $SLURM_PROCID $(cat)' | sort | tr '\n' ' ')
[ "$out" = "0 a b 1 a b " ] || fail "srun --input=all: $out"
out=$(echo "in" | "$C/srun" -n2 -i 1 sh -c 'read x; echo "$SLURM_PROCID [$x]"' | sort | tr '\n' ' ')
[ "$out" = "0 [] 1 [in] " ] || fail "srun -i 1: $out"
[ "$(seq 1 100000 | "$C/srun" -n1 wc -l)" = 100000 ] || fail "srun stdin lost data"
echo "from a file" > stdin.txt
out=$("$C/srun" -n2 -i stdin.txt sh -c 'read x; echo "$SLURM_PROCID: $x"' | sort | tr '\n' ' ')
[ "$out" = "0: from a file 1: from a file " ] || fail "srun -i FILE: $out"
# -o/-e patterns: files written on the nodes, per task (%t), per node (%N), or shared.
"$C/srun" -N2 -n4 -o 'task-%j.%s-%t.out' sh -c 'echo "t$SLURM_PROCID $SLURMD_NODENAME"' ||
  fail "srun -o"
f=$(ls task-*-3.out)
[ "$(cat "$f")" = "t3 node2" ] || fail "srun -o %t: $f: $(cat "$f")"
[[ "$f" =~ ^task-[0-9]+\.[0-9]+-3\.out$ ]] || fail "srun -o %j.%s: $f"
"$C/srun" -N2 -n4 -o shared.out -e 'err-%N.txt' sh -c 'echo o$SLURM_PROCID; echo e$SLURM_PROCID >&2' ||
  fail "srun -o -e"
[ "$(sort shared.out | tr '\n' ' ')" = "o0 o1 o2 o3 " ] || fail "srun -o shared: $(cat shared.out)"
[ "$(sort err-node2.txt | tr '\n' ' ')" = "e2 e3 " ] || fail "srun -e %N: $(cat err-node2.txt)"
out=$("$C/srun" -n1 -e 'only-err-%t.txt' sh -c 'echo to-srun; echo to-file >&2')
[ "$out" = "to-srun" ] && [ "$(cat only-err-0.txt)" = "to-file" ] ||
  fail "srun -e alone: out=$out file=$(cat only-err-0.txt)"
# --bcast: a program from a directory only its owner reads, copied to each node and run there.
mkdir -p private bcast-dest bcast-cwd
chmod 700 private
printf '#!/bin/sh\necho "$SLURMD_NODENAME $0"\n' > private/bprog
chmod 700 private/bprog
out=$("$C/srun" -N2 --bcast="$WORK/bcast-dest/" private/bprog | sort) || fail "srun --bcast=DIR/: $out"
re="^node1 $WORK/bcast-dest/slurm_bcast_[0-9]+\.[0-9]+_node1 node2 $WORK/bcast-dest/slurm_bcast_[0-9]+\.[0-9]+_node2 $"
[[ "$(echo $out) " =~ $re ]] || fail "srun --bcast=DIR/: each node runs its own copy: $out"
for n in node1 node2; do
  f=$(ls bcast-dest/slurm_bcast_*_$n)
  [ "$(stat -c '%u %a' "$f")" = "$(id -u) 700" ] || fail "srun --bcast copy $f: $(stat -c '%U %a' "$f")"
  cmp -s "$f" private/bprog || fail "srun --bcast copy $f differs from the program"
done
# No DEST: the step's directory; the program found in PATH, as execvp finds it.
out=$(PATH="$WORK/private:$PATH" "$C/srun" -N2 --chdir="$WORK/bcast-cwd" --bcast bprog | sort | tr '\n' ' ')
[[ "$out" =~ ^node1\ $WORK/bcast-cwd/slurm_bcast_[0-9]+\.[0-9]+_node1\ node2\ $WORK/bcast-cwd/slurm_bcast_[0-9]+\.[0-9]+_node2\ $ ]] ||
  fail "srun --bcast (no DEST): $out"
# A link planted at the destination is never written through: the step fails on each node.
echo precious > bcast-target
chmod 444 bcast-target
ln -s "$WORK/bcast-target" bcast-link
set +e
err=$("$C/srun" -N2 --bcast="$WORK/bcast-link" private/bprog 2>&1); rc=$?
set -e
[ $rc = 1 ] && [ "$(grep -c "bcast-link is a symbolic link" <<<"$err")" = 2 ] ||
  fail "srun --bcast to a link: rc=$rc $err"
[ "$(cat bcast-target)" = precious ] && [ -L bcast-link ] || fail "srun --bcast wrote through a link"
grep -q "^node" <<<"$err" && fail "srun --bcast to a link ran the program: $err"
set +e
err=$("$C/srun" --bcast --multi-prog private/bprog 2>&1); rc=$?
set -e
[ $rc != 0 ] && grep -q "cannot be combined with --multi-prog" <<<"$err" ||
  fail "srun --bcast --multi-prog: rc=$rc $err"
# --pty: a real terminal (size, resize, Ctrl-C, Ctrl-Z), driven through one of ours.
out=$(timeout 60 python3 "$ROOT/tests/programs/pty_session.py" "$C/srun" 2>&1) || fail "srun --pty: $out"
grep -q "TTY=/dev/pts/[0-9]* SIZE=40 132 JOB=[0-9]" <<<"$out" || fail "srun --pty terminal: $out"
grep -q "RESIZED=50 100" <<<"$out" && grep -q "INT=130" <<<"$out" && grep -q "Stopped" <<<"$out" ||
  fail "srun --pty resize/Ctrl-C/Ctrl-Z: $out"
grep -q "^EXIT=7$" <<<"$out" || fail "srun --pty exit code: $out"
# salloc: the allocation's environment, steps inside it, and the command's exit code.
set +e
out=$("$C/salloc" -N2 -n4 sh -c 'echo $SLURM_NNODES $SLURM_TASKS_PER_NODE; srun hostname | wc -l; exit 4' 2>salloc.err); rc=$?
set -e
[ $rc = 4 ] && [ "$(echo $out)" = "2 2(x2) 4" ] || fail "salloc: rc=$rc out=$out $(cat salloc.err)"
grep -q "^salloc: Granted job allocation [0-9]*$" salloc.err || fail "salloc said: $(cat salloc.err)"
alloc=$(sed -n 's/^salloc: Granted job allocation //p' salloc.err)
acct=$("$C/sacct" -j "$alloc" -n -P -o JobID,JobName,State,ExitCode)
[ "$acct" = "$(printf '%s|sh|FAILED|4:0\n%s.0|hostname|COMPLETED|0:0' "$alloc" "$alloc")" ] ||
  fail "sacct after salloc: $acct"

echo "== job arrays: SLURM_ARRAY_*, %A_%a, %N throttle, squeue rows, scancel and sacct by task"
arr=$("$C/sbatch" --parsable --array=1-4%2 -J arr -t 10 -o 'arr-%A_%a.out' \
  --wrap 'echo "$SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_COUNT $SLURM_ARRAY_TASK_MIN $SLURM_ARRAY_TASK_MAX"; while [ ! -e arr.go ]; do sleep 0.1; done')
rows() { "$C/squeue" -h -j "$arr" -t PD,R -o '%i %T %r'; }
throttled() { rows | grep -q "^${arr}_\[3-4%2\] PENDING JobArrayTaskLimit$"; }
wait_for 10 throttled
out=$(rows)
[ "$("$C/squeue" -h -r -j "$arr" -t PD -o %i | tr '\n' ' ')" = "${arr}_3 ${arr}_4 " ] ||
  fail "squeue -r: $("$C/squeue" -h -r -j "$arr")"
[ "$("$C/squeue" -h -j "$arr" -t R | wc -l)" = 2 ] || fail "%2 throttle: $out"
touch arr.go  # the tasks wait for it, so the checks above see the first two running
array_done() { [ -z "$(rows)" ]; }
wait_for 60 array_done
[ "$(cat "arr-${arr}_3.out")" = "$arr 3 4 1 4" ] || fail "SLURM_ARRAY_* in task 3: $(cat "arr-${arr}_3.out")"
[ "$("$C/sacct" -j "${arr}_2" -X -n -P -o JobID,State)" = "${arr}_2|COMPLETED" ] ||
  fail "sacct -j A_T: $("$C/sacct" -j "${arr}_2" -X -n -P -o JobID,State)"
[ "$("$C/sacct" -j "$arr" -X -n -P -o JobID | wc -l)" = 4 ] || fail "sacct -j A"
# sacct's time fields in Slurm's [D-]HH:MM:SS.
tl=$("$C/sacct" -j "${arr}_2" -X -n -P -o Timelimit,Elapsed)
[[ "$tl" =~ ^00:10:00\|[0-9][0-9]:[0-9][0-9]:[0-9][0-9]$ ]] ||
  fail "sacct Timelimit,Elapsed: $tl"
held_arr=$("$C/sbatch" --parsable --array=0-5 -H -o /dev/null --wrap true)
"$C/scancel" "${held_arr}_0" "${held_arr}_[2-3]"
[ "$("$C/squeue" -h -j "$held_arr" -t PD -o %i)" = "${held_arr}_[1,4-5]" ] ||
  fail "scancel A_T: $("$C/squeue" -h -j "$held_arr" -o %i)"
"$C/scancel" "$held_arr"
[ -z "$("$C/squeue" -h -j "$held_arr" -t PD)" ] || fail "scancel A left tasks: $("$C/squeue" -h -j "$held_arr")"

echo "== a workflow manager's loop: sbatch --parsable, poll squeue/sacct, scancel"
ids=()
for i in 1 2 3; do ids+=("$("$C/sbatch" --parsable -N1 -o "wf-%j.out" --wrap "srun hostname; exit $((i - 1))")"); done
long=$("$C/sbatch" --parsable -o /dev/null --wrap 'sleep 300')
deadline=$(( $(date +%s) + 60 ))
for id in "${ids[@]}"; do
  while "$C/squeue" -h -j "$id" -o '%T' | grep -qE 'PENDING|RUNNING|COMPLETING'; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "job $id never left the queue"
    sleep 0.2
  done
done
states=$("$C/sacct" -X -n -P -o JobID,State,ExitCode -j "$(IFS=,; echo "${ids[*]}")")
[ "$states" = "$(printf '%s|COMPLETED|0:0\n%s|FAILED|1:0\n%s|FAILED|2:0' "${ids[@]}")" ] ||
  fail "sacct states: $states"
steps=$("$C/sacct" -n -P -o JobID,State -j "${ids[0]}")
[ "$steps" = "$(printf '%s|COMPLETED\n%s.batch|COMPLETED\n%s.0|COMPLETED' "${ids[0]}" "${ids[0]}" "${ids[0]}")" ] ||
  fail "sacct steps: $steps"
[ -s "wf-${ids[0]}.out" ] || fail "the job's output file is missing"
wait_for 30 is_state "$long" RUNNING
"$C/scancel" "$long"
wait_for 30 is_state "$long" CANCELLED
[ "$("$C/sacct" -X -n -P -o State -j "$long")" = CANCELLED ] || fail "sacct of a cancelled job"
"$C/sacct" --json -j "$alloc" | python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; assert j["steps"][0]["step"]["id"].endswith(".0"), j' ||
  fail "sacct --json"

echo "== scancel: by name, state and user; --signal to steps or the batch script"
sig=$(sbatch --parsable -o sig.out --wrap 'trap "echo batch USR1" USR1; srun sh -c "trap \"echo step USR1; exit 0\" USR1; touch step.ready; sleep 20 & wait"; sleep 20 & wait; echo end')
wait_for 30 is_state "$sig" RUNNING
wait_for 10 test -e step.ready  # the step's trap is set (the batch script's was set before srun)
scancel -s USR1 "$sig"
wait_for 10 grep -q "step USR1" sig.out
scancel --batch --signal=SIGUSR1 "$sig"
wait_for 10 grep -q "^end$" sig.out
grep -q "batch USR1" sig.out || fail "batch script did not get USR1: $(cat sig.out)"
a=$(sbatch --parsable -J keep -H --wrap true)
b=$(sbatch --parsable -J drop -H --wrap true)
scancel -n drop
wait_for 10 is_state "$b" CANCELLED
is_state "$a" PENDING || fail "scancel -n cancelled another job"
scancel -t PENDING -u "$(id -un)"
wait_for 10 is_state "$a" CANCELLED

echo "== scontrol: show, update, hold/release/requeue"
[ "$(scontrol show hostnames 'node[1-2],gpu07' | tr '\n' ' ')" = "node1 node2 gpu07 " ] ||
  fail "scontrol show hostnames"
held=$(sbatch --parsable -H -N2 -o /dev/null --wrap 'sleep 300')
job=$(scontrol show job "$held")
grep -q "^JobId=$held JobName=wrap$" <<<"$job" && grep -q "JobState=PENDING Reason=JobHeldUser" <<<"$job" ||
  fail "scontrol show job: $job"
scontrol update JobId="$held" TimeLimit=10 Nice=50
job=$(scontrol show job "$held")
grep -q " Nice=50 " <<<"$job" && grep -q "TimeLimit=10:00 " <<<"$job" || fail "scontrol update: $job"
set +e
err=$(scontrol update JobId="$held" Partition=nosuch 2>&1); rc=$?
set -e
[ $rc = 1 ] && grep -q "partition 'nosuch' does not exist" <<<"$err" || fail "bad partition: rc=$rc $err"
late=$(sbatch --parsable --begin=now+1hour -o /dev/null --wrap true)
reason_is() { [ "$(squeue -h -j "$1" -o %r)" = "$2" ]; }
wait_for 10 reason_is "$late" BeginTime
scontrol update JobId="$late" BeginTime=now
wait_for 30 is_state "$late" COMPLETED
scontrol release "$held"
wait_for 30 is_state "$held" RUNNING
grep -q "^   NodeList=node\[1-2\]$" <<<"$(scontrol show job "$held")" || fail "NodeList: $(scontrol show job "$held")"
scontrol requeue "$held"
[ "$(muster job show "$held" --json | sed -n 's/.*"requeue_count":\([0-9]*\).*/\1/p')" = 1 ] ||
  fail "scontrol requeue did not requeue"
scancel "$held"
scontrol update NodeName=node4 State=DRAIN Reason="fan noise"
grep -q "State=IDLE+DRAIN" <<<"$(scontrol show node node4)" || fail "drain: $(scontrol show node node4)"
grep -q "Reason=fan noise \[" <<<"$(scontrol show node node4)" || fail "reason: $(scontrol show node node4)"
scontrol update NodeName=node4 State=RESUME
grep -q "State=IDLE " <<<"$(scontrol show node node4)" || fail "resume: $(scontrol show node node4)"
# Both land in the audit log, with who, from where and the reason.
audit=$(muster audit --since now-1hours)
grep -q "$(id -un) .* local .* drain .*nodes node4 .*OK \[fan noise\]" <<<"$audit" || fail "audit: $audit"
grep -q "resume .*nodes node4 .*OK" <<<"$audit" || fail "audit resume: $audit"
[ "$(muster audit --json | grep -o '"action":"drain"' | wc -l)" -ge 1 ] || fail "audit --json"
grep -q "^   Nodes=node\[1-4\]$" <<<"$(scontrol show partition gpu)" || fail "scontrol show partition"
scontrol update NodeName=node3 State=DRAIN Reason=rma
[ "$(sinfo | head -1)" = "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST" ] || fail "sinfo header: $(sinfo)"
grep -q "^gpu\*         up   infinite      1  drain node3$" <<<"$(sinfo)" || fail "sinfo: $(sinfo)"
[ "$(sinfo -N -h -o '%N %T %E' -n node3)" = "node3 drained rma" ] || fail "sinfo -N -o: $(sinfo -N -h -o '%N %T %E')"
grep -q "^rma  .* node3$" <<<"$(sinfo -R -h)" || fail "sinfo -R: $(sinfo -R)"
# -s: a line per partition, nodes allocated/idle/other/total (the drained one is other); %f the
# configured features; -d: no node is dead, -r: all four answer.
[[ "$(sinfo -s -h)" =~ ^gpu\*\ +up\ +infinite\ +[0-9]+/[0-9]+/1/4\ +node\[1-4\]$ ]] || fail "sinfo -s: $(sinfo -s)"
[ "$(sinfo -N -h -n node1 -o '%N %f')" = "node1 h100,leaf1" ] || fail "sinfo %f: $(sinfo -N -h -o '%N %f')"
[ -z "$(sinfo -d -h)" ] && [ "$(sinfo -r -N -h -o %N | wc -l)" = 4 ] || fail "sinfo -d/-r: $(sinfo -d)"
scontrol update NodeName=node3 State=RESUME
# scontrol reboot: the local cluster's agents have no reboot program, so it is refused with why;
# cancel_reboot with none pending likewise.
out=$(scontrol reboot ASAP nextstate=RESUME reason=kernel node4 2>&1) && fail "reboot without a reboot_program: $out"
grep -q "reboot_program" <<<"$out" || fail "reboot refusal: $out"
out=$(scontrol cancel_reboot node4 2>&1) && fail "cancel_reboot with none pending: $out"
grep -q "no reboot pending" <<<"$out" || fail "cancel_reboot: $out"
grep -q "State=IDLE " <<<"$(scontrol show node node4)" || fail "refused reboot changed node4: $(scontrol show node node4)"
# A partition made live: used, shown as the controller has it (sinfo too), then deleted.
scontrol create PartitionName=debug Nodes=node[3-4] MaxTime=10 PriorityTier=2
show=$(scontrol show partition debug)
grep -q "^   Origin=live$" <<<"$show" && grep -q "^   Nodes=node\[3-4\]$" <<<"$show" || fail "show partition: $show"
[ "$(sinfo -h -p debug -o '%P %D')" = "debug 2" ] || fail "sinfo -p debug: $(sinfo -h -o '%P %D')"
pj=$("$DIR/compat/sbatch" --parsable -p debug -o /dev/null --wrap true)
wait_for 30 is_state "$pj" COMPLETED
[ "$(muster job show "$pj" --json | sed -n 's/.*"partition":"\([a-z]*\)".*/\1/p')" = debug ] || fail "job $pj not in debug"
out=$(muster partition create debug --nodes node1 2>&1) && fail "a second debug: $out"
grep -q "exists" <<<"$out" || fail "create twice: $out"
scontrol delete PartitionName=debug
out=$(scontrol show partition debug 2>&1) && fail "deleted partition still shown: $out"
[ "$(muster partition list --json | grep -o '"name":"[a-z]*"' | tr '\n' ' ')" = '"name":"gpu" ' ] || fail "partition list: $(muster partition list)"
# Node features and weights set live: a constrained job finds them, sinfo and scontrol show
# them, the light node is used first, and a reset gives the file's back.
scontrol update NodeName=node2 Features=fast,ib Weight=5
show=$(scontrol show node node2)
grep -q "^   AvailableFeatures=fast,ib$" <<<"$show" && grep -q " Weight=5$" <<<"$show" || fail "show node: $show"
[ "$(sinfo -h -n node2 -N -o '%N %f %w')" = "node2 fast,ib 5" ] || fail "sinfo %f %w: $(sinfo -h -N -o '%N %f %w')"
fj=$("$DIR/compat/sbatch" --parsable -C fast -o /dev/null --wrap true)
wait_for 30 is_state "$fj" COMPLETED
muster job show "$fj" --json | grep -q '"nodes":\["node2"\]' || fail "job $fj not on node2"
muster node update node[1-3] --weight 9
# The agents register again under the new engine: until node4 has, the heavier nodes are all there is.
wait_for 30 sh -c '[ "$(muster nodes --json | grep -o "\"state\":\"idle\"" | wc -l)" = 4 ]'
wj=$("$DIR/compat/sbatch" --parsable -o /dev/null --wrap true)
wait_for 30 is_state "$wj" COMPLETED
muster job show "$wj" --json | grep -q '"nodes":\["node4"\]' || fail "job $wj not on the light node4"
muster node update node3 --gres gpu:h100:6,nvme:2
[ "$(muster nodes --json | grep -o '"name":"node3"[^}]*' | grep -o '"gpus":[0-9]*')" = '"gpus":6' ] ||
  fail "live GRES: $(muster nodes --json)"
out=$(muster node update node1 --gres gpu:h100:8:x 2>&1) && fail "bad GRES taken: $out"
grep -q "NAME\[:TYPE\]\[:COUNT\]" <<<"$out" || fail "bad GRES: $out"
muster node reset node[1-3]
[ "$(muster nodes --json | grep -o '"live":\[[^]]*\]' | sort -u)" = '"live":[]' ] || fail "reset left live settings: $(muster nodes --json)"
out=$("$DIR/compat/sbatch" --parsable -C fast -o /dev/null --wrap true 2>&1) && fail "feature kept after reset: $out"

echo "== --dependency: afterok runs after success, afternotok never does"
d1=$("$DIR/compat/sbatch" --parsable -o /dev/null --wrap 'sleep 1')
d2=$("$DIR/compat/sbatch" --parsable -d "afterok:$d1" -o /dev/null --wrap true)
d3=$("$DIR/compat/sbatch" --parsable --dependency="afternotok:$d1" -o /dev/null --wrap true)
[ "$("$DIR/compat/squeue" -h -j "$d2" -o %r)" = Dependency ] || fail "squeue: dependency reason"
"$DIR/compat/scontrol" show job "$d2" | grep -q "Dependency=afterok:$d1(unfulfilled)" ||
  fail "scontrol Dependency="
wait_for 30 is_state "$d2" COMPLETED
wait_for 30 test "$("$DIR/compat/squeue" -h -j "$d3" -o %r)" = DependencyNeverSatisfied
"$DIR/compat/scancel" "$d3"

# Each front end's options through the compat links, one file per front end: a file may submit
# jobs of its own and cancels them before it ends (no account exists yet here).
for check in "$ROOT"/tests/system/compat/*.sh; do
  [ -e "$check" ] || continue
  echo "== compat: $(basename "$check" .sh)"
  . "$check"
done

echo "== accounts through sacctmgr: -A, the default account, squeue %a, sacct Account"
# Last: once an account exists, every job must charge one of its user's.
me=$(id -un)
"$DIR/compat/sacctmgr" -i add account science description=Science
"$DIR/compat/sacctmgr" -i add account physics parent=science fairshare=2
"$DIR/compat/sacctmgr" -i add user "$me" account=physics,science defaultaccount=science
out=$("$DIR/compat/sacctmgr" -n -P show assoc format=Account,User,Share,ParentName)
grep -qx "physics||2|science" <<<"$out" && grep -qx "physics|$me|1|" <<<"$out" ||
  fail "sacctmgr show assoc: $out"
[ "$("$DIR/compat/sacctmgr" -n -P show user "$me" format=User,DefaultAccount)" = "$me|science" ] ||
  fail "default account"
# A workflow manager's account check, as it runs it: -s (or WithAssoc) lists the user's accounts.
accts=$("$DIR/compat/sacctmgr" -n -s list user "$me" format=account%20 | awk '{print $1}' | sort | tr '\n' ' ')
[ "$accts" = "physics science " ] || fail "sacctmgr -n -s list user: [$accts]"
accts=$("$DIR/compat/sacctmgr" -nP list user "$me" withassoc format=account | sort | tr '\n' ' ')
[ "$accts" = "physics science " ] || fail "sacctmgr list user withassoc: [$accts]"
# Held, so that they stay in the queue however slow the machine.
id_h=$("$DIR/compat/sbatch" --parsable -H -A physics -o /dev/null --wrap true)
id_d=$("$DIR/compat/sbatch" --parsable -H -o /dev/null --wrap true)
[ "$("$DIR/compat/squeue" -h -j "$id_h,$id_d" -o '%i %a' | sort | tr '\n' ' ')" = "$id_h physics $id_d science " ] ||
  fail "squeue %a: $("$DIR/compat/squeue" -h -j "$id_h,$id_d" -o '%i %a')"
"$DIR/compat/scancel" "$id_h" "$id_d"
id_p=$("$DIR/compat/sbatch" --parsable -A physics -o "$WORK/acct-%j.out" --wrap 'echo $SLURM_JOB_ACCOUNT')
wait_for 30 is_state "$id_p" COMPLETED
[ "$(cat "$WORK/acct-$id_p.out")" = physics ] || fail "SLURM_JOB_ACCOUNT: $(cat "$WORK/acct-$id_p.out")"
[ "$("$DIR/compat/sacct" -j "$id_p" -X -n -P -o Account)" = physics ] || fail "sacct Account"
out=$("$DIR/compat/sshare" -a -n -P -o Account,User,RawShares,FairShare)
grep -q "^ *physics|$me|1|" <<<"$out" && grep -q "^ *physics||2|" <<<"$out" || fail "sshare: $out"
out=$(muster report usage --start now-1hour --end now --by account --json)
grep -q '"account":"physics","gpu_hours":[0-9.e-]*,"cpu_hours":[0-9.e-]*,"jobs":1}' <<<"$out" ||
  fail "report usage: $out"
"$DIR/compat/sprio" -w | grep -q "^ *Weights  .* 10000 " || fail "sprio -w: $("$DIR/compat/sprio" -w)"
out=$("$DIR/compat/sreport" -n -P -t seconds cluster AccountUtilizationByUser start=now-1hour \
  end=now+1hour)
[ "$(cut -d'|' -f2,3 <<<"$out" | tr '\n' ' ')" = "root| science| science|$me physics| physics|$me " ] &&
  grep -Eq "^[^|]+\|physics\|$me\|[^|]*\|[0-9]+\|0$" <<<"$out" || fail "sreport by user: $out"
out=$("$DIR/compat/sreport" -P -T cpu,gres/gpu cluster UserUtilizationByAccount start=now-1hour \
  end=now+1hour)
grep -qx "Cluster|Login|Proper Name|Account|TRES Name|Used" <<<"$out" &&
  grep -q "^Cluster/User/Account Utilization " <<<"$out" &&
  grep -Eq "^[^|]+\|$me\|[^|]*\|physics\|gres/gpu\|0$" <<<"$out" || fail "sreport by account: $out"

echo "== a job's script back: sacct -B, --env-vars, scontrol write batch_script"
id_b=$("$DIR/compat/sbatch" --parsable -H -o /dev/null --export=NONE,SCRIPT_MARK=yes \
  --wrap 'echo wrapped-command-here')
out=$("$DIR/compat/sacct" -B -j "$id_b")
[ "$(head -1 <<<"$out")" = "Batch Script for $id_b" ] && grep -q "wrapped-command-here" <<<"$out" ||
  fail "sacct -B: $out"
"$DIR/compat/sacct" --env-vars -j "$id_b" | grep -qx "SCRIPT_MARK=yes" ||
  fail "sacct --env-vars: $("$DIR/compat/sacct" --env-vars -j "$id_b")"
( cd "$WORK" && rm -f "slurm-$id_b.sh" && "$DIR/compat/scontrol" write batch_script "$id_b" >/dev/null &&
  grep -q "wrapped-command-here" "slurm-$id_b.sh" && rm -f "slurm-$id_b.sh" ) ||
  fail "scontrol write batch_script"
"$DIR/compat/scancel" "$id_b"

echo "== licenses: none configured here, so -L is refused by name; spread-job"
[ "$("$DIR/compat/scontrol" show licenses)" = "No licenses configured in Slurm." ] ||
  fail "scontrol show licenses: $("$DIR/compat/scontrol" show licenses)"
set +e
out=$("$DIR/compat/sbatch" -L matlab:2 --wrap true 2>&1); rc=$?
set -e
[ $rc != 0 ] && grep -q "Invalid license specification: the cluster has no license 'matlab'" <<<"$out" ||
  fail "sbatch -L: $out"
"$DIR/compat/scontrol" show config | grep -q '^Licenses *= (null)$' || fail "show config Licenses"
id_s=$("$DIR/compat/sbatch" --parsable -H -n 4 --spread-job -o /dev/null --wrap true)
[ "$("$DIR/compat/squeue" -h -j "$id_s" -o %D)" = 4 ] || fail "--spread-job: $("$DIR/compat/squeue" -h -j "$id_s" -o %D)"
"$DIR/compat/scancel" "$id_s"

echo "== a user's own association: MaxJobs and fairshare of $me in physics only; coordinators"
"$DIR/compat/sacctmgr" -i modify user "$me" where account=physics set maxjobs=1 fairshare=3
out=$("$DIR/compat/sacctmgr" -n -P show assoc user="$me" format=Account,User,Share,MaxJobs)
grep -qx "physics|$me|3|1" <<<"$out" && grep -qx "science|$me|1|" <<<"$out" ||
  fail "sacctmgr show assoc after modify user: $out"
[ "$("$DIR/compat/sacctmgr" -n -P -s show user "$me" format=Account,MaxJobs | sort | tr '\n' ' ')" = \
  "physics|1 science| " ] || fail "sacctmgr -s show user: $("$DIR/compat/sacctmgr" -n -P -s show user "$me")"
one=$("$DIR/compat/sbatch" --parsable -A physics -o /dev/null --wrap 'sleep 60')
two=$("$DIR/compat/sbatch" --parsable -A physics -o /dev/null --wrap true)
other=$("$DIR/compat/sbatch" --parsable -A science -o /dev/null --wrap true)
wait_for 30 is_state "$one" RUNNING
wait_for 30 is_state "$other" COMPLETED
wait_for 30 has_reason "$two" AssocMaxJobsLimit
"$DIR/compat/scancel" "$one"
wait_for 30 is_state "$two" COMPLETED
"$DIR/compat/sacctmgr" -i modify user "$me" set maxjobs=-1 fairshare=1
[ "$("$DIR/compat/sacctmgr" -n -P show assoc user="$me" account=physics format=MaxJobs)" = "" ] ||
  fail "maxjobs=-1 did not clear it"
"$DIR/compat/sacctmgr" -i add coordinator accounts=science names="$me"
[ "$("$DIR/compat/sacctmgr" -n -P show account science format=Account,Coordinators)" = "science|$me" ] ||
  fail "coordinator: $("$DIR/compat/sacctmgr" -n -P list account withcoord)"
"$DIR/compat/sacctmgr" -i delete coordinator accounts=science names="$me"
[ "$("$DIR/compat/sacctmgr" -n -P show account science format=Coordinators)" = "" ] ||
  fail "delete coordinator"

echo "== QoS through sacctmgr: a low-QoS 2-node gang is preempted by a high-QoS job, requeued"
"$DIR/compat/sacctmgr" -i add qos low
"$DIR/compat/sacctmgr" -i add qos high priority=100 preempt=low
"$DIR/compat/sacctmgr" -i modify account physics set qos=normal,low,high defaultqos=normal
out=$("$DIR/compat/sacctmgr" -n -P show qos high format=Name,Priority,Preempt,PreemptMode)
[ "$out" = "high|100|low|requeue" ] || fail "sacctmgr show qos: $out"
filler=$("$DIR/compat/sbatch" --parsable -A physics -N 2 --gpus-per-node=8 -o /dev/null --wrap 'sleep 300')
low=$("$DIR/compat/sbatch" --parsable -A physics --qos=low -N 2 --gpus-per-node=8 \
  --signal=B:USR1 -o /dev/null --wrap 'trap "exit 0" USR1; sleep 300 & wait')
wait_for 30 is_state "$filler" RUNNING
wait_for 30 is_state "$low" RUNNING
[ "$("$DIR/compat/squeue" -h -j "$low,$filler" -o '%i %q' | sort | tr '\n' ' ')" = \
  "$filler normal $low low " ] || fail "squeue %q: $("$DIR/compat/squeue" -h -j "$low,$filler" -o '%i %q')"
high=$("$DIR/compat/sbatch" --parsable -A physics --qos=high -N 2 --gpus-per-node=8 -o /dev/null --wrap true)
wait_for 30 is_state "$high" COMPLETED
is_state "$filler" RUNNING || fail "a normal-QoS job was preempted"
"$DIR/compat/scontrol" show job "$low" | grep -q "Restarts=1" ||
  fail "low job not requeued: $("$DIR/compat/scontrol" show job "$low")"
"$DIR/compat/scontrol" show job "$low" | grep -q "QOS=low" || fail "scontrol QOS="
[ "$("$DIR/compat/sacct" -j "$high" -X -n -P -o Account,QOS)" = "physics|high" ] || fail "sacct QOS"
"$DIR/compat/scancel" "$filler" "$low"

echo "== Suspend: a scav-QoS CPU gang is stopped in place on all its nodes for a high job, then continues"
"$DIR/compat/sacctmgr" -i add qos scav preemptmode=suspend
"$DIR/compat/sacctmgr" -i modify qos high set preempt=low,scav
"$DIR/compat/sacctmgr" -i modify account physics set qos=normal,low,high,scav defaultqos=normal
rm -f "$WORK/ticks"
scav=$("$DIR/compat/sbatch" --parsable -A physics --qos=scav -N 4 --ntasks-per-node=1 -c 16 \
  -o /dev/null --wrap "while :; do echo x >> $WORK/ticks; sleep 0.1; done")
wait_for 30 is_state "$scav" RUNNING
wait_for 10 test -s "$WORK/ticks"
high=$("$DIR/compat/sbatch" --parsable -A physics --qos=high -N 2 --gpus-per-node=1 -o /dev/null \
  --wrap 'sleep 3')
wait_for 30 is_state "$scav" SUSPENDED
[ "$("$DIR/compat/squeue" -h -j "$scav" -o '%t %r')" = "S Preempted" ] ||
  fail "squeue of the suspended job: $("$DIR/compat/squeue" -h -j "$scav" -o '%t %r')"
wait_for 30 is_state "$high" RUNNING
n1=$(wc -l <"$WORK/ticks"); sleep 1; n2=$(wc -l <"$WORK/ticks")
[ "$n1" = "$n2" ] || fail "the suspended job still runs ($n1 -> $n2 lines)"
wait_for 30 is_state "$high" COMPLETED
wait_for 30 is_state "$scav" RUNNING
n1=$(wc -l <"$WORK/ticks"); sleep 1; n2=$(wc -l <"$WORK/ticks")
[ "$n2" -gt "$n1" ] || fail "the resumed job does not run ($n1 -> $n2 lines)"
"$DIR/compat/scontrol" show job "$scav" | grep -q "Restarts=0" || fail "a suspended job was requeued"
"$DIR/compat/scancel" "$scav"
wait_for 30 is_state "$scav" CANCELLED

echo "== GPU quotas: physics borrows science's idle H100; science takes them back"
muster account modify science --quota h100=16 --cohort lab
muster account modify physics --quota h100=16:24 --cohort lab
p=()
for i in 1 2 3; do
  p+=("$("$DIR/compat/sbatch" --parsable -A physics --gpus-per-node=8 -o /dev/null --wrap 'sleep 300')")
  wait_for 30 is_state "${p[-1]}" RUNNING
done
"$DIR/compat/scontrol" show job "${p[2]}" | grep -q "Borrowed=Yes" ||
  fail "third physics job not borrowed: $("$DIR/compat/scontrol" show job "${p[2]}")"
"$DIR/compat/scontrol" show job "${p[0]}" | grep -q "Borrowed=" && fail "a guaranteed job is borrowed"
out=$(muster quota)
grep -q "^physics  *h100  *lab  *16  *24  *16  *24  *8  *0$" <<<"$out" || fail "muster quota: $out"
grep -q "^science  *h100  *lab  *16  *cohort  *16  *0  *0  *16$" <<<"$out" || fail "muster quota: $out"
s1=$("$DIR/compat/sbatch" --parsable -A science --gpus-per-node=8 -o /dev/null --wrap 'sleep 300')
s2=$("$DIR/compat/sbatch" --parsable -A science --gpus-per-node=8 -o /dev/null --wrap 'sleep 300')
wait_for 30 is_state "$s1" RUNNING
wait_for 30 is_state "$s2" RUNNING
"$DIR/compat/scontrol" show job "${p[2]}" | grep -q "Restarts=1" ||
  fail "borrowed job not reclaimed: $("$DIR/compat/scontrol" show job "${p[2]}")"
is_state "${p[0]}" RUNNING && is_state "${p[1]}" RUNNING || fail "a guaranteed physics job was stopped"
[ "$("$DIR/compat/squeue" -h -j "${p[2]}" -o '%r')" = QuotaBorrow ] ||
  fail "requeued borrower's reason: $("$DIR/compat/squeue" -h -j "${p[2]}" -o '%r %T')"
out=$(muster explain "${p[2]}")
grep -q "^Limit QuotaBorrow: account physics: h100 GPUs (guaranteed 16, the rest borrowed)$" <<<"$out" &&
  grep -q "^  16 of 16 in use, this job needs 8, 8 over$" <<<"$out" &&
  grep -q "^  it can start when 8 more are free: after job ${p[0]} " <<<"$out" || fail "muster explain: $out"
"$DIR/compat/scancel" "${p[@]}" "$s1" "$s2"
muster account modify science --quota h100=none --cohort ""
muster account modify physics --quota h100=none --cohort ""

echo "== a step outlives its agents: SIGKILLed and restarted, then stopped and upgraded"
# As a real node runs: jobs stay when musterd stops (the local cluster's default ends them).
sed -i 's/^kill_jobs_on_stop = true$/kill_jobs_on_stop = false/' "$MUSTER_CONF"
job=$(muster submit --parsable -N 2 --gpus-per-node=1 --wrap 'sleep 300')
wait_for 30 is_state "$job" RUNNING
nodes=$(muster queue -j "$job" -o '%N' --noheader)
# The tasks print until told to stop, so both restarts fall inside the step.
rm -f "$PWD/stream.stop"
STOP="$PWD/stream.stop" "$C/srun" --jobid="$job" --overlap -N2 -n2 bash -c \
  'i=0; while [ ! -e "$STOP" ]; do i=$((i+1)); echo "$SLURM_PROCID $i"; sleep 0.02; done
   exit $((SLURM_PROCID + 4))' >stream.out 2>stream.err &
srun_pid=$!
streaming() { [ "$(wc -l <stream.out)" -ge 10 ]; }
wait_for 10 streaming
agent_pid() { cat "$DIR/cluster/run/musterd-$1.pid"; }
restart_agents() {  # $1: the signal that stops the job's agents
  local n p
  for n in $(muster control show hostnames "$nodes"); do
    p=$(agent_pid "$n")
    kill "-$1" "$p"
    wait_for 20 bash -c "! kill -0 $p 2>/dev/null"
  done
}
restart_agents KILL
muster local up --dir "$DIR/cluster" --nodes 4 --gpus-per-node 8 >/dev/null
sleep 1
# An upgrade: the agent stops as systemd stops it, a new binary replaces the old (a new file,
# as a package install does), and the new one starts.
restart_agents TERM
cp -p "$BIN/musterd" "$BIN/musterd.new" && mv -f "$BIN/musterd.new" "$BIN/musterd"
muster local up --dir "$DIR/cluster" --nodes 4 --gpus-per-node 8 >/dev/null
kill -0 $srun_pid 2>/dev/null || fail "srun ended during the agent restarts: $(cat stream.err)"
touch stream.stop
set +e
wait $srun_pid; rc=$?
set -e
[ $rc = 5 ] || fail "srun across agent restarts: exit $rc, expected 5; $(cat stream.err)"
for t in 0 1; do
  got=$(awk -v t=$t '$1 == t {print $2}' stream.out | tr '\n' ' ')
  n=$(awk -v t=$t '$1 == t' stream.out | wc -l)
  [ "$n" -gt 20 ] && [ "$got" = "$(seq 1 "$n" | tr '\n' ' ')" ] ||
    fail "task $t's lines across restarts (each once, in order): $got"
done
wait_for 20 bash -c "muster acct -j $job --json | grep -q '\"return_code\":5'" ||
  fail "the step's end was not accounted: $(muster acct -j "$job")"
muster cancel "$job"
wait_for 30 is_state "$job" CANCELLED
# srun --pty across a crash of every agent: the terminal session carries on.
rm -f pty.pause.*
PTY_PAUSE="$PWD/pty.pause" timeout 120 python3 "$ROOT/tests/programs/pty_session.py" "$C/srun" \
  >pty.out 2>&1 &
pty_pid=$!
wait_for 30 test -e pty.pause.ready
for n in node1 node2 node3 node4; do
  p=$(agent_pid "$n")
  kill -KILL "$p"
  wait_for 20 bash -c "! kill -0 $p 2>/dev/null"
done
muster local up --dir "$DIR/cluster" --nodes 4 --gpus-per-node 8 >/dev/null
touch pty.pause.go
set +e
wait $pty_pid; rc=$?
set -e
[ $rc = 0 ] && grep -q "^EXIT=7$" pty.out || fail "srun --pty across agent restarts: $(cat pty.out)"

echo "== Reservations: a user reservation its jobs run in, a maintenance window jobs keep out of"
sc="$DIR/compat/scontrol"
all_idle() { [ "$(muster nodes | grep -c ' idle ')" = 4 ]; }
wait_for 60 all_idle  # the quota jobs have left (a running job would make its node busy)
out=$("$sc" create reservation ReservationName=maint StartTime=now+1hour Duration=2:00:00 \
  Nodes='node[1-2]' Users=root Flags=MAINT,IGNORE_JOBS)
[ "$out" = "Reservation created: maint" ] || fail "create reservation: $out"
"$sc" create reservation ReservationName=team StartTime=now Duration=60 Nodes=node3 Users=root >/dev/null
out=$("$sc" show reservation team)
grep -q "^ReservationName=team StartTime=.* Duration=01:00:00$" <<<"$out" &&
  grep -q "Nodes=node3 NodeCnt=1 CoreCnt=16 .*Flags=SPEC_NODES$" <<<"$out" &&
  grep -q "Users=root .* State=ACTIVE " <<<"$out" || fail "show reservation: $out"
"$sc" show reservation maint | grep -q "Flags=MAINT,IGNORE_JOBS,SPEC_NODES" || fail "maint flags"
[ "$("$DIR/compat/sinfo" -h -N -n node3 -o '%t')" = resv ] || fail "sinfo of a reserved node"
in_team=$("$DIR/compat/sbatch" --parsable --reservation=team -t 10 -o /dev/null --wrap 'sleep 300')
crossing=$("$DIR/compat/sbatch" --parsable -N 2 -t 3:00:00 -o /dev/null --wrap true)
wait_for 30 is_state "$in_team" RUNNING
[ "$("$DIR/compat/squeue" -h -j "$in_team" -o '%v %N')" = "team node3" ] ||
  fail "squeue %v: $("$DIR/compat/squeue" -h -j "$in_team" -o '%v %N')"
reason_is() { [ "$("$DIR/compat/squeue" -h -j "$1" -o '%r')" = "$2" ]; }
wait_for 30 reason_is "$crossing" ReqNodeNotAvail
"$sc" show job "$crossing" | grep -q "maintenance reservation maint" ||
  fail "no word of the maintenance: $("$sc" show job "$crossing")"
set +e
err=$("$sc" delete ReservationName=team 2>&1); rc=$?
set -e
[ $rc = 1 ] && grep -q "in use by job $in_team" <<<"$err" || fail "delete in use: rc=$rc $err"
"$DIR/compat/scancel" "$in_team" "$crossing"
wait_for 30 is_state "$in_team" CANCELLED
"$sc" delete ReservationName=team
"$sc" create reservation ReservationName=now StartTime=now Duration=10 Nodes=node4 Users=root \
  Flags=maint >/dev/null
[ "$("$DIR/compat/sinfo" -h -N -n node4 -o '%t')" = maint ] || fail "sinfo of a node in maintenance"
muster reservation list | grep -q "^now  *ACTIVE .* node4 " || fail "muster reservation list"
set +e
err=$("$DIR/compat/sbatch" --reservation=nosuch --wrap true 2>&1); rc=$?
set -e
[ $rc = 1 ] && grep -q "invalid reservation 'nosuch'" <<<"$err" || fail "unknown reservation: $err"
set +e
err=$("$sc" show reservation nosuch 2>&1); rc=$?
set -e
[ $rc = 1 ] && [ "$err" = "Reservation nosuch not found" ] || fail "show unknown: rc=$rc $err"
"$sc" delete ReservationName=now
muster reservation delete maint
[ "$("$sc" show reservation)" = "No reservations in the system" ] || fail "reservations left"

set +e
err=$("$DIR/compat/sbatch" -A physics --qos=gold --wrap true 2>&1); rc=$?
set -e
[ $rc = 1 ] && grep -q "invalid qos 'gold'" <<<"$err" || fail "unknown qos: rc=$rc $err"
set +e
err=$("$DIR/compat/sbatch" -A nosuch --wrap true 2>&1); rc=$?
set -e
[ $rc = 1 ] && grep -q "is not in account 'nosuch'" <<<"$err" || fail "unknown account: rc=$rc $err"
set +e
err=$("$DIR/compat/sacctmgr" -i delete account science 2>&1); rc=$?
set -e
[ $rc != 0 ] && grep -q "sub-account physics" <<<"$err" || fail "removing a parent: rc=$rc $err"

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
