#!/usr/bin/env bash
# Real Slurm 22.05's sacct over HISTORY finished jobs: Slurm's side of sacct_vs_slurm.sh (which
# puts Muster's beside it, in the same run). Everything runs on this machine, loopback only:
# a private MariaDB (own datadir/socket), munged (own socket), slurmdbd, slurmctld and NODES slurmd,
# every process started here and stopped here by pid. The history is not run through Slurm
# (100,000 real jobs would take hours); instead one real job (batch step + 2 srun steps) and one
# real held-then-cancelled job are run, and their rows in the accounting database are cloned with
# SQL into HISTORY finished jobs (and CANCELLED cancelled ones), shaped like history_fill.cc's.
#   usage: slurm_sacct.sh           (as root)
# Env: HISTORY (default 100000), CANCELLED (default 0: held jobs cancelled before the timings;
# sacct's default listing leaves them out), SPREAD_DAYS (default 10, as history_fill.cc), SAMPLES
# (default 5), JSAMPLES (sacct -j samples, default 20), NODES (default 2), KEEP=1 keeps the temp
# dir, OUT=FILE also writes each figure as "key<TAB>lines<TAB>p50 ms" (and the daemons' RSS).
# Ports (loopback): mysqld 23306, slurmctld 26817, slurmdbd 26819, slurmd 27001..
set -euo pipefail
HISTORY=${HISTORY:-100000}
CANCELLED=${CANCELLED:-0}
SPREAD_DAYS=${SPREAD_DAYS:-10}
SAMPLES=${SAMPLES:-5}
JSAMPLES=${JSAMPLES:-20}
NODES=${NODES:-2}
DB_PORT=${DB_PORT:-23306} CTLD_PORT=${CTLD_PORT:-26817} DBD_PORT=${DBD_PORT:-26819} SLURMD_PORT=${SLURMD_PORT:-27000}
CLUSTER=sacctbench
[ "$(id -u)" = 0 ] || { echo "needs root (daemons, munged)" >&2; exit 2; }

T0=${EPOCHREALTIME/./}
log() { echo "[$(( (${EPOCHREALTIME/./} - T0) / 1000000 ))s] $*" >&2; }

# --- packages (CI installs them the same way) ---
need() { for c in "$@"; do command -v "$c" >/dev/null || return 1; done; }
if ! need mariadbd mariadb-install-db slurmdbd slurmctld slurmd sacct munged ||
   [ ! -e /usr/lib/x86_64-linux-gnu/slurm-wlm/accounting_storage_mysql.so ]; then
  pk="mariadb-server slurmdbd slurm-wlm-mysql-plugin slurmctld slurmd slurm-client munge slurm-wlm-basic-plugins"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $pk >/tmp/sacct-bench-apt.log 2>&1 ||
    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $pk \
      >/tmp/sacct-bench-apt.log 2>&1; } || { tail -5 /tmp/sacct-bench-apt.log >&2; exit 1; }
fi
[ -r /etc/munge/munge.key ] || { echo "no /etc/munge/munge.key (munge's postinst makes it)" >&2; exit 1; }
for p in $DB_PORT $CTLD_PORT $DBD_PORT $((SLURMD_PORT + 1)); do
  ss -Hltn "sport = :$p" | grep -q . && { echo "port $p already in use" >&2; exit 1; }
done

DIR=$(mktemp -d /tmp/slurm-sacct-bench.XXXXXX)
chmod 755 "$DIR"  # munged runs as user munge below it
mkdir -p "$DIR"/{etc,run,log,state,spool,dev,munge,db,out}

# --- stop everything by pid (reverse start order), then remove the temp dir ---
stop_pid() {  # stop_pid NAME COMM [SECONDS]: SIGTERM, SIGKILL after SECONDS (default 10)
  local f=$DIR/run/$1.mypid pid i
  [ -s "$f" ] || return 0
  pid=$(cat "$f")
  if [ "$(cat /proc/$pid/comm 2>/dev/null)" = "$2" ]; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < ${3:-10} * 10; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    [ "$(cat /proc/$pid/comm 2>/dev/null)" = "$2" ] && kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}
cleanup() {
  set +e
  for ((i = 1; i <= NODES; i++)); do stop_pid slurmd-node$i slurmd 3; done
  stop_pid slurmctld slurmctld
  stop_pid slurmdbd slurmdbd
  stop_pid mysqld mariadbd 60   # clean InnoDB shutdown can take a while
  stop_pid munged munged
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $DIR" >&2; else rm -rf "$DIR"; fi
}
trap cleanup EXIT
start() {  # start NAME CMD...: in its own session, in the background; records its pid
  local name=$1; shift
  setsid "$@" </dev/null >"$DIR/log/$name.out" 2>&1 &
  echo $! >"$DIR/run/$name.mypid"
}
wait_for() {  # wait_for SECONDS WHAT CMD...: poll CMD every 0.2 s
  local secs=$1 what=$2 i; shift 2
  for ((i = 0; i < secs * 5; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "timed out waiting for $what (logs: $DIR/log; KEEP=1 keeps them)" >&2; exit 1
}

# --- 1. private MariaDB: own datadir and socket, TCP on 127.0.0.1 only ---
# InnoDB settings are those Slurm's accounting docs recommend (buffer pool >= 1G etc.).
mariadb-install-db --no-defaults --datadir="$DIR/db" --user=root --auth-root-authentication-method=normal \
  --skip-test-db >"$DIR/log/mariadb-install.log" 2>&1
start mysqld mariadbd --no-defaults --user=root --datadir="$DIR/db" --socket="$DIR/run/mysql.sock" \
  --bind-address=127.0.0.1 --port=$DB_PORT --pid-file="$DIR/run/mysqld.pid" --log-error="$DIR/log/mysqld.err" \
  --skip-name-resolve --innodb-buffer-pool-size=1G --innodb-log-file-size=64M --innodb-lock-wait-timeout=900
SQL() { mariadb --no-defaults -S "$DIR/run/mysql.sock" -uroot -N -B "$@"; }
wait_for 60 mysqld SQL -e 'select 1'
SQL -e "CREATE DATABASE slurm_acct_db; CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmbench';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
log "mysqld up (pid $(cat "$DIR/run/mysqld.mypid"))"

# --- munged on its own socket, as tests/bench/vs-slurm/slurm_cluster.sh ---
chown munge:munge "$DIR/munge"
start munged setpriv --reuid=munge --regid=munge --clear-groups munged -F --socket="$DIR/munge/munge.socket.2" \
  --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" --seed-file="$DIR/munge/munged.seed"
wait_for 10 munged test -S "$DIR/munge/munge.socket.2"

# --- 2. slurmdbd + slurmctld + slurmd ---
host=$(hostname -s)
for i in $(seq 0 7); do mknod "$DIR/dev/nvidia$i" c 195 "$i"; done  # inert fake GPUs (see slurm_cluster.sh)
# slurmdbd reads slurmdbd.conf from the directory of SLURM_CONF; it must be mode 600.
cat >"$DIR/etc/slurmdbd.conf" <<CONF
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket.2
DbdHost=$host
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
LogFile=$DIR/log/slurmdbd.log
PidFile=$DIR/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurmbench
StorageLoc=slurm_acct_db
CONF
chmod 600 "$DIR/etc/slurmdbd.conf"
# AccountingStoragePass names the munge socket that clients (sacct, sacctmgr) and slurmctld use to
# reach slurmdbd: without it they try /run/munge/munge.socket.2, whatever AuthInfo says.
cat >"$DIR/etc/slurm.conf" <<CONF
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket.2
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStoragePass=$DIR/munge/munge.socket.2
AccountingStorageTRES=gres/gpu
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=2
GresTypes=gpu
NodeName=node[1-$NODES] NodeHostname=$host NodeAddr=127.0.0.1 Port=[$((SLURMD_PORT + 1))-$((SLURMD_PORT + NODES))] CPUs=16 Boards=1 SocketsPerBoard=1 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=64000 Gres=gpu:8
PartitionName=gpu Nodes=node[1-$NODES] Default=YES MaxTime=INFINITE State=UP
CONF
cat >"$DIR/etc/gres.conf" <<CONF
AutoDetect=off
NodeName=node[1-$NODES] Name=gpu File=$DIR/dev/nvidia[0-7]
CONF
export SLURM_CONF=$DIR/etc/slurm.conf
start slurmdbd slurmdbd -D   # creates the tables on first start
wait_for 60 slurmdbd sacctmgr -n list cluster
# slurmctld refuses to start against a slurmdbd that does not know its cluster.
sacctmgr -i add cluster $CLUSTER >/dev/null
start slurmctld slurmctld -D -c -i
for ((i = 1; i <= NODES; i++)); do start slurmd-node$i slurmd -D -N node$i; done
idle() { [ "$(sinfo -h -N -o %T | grep -c '^idle$')" = "$NODES" ]; }
wait_for 60 "$NODES idle nodes" idle
log "slurmdbd, slurmctld, $NODES slurmd up"

# --- 3. two real jobs as templates for the fill ---
# A job shaped like history_fill.cc's (2 nodes x 16 CPUs x 8 GPUs, 16 tasks, 2 h limit) with a batch
# step and two srun steps named as Muster's; and a held job, cancelled, as Muster's bench's QUEUED.
tj=$(sbatch --parsable -J train-0 -p gpu -N2 --ntasks-per-node=8 --exclusive --gres=gpu:8 -t 120 \
  -D /tmp -o /dev/null --wrap 'srun -J python true; srun -J eval true')
cj=$(sbatch --parsable -H -D /tmp -o /dev/null --wrap true)
scancel "$cj"
J=slurm_acct_db.${CLUSTER}_job_table
S=slurm_acct_db.${CLUSTER}_step_table
# slurmctld sends job and step records to slurmdbd asynchronously: wait until they are all there.
tmpl_done() {
  [ "$(SQL -e "select count(*) from $J j join $S s using (job_db_inx) where j.id_job=$tj and j.state=3 and s.state=3")" = 3 ] &&
  [ "$(SQL -e "select count(*) from $J where id_job=$cj and state=4")" = 1 ]
}
wait_for 60 "template jobs in the database" tmpl_done
tinx=$(SQL -e "select job_db_inx from $J where id_job=$tj")
cinx=$(SQL -e "select job_db_inx from $J where id_job=$cj")
log "template jobs $tj (db row $tinx) and $cj (db row $cinx) recorded"

# --- 3b. the fill: INSERT ... SELECT from the template rows over MariaDB's seq_ tables ---
# select_list TABLE OVERRIDES: every column of TABLE but job_db_inx (the job table's auto key),
# as t.COL unless OVERRIDES (lines "col expr") gives an expression for it.
select_list() {
  local table=$1 overrides=$2 col out=() expr
  while read -r col; do
    [ "$col" = job_db_inx ] && [ "$table" = "${CLUSTER}_job_table" ] && continue
    expr=$(awk -v c="$col" '$1 == c { $1 = ""; sub(/^ /, ""); print; exit }' <<<"$overrides")
    out+=("${expr:-t.\`$col\`}")  # quoted: e.g. `partition` is a reserved word
  done < <(SQL -e "select column_name from information_schema.columns where table_schema='slurm_acct_db'
                   and table_name='$table' order by ordinal_position")
  local IFS=,; echo "${out[*]}"
}
now=$(date +%s)
cbase=100                       # cancelled jobs first (Muster's QUEUED were submitted before the fill)
hbase=$((cbase + CANCELLED))    # then the history, ids above everything
spread=$((SPREAD_DAYS * 86400))
# Job i ends at now - (HISTORY - i) * spread / HISTORY (oldest first), submitted 1 h before its end,
# started 50 min before it; every 10th FAILED with exit code 1 (wait status 256), users uid 1000/1001.
E="($now - ((${HISTORY} - s.seq) * $spread) DIV ${HISTORY})"
hist_over="id_job $hbase + s.seq
job_name CONCAT('train-', s.seq % 100)
id_user IF(s.seq % 3 = 0, 1000, 1001)
id_group IF(s.seq % 3 = 0, 1000, 1001)
state IF(s.seq % 10 = 0, 5, 3)
exit_code IF(s.seq % 10 = 0, 256, 0)
mod_time $now
time_submit $E - 3600
time_eligible $E - 3600
time_start $E - 3000
time_end $E"
canc_over="id_job $cbase + s.seq
mod_time $now
time_submit $now - 60
time_start $now - 60
time_end $now - 60"
# Steps of each new job: the template's batch step (same state and exit code as its job, running
# start..end) and steps 0, 1 (COMPLETED, 15 min each, as history_fill.cc).
step_over="job_db_inx j.job_db_inx
state IF(t.id_step = -5, j.state, 3)
exit_code IF(t.id_step = -5, j.exit_code, 0)
time_start IF(t.id_step = -5, j.time_start, j.time_end - 2900 + t.id_step * 1000)
time_end IF(t.id_step = -5, j.time_end, j.time_end - 2000 + t.id_step * 1000)"
jcols=$(SQL -e "select group_concat(concat('\`', column_name, '\`') order by ordinal_position) from information_schema.columns
                where table_schema='slurm_acct_db' and table_name='${CLUSTER}_job_table' and column_name<>'job_db_inx'")
scols=$(SQL -e "select group_concat(concat('\`', column_name, '\`') order by ordinal_position) from information_schema.columns
                where table_schema='slurm_acct_db' and table_name='${CLUSTER}_step_table'")
canc_sel=$(select_list ${CLUSTER}_job_table "$canc_over")
hist_sel=$(select_list ${CLUSTER}_job_table "$hist_over")
step_sel=$(select_list ${CLUSTER}_step_table "$step_over")
f0=${EPOCHREALTIME/./}
if [ "$CANCELLED" -gt 0 ]; then
  SQL -e "INSERT INTO $J ($jcols) SELECT $canc_sel FROM $J t
          JOIN slurm_acct_db.seq_0_to_$((CANCELLED - 1)) s WHERE t.job_db_inx = $cinx"
fi
SQL -e "INSERT INTO $J ($jcols) SELECT $hist_sel FROM $J t
        JOIN slurm_acct_db.seq_0_to_$((HISTORY - 1)) s WHERE t.job_db_inx = $tinx"
f1=${EPOCHREALTIME/./}
SQL -e "INSERT INTO $S ($scols) SELECT $step_sel FROM $S t
        JOIN $J j ON j.id_job BETWEEN $hbase AND $((hbase + HISTORY - 1)) WHERE t.job_db_inx = $tinx"
# The two real template jobs go, so that the counts are exactly HISTORY (+ CANCELLED).
SQL -e "DELETE FROM $S WHERE job_db_inx IN ($tinx, $cinx); DELETE FROM $J WHERE job_db_inx IN ($tinx, $cinx)"
f2=${EPOCHREALTIME/./}
fill_s=$(awk -v a="$f0" -v b="$f2" 'BEGIN { printf "%.1f", (b - a) / 1e6 }')
log "filled $HISTORY jobs (+$CANCELLED cancelled) in ${fill_s} s (jobs $(( (f1 - f0) / 1000 )) ms, steps $(( (f2 - f1) / 1000 )) ms)"
SQL -e "select 'db rows: jobs', count(*) from $J union all select 'steps', count(*) from $S" | tr '\n' ' ' >&2; echo >&2

# --- check: sacct lists every job with its batch step and 2 steps (cancelled held jobs were
# never eligible, so sacct's default listing leaves them out, as Slurm does for real ones) ---
lines=$(sacct -a -S now-30days | wc -l)
want=$((2 + 4 * HISTORY))
log "sacct -a -S now-30days: $lines lines (expected $want = 2 header + $HISTORY x (job, batch, 0, 1))"
[ "$lines" = "$want" ] || echo "WARNING: line count differs" >&2
sacct -a -S now-30days 2>&1 | head -7 >&2 || true   # (head closes the pipe early)
echo "cancelled held jobs in the db: $(SQL -e "select count(*) from $J where state = 4")" >&2

# --- 4. timings: p50 of SAMPLES runs each, output to /dev/null (as slurm_cli_bench.sh) ---
median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.1f", m / 1000}'; }
range() { sort -n | awk 'NR==1 {lo=$1} {hi=$1} END {printf "%.1f-%.1f", lo / 1000, hi / 1000}'; }
time_cmd() {  # time_cmd N CMD...: one duration in microseconds per line
  local n=$1 i s e; shift
  for ((i = 0; i < n; i++)); do
    s=${EPOCHREALTIME/./}; "$@" >/dev/null; e=${EPOCHREALTIME/./}; echo $((e - s))
  done
}
O=$DIR/out
load0=$(cut -d' ' -f1-3 /proc/loadavg)  # the machine has 2 cores: other work skews these figures
time_cmd "$SAMPLES" sacct -a -S now-30days >"$O/a"
time_cmd "$SAMPLES" sacct -a -X -P -S now-30days >"$O/ax"
time_cmd "$SAMPLES" sacct -a -X -P -S now-1days >"$O/a1"
last=$(sacct -a -X -n -P -o JobID -S now-1days | tail -1)
time_cmd "$JSAMPLES" sacct -j "$last" >"$O/aj"
# Peak RSS of one sacct client (it holds the whole answer in memory).
maxrss() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }
rss() { ps -o rss= -p "$(cat "$DIR/run/$1.mypid")" | awk '{ printf "%.1f", $1 / 1024 }'; }

echo
echo "Slurm 22.05.8 sacct, $HISTORY finished jobs (batch + 2 steps each, spread over $SPREAD_DAYS days) + $CANCELLED cancelled held jobs"
echo "| command | lines | p50 ms | min-max ms | samples |"
echo "|---|---|---|---|---|"
row() {
  echo "| \`$1\` | $2 | $(median <"$O/$3") | $(range <"$O/$3") | $(wc -l <"$O/$3") |"
  [ -z "${OUT:-}" ] || printf '%s\t%s\t%s\n' "$3" "$2" "$(median <"$O/$3")" >>"$OUT"
}
row "sacct -a -S now-30days" "$lines" a
row "sacct -a -X -P -S now-30days" "$(sacct -a -X -P -S now-30days | wc -l)" ax
row "sacct -a -X -P -S now-1days" "$(sacct -a -X -P -S now-1days | wc -l)" a1
row "sacct -j $last" "$(sacct -j "$last" | wc -l)" aj
echo
echo "load average before the timings: $load0; after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "RSS after the runs, MB: slurmdbd $(rss slurmdbd), mysqld $(rss mysqld), slurmctld $(rss slurmctld)"
[ -z "${OUT:-}" ] || printf 'rss\t-\t%s\n' "slurmctld $(rss slurmctld) MB + slurmdbd $(rss slurmdbd) MB + mysqld $(rss mysqld) MB" >>"$OUT"
if [ -x /usr/bin/time ]; then
  echo "sacct client peak RSS, MB: -a -S now-30days $(maxrss sacct -a -S now-30days | awk '{printf "%.1f", $1/1024}'), -a -X -P -S now-30days $(maxrss sacct -a -X -P -S now-30days | awk '{printf "%.1f", $1/1024}')"
fi
echo "fill (SQL, $HISTORY jobs + $((3 * HISTORY)) steps + $CANCELLED cancelled): ${fill_s} s"
