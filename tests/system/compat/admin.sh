# The admin front ends' options through the compat links: sinfo, sdiag, sreport, scontrol,
# sacctmgr, scancel. Sourced by local_cluster_stest.sh (4 idle nodes, partition gpu); what it
# drains, reserves or submits it undoes before it ends.
C="$DIR/compat"
all_idle() { [ "$("$C/sinfo" -h -t idle -o %D)" = 4 ]; }
wait_for 30 all_idle
cluster=$("$C/scontrol" show config | sed -n 's/^ClusterName *= *//p')
[ -n "$cluster" ] || fail "scontrol show config: no ClusterName"

# sinfo -O: sinfo's field names, widths (default 20) and suffixes, no space between fields.
out=$("$C/sinfo" -h -N -n node1 -O 'NodeList:6,Partition:.5,StateLong:5|,CPUs:3,SocketCoreThread')
[[ "$out" =~ ^node1\ \ gpu\*idle\ \|[0-9]+\ +[0-9]+:[0-9]+:[0-9]+$ ]] || fail "sinfo -O: [$out]"
[ "$("$C/sinfo" -O 'NodeList,StateCompact' | head -1)" = "NODELIST            STATE" ] ||
  fail "sinfo -O header: $("$C/sinfo" -O 'NodeList,StateCompact' | head -1)"
set +e
err=$("$C/sinfo" -O 'Partition,JobID' 2>&1); rc=$?
set -e
[ $rc = 2 ] && grep -q "'JobID' is not supported (supported: All " <<<"$err" || fail "sinfo -O JobID: $err"
# -o: the letters of sinfo's manual page, partition and cluster fields included.
out=$("$C/sinfo" -h -N -n node1 -o '%N|%V|%p|%s|%r|%h|%g|%B|%d|%w|%A|%b')
[ "$out" = "node1|$cluster|1|1-infinite|no|NO|all|UNLIMITED|0|1|0/1|h100,leaf1" ] ||
  fail "sinfo -o: $out"
[ "$("$C/sinfo" -h -o '%all' | head -1 | tr -cd '|' | wc -c)" = 41 ] || fail "sinfo %all: $("$C/sinfo" -o '%all')"
# Without a state field nodes of a partition share one row whatever their states.
"$C/scontrol" update NodeName=node4 State=DRAIN Reason="admin check"
[ "$("$C/sinfo" -h -o '%P %D')" = "gpu* 4" ] || fail "sinfo -o '%P %D': $("$C/sinfo" -h -o '%P %D')"
# -S: -N's rows by node name, reversed; -t with & (all of) and , (any of).
[ "$("$C/sinfo" -h -N -S -N -o %N | tr '\n' ' ')" = "node4 node3 node2 node1 " ] ||
  fail "sinfo -S -N: $("$C/sinfo" -h -N -S -N -o %N)"
[ "$("$C/sinfo" -h -N -t 'drain&drained' -o %N)" = node4 ] && [ -z "$("$C/sinfo" -h -N -t 'idle&drain')" ] ||
  fail "sinfo -t with &: $("$C/sinfo" -h -N -t 'drain&drained')"
[ "$("$C/sinfo" -h -N -t idle -o %N | tr '\n' ' ')" = "node1 node2 node3 " ] ||
  fail "sinfo -t idle: $("$C/sinfo" -h -N -t idle -o %N)"
set +e
"$C/sinfo" -t bogus 2>/dev/null; rc=$?
set -e
[ $rc = 2 ] || fail "sinfo -t bogus: rc=$rc"
# -R -l: the state and who set the reason with their uid.
[[ "$("$C/sinfo" -h -R -l)" =~ ^admin\ check\ +$(id -un)\($(id -u)\)\ +[0-9T:-]+\ drain\ +node4$ ]] ||
  fail "sinfo -R -l: $("$C/sinfo" -h -R -l)"
"$C/scontrol" update NodeName=node4 State=RESUME
# -l: a date line, then sinfo's long header.
long=$("$C/sinfo" -l)
[[ "$(head -1 <<<"$long")" =~ ^[A-Z][a-z][a-z]\ [A-Z][a-z][a-z]\ [\ 0-9][0-9]\ [0-9:]{8}\ [0-9]{4}$ ]] ||
  fail "sinfo -l date: $long"
[ "$(sed -n 2p <<<"$long")" = "PARTITION AVAIL  TIMELIMIT   JOB_SIZE ROOT OVERSUBS     GROUPS  NODES       STATE NODELIST" ] ||
  fail "sinfo -l header: $long"
# -i: again every second, until stopped.
set +e
reports=$(timeout 2.5 "$C/sinfo" -i 1 | grep -c '^PARTITION')
set -e
[ "$reports" -ge 2 ] || fail "sinfo -i 1 printed $reports reports"
# -T: the reservations in sinfo's layout.
"$C/scontrol" create reservation ReservationName=admcheck StartTime=now+1hour Duration=30 \
  Nodes=node2 Users="$(id -un)" >/dev/null
resv=$("$C/sinfo" -T)
[ "$(head -1 <<<"$resv")" = "RESV_NAME     STATE           START_TIME             END_TIME     DURATION  NODELIST" ] ||
  fail "sinfo -T header: $resv"
[[ "$(sed -n 2p <<<"$resv")" =~ ^admcheck\ +INACTIVE\ +[0-9T:-]{19}\ +[0-9T:-]{19}\ +00:30:00\ +node2$ ]] ||
  fail "sinfo -T: $resv"
"$C/scontrol" delete ReservationName=admcheck
# -M names this cluster (or all); another is refused. The no-effect options change nothing.
[ "$("$C/sinfo" -M "$cluster" -h -o %D)" = "$("$C/sinfo" -a --hide --federation --local --noconvert -v -h -o %D)" ] ||
  fail "sinfo -M / no-effect options"
set +e
err=$("$C/sinfo" -M nosuch 2>&1); rc=$?
set -e
[ $rc = 1 ] && grep -q "no cluster 'nosuch'" <<<"$err" || fail "sinfo -M nosuch: $err"
set +e
"$C/sinfo" --yaml 2>/dev/null; rc=$?
set -e
[ $rc = 2 ] || fail "sinfo --yaml was not refused"

# sdiag -t/-T: the table by total or by mean time, the most first; -i by kind.
for order in -i -t -T; do
  "$C/sdiag" "$order" --json | python3 -c '
import json, sys
order, t = sys.argv[1], json.load(sys.stdin)["timings"]
assert len(t) > 1, t
if order == "-i":
    assert [x["kind"] for x in t] == sorted(x["kind"] for x in t), t
else:  # the JSON has six significant digits: equal up to them is in order
    v = [x["mean_us"] * (x["count"] if order == "-t" else 1) for x in t]
    assert all(a >= b * (1 - 1e-4) for a, b in zip(v, v[1:])), (order, t)
' "$order" || fail "sdiag $order"
done
"$C/sdiag" -a -M all >/dev/null || fail "sdiag -a -M all"
set +e
"$C/sdiag" -M nosuch 2>/dev/null; rc=$?
set -e
[ $rc = 1 ] || fail "sdiag -M nosuch: rc=$rc"

# sreport: -M and cluster= name this cluster; the rest of the report is as without them.
out=$("$C/sreport" -a -Q -v --local -M "$cluster" -t hours --tres=cpu cluster AccountUtilizationByUser)
grep -q "^Usage reported in CPU Hours$" <<<"$out" || fail "sreport -M -t hours: $out"
set +e
err=$("$C/sreport" cluster AccountUtilizationByUser cluster=nosuch 2>&1); rc=$?
set -e
[ $rc = 1 ] && grep -q "no cluster 'nosuch'" <<<"$err" || fail "sreport cluster=nosuch: $err"

# scontrol: options before the command; -Q keeps the command's error to itself (exit 1 still).
set +e
err=$("$C/scontrol" show job 999999 2>&1); rc=$?
quiet=$("$C/scontrol" -Q show job 999999 2>&1); qrc=$?
set -e
[ $rc = 1 ] && [ -n "$err" ] && [ $qrc = 1 ] && [ -z "$quiet" ] || fail "scontrol -Q: [$err] [$quiet] $rc $qrc"
[ "$("$C/scontrol" --all --future --hide --federation --local --sibling -v -d -M "$cluster" -o show partition gpu | wc -l)" = 1 ] ||
  fail "scontrol options before show"
set +e
err=$("$C/scontrol" --uid=0 show job 2>&1); rc=$?
set -e
[ $rc = 2 ] && grep -q -- "-u/--uid" <<<"$err" || fail "scontrol --uid: $err"
set +e
err=$("$C/scontrol" --bogus show config 2>&1); rc=$?
set -e
[ $rc = 2 ] && grep -q "unknown option --bogus" <<<"$err" || fail "scontrol --bogus: $err"

# sacctmgr -r: listing works, changes are refused and nothing changes.
"$C/sacctmgr" -r -Q -v -o -n -P show account >/dev/null || fail "sacctmgr -r show"
set +e
err=$("$C/sacctmgr" -r -i add account readonlycheck 2>&1); rc=$?
set -e
[ $rc = 1 ] && grep -q -- "-r/--readonly" <<<"$err" || fail "sacctmgr -r add: $err"
[ -z "$("$C/sacctmgr" -n -P show account readonlycheck)" ] || fail "sacctmgr -r added an account"

# scancel -i asks for each job (n: kept, y: cancelled); -M names this cluster.
keep=$("$C/sbatch" --parsable -H -J keep -o /dev/null --wrap true)
drop=$("$C/sbatch" --parsable -H -J drop -o /dev/null --wrap true)
asked=$(printf 'n\ny\n' | "$C/scancel" -M "$cluster" -i "$keep" "$drop")
[ "$(grep -o 'Cancel job_id=[0-9]* name=[a-z]* partition=gpu \[y/n\]?' <<<"$asked" | wc -l)" = 2 ] ||
  fail "scancel -i asked: $asked"
[ "$("$C/squeue" -h -j "$keep,$drop" -t all -o '%j %T' | sort | tr '\n' ' ')" = "drop CANCELLED keep PENDING " ] ||
  fail "scancel -i: $("$C/squeue" -h -j "$keep,$drop" -t all -o '%j %T')"
set +e
"$C/scancel" -M nosuch "$keep" 2>/dev/null; rc=$?
set -e
[ $rc = 1 ] && [ "$("$C/squeue" -h -j "$keep" -o %T)" = PENDING ] || fail "scancel -M nosuch: rc=$rc"
"$C/scancel" "$keep"

# srun/salloc --uid/--gid (root's): the allocation, its tasks and salloc's command are the user's.
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
  out=$("$C/srun" --uid=nobody -D /tmp -N2 sh -c 'echo "$(id -un) $SLURM_JOB_USER"' | sort -u)
  [ "$out" = "nobody nobody" ] || fail "srun --uid=nobody: $out"
  # (The test's directory is root's alone, so the command cannot run srun from it here.)
  out=$("$C/salloc" --uid=nobody --gid="$(id -gn nobody)" -D /tmp -N1 \
    sh -c 'echo "$(id -un) $(id -gn) $SLURM_JOB_ID"' 2>/dev/null)
  read -r who group job <<<"$out"
  [ "$who $group" = "nobody $(id -gn nobody)" ] && [ -n "$job" ] &&
    [ "$("$C/sacct" -j "$job" -X -n -o User%12 | tr -d ' ')" = nobody ] ||
    fail "salloc --uid=nobody: $out"
else
  echo "  skipped: srun/salloc --uid (needs root and a user nobody)"
fi
# salloc -K: the command gets the one signal asked for when its allocation is revoked.
set +e
out=$("$C/salloc" -N1 -KUSR1 env C="$C" sh -c 'trap "echo got USR1; exit 3" USR1
  "$C/scancel" "$SLURM_JOB_ID"; sleep 30 & wait' 2>&1); rc=$?
set -e
[ $rc = 3 ] && grep -q "got USR1" <<<"$out" && grep -q "has been revoked" <<<"$out" ||
  fail "salloc -KUSR1: $rc $out"
# salloc --no-shell: salloc exits once granted; the allocation stays for srun --jobid until scancel.
out=$("$C/salloc" --no-shell -N1 -t 5 2>&1) || fail "salloc --no-shell: $out"
job=$(sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p' <<<"$out")
[ -n "$job" ] && [ "$("$C/squeue" -h -j "$job" -o %T)" = RUNNING ] ||
  fail "salloc --no-shell left no running allocation: $out"
[ "$("$C/srun" --jobid="$job" printenv SLURM_JOB_ID)" = "$job" ] || fail "srun --jobid=$job"
"$C/scancel" "$job"
