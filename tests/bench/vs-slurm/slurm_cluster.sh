#!/usr/bin/env bash
# A 4-node Slurm 22.05 (Debian's packages) on this machine, loopback only, for the side-by-side
# benchmark: munged on a socket of its own, slurmctld, and one slurmd per node (Debian builds
# Slurm with multiple-slurmd), every process started and stopped here by pid. Fake GPUs are
# inert character devices (Slurm gives jobs CUDA_VISIBLE_DEVICES only for device files); no
# cgroups, no accounting daemon (slurmdbd needs MariaDB), Slurm's default scheduler settings
# (but MinJobAge, below).
#   usage: slurm_cluster.sh start DIR [NODES] | stop DIR        (as root)
# After start, DIR/slurm.conf is the cluster's (export SLURM_CONF=DIR/slurm.conf).
set -euo pipefail
cmd=${1:?usage: $0 start|stop DIR [NODES]}
DIR=${2:?usage: $0 start|stop DIR [NODES]}
NODES=${3:-4}
mkdir -p "$DIR"/{run,log,state,spool,dev,munge}
DIR=$(cd "$DIR" && pwd)

stop_pid_file() {  # stop_pid_file FILE NAME: SIGTERM, then SIGKILL after 5 s, the pid FILE names
  local f=$1 name=$2 pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ]; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

if [ "$cmd" = stop ]; then
  for f in "$DIR"/run/slurmd-*.mypid; do [ -e "$f" ] && stop_pid_file "$f" slurmd; done
  stop_pid_file "$DIR/run/slurmctld.mypid" slurmctld
  stop_pid_file "$DIR/run/munged.mypid" munged
  exit 0
fi
[ "$cmd" = start ] || { echo "usage: $0 start|stop DIR [NODES]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "slurm_cluster.sh: needs root" >&2; exit 2; }
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null ||
   ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurmctld slurmd slurm-client munge \
    slurm-wlm-basic-plugins >"$DIR/log/apt.log" 2>&1 ||
    { tail -5 "$DIR/log/apt.log" >&2; exit 1; }
fi
[ -r /etc/munge/munge.key ] || { echo "no /etc/munge/munge.key (munge's postinst makes it)" >&2; exit 1; }
host=$(hostname -s)
for i in $(seq 0 7); do [ -c "$DIR/dev/nvidia$i" ] || mknod "$DIR/dev/nvidia$i" c 195 "$i"; done
chown munge:munge "$DIR/munge"
if ! setpriv --reuid=munge --regid=munge --clear-groups test -w "$DIR/munge"; then
  echo "slurm_cluster.sh: user munge cannot reach $DIR/munge (a directory above it is closed)" >&2
  exit 1
fi
cat >"$DIR/slurm.conf" <<CONF
ClusterName=vsbench
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=17000
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
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
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MaxJobCount=100000
# Finished jobs leave the controller's memory after 2 s (Slurm's default: 300 s): squeue --json
# lists them too (22.05 ignores its filters), and Muster's lists pending and running jobs only.
MinJobAge=2
MaxArraySize=10001
GresTypes=gpu
NodeName=node[1-$NODES] NodeHostname=$host NodeAddr=127.0.0.1 Port=[17001-$((17000 + NODES))] CPUs=16 Boards=1 SocketsPerBoard=1 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=64000 Gres=gpu:8
PartitionName=gpu Nodes=node[1-$NODES] Default=YES MaxTime=INFINITE State=UP
CONF
cat >"$DIR/gres.conf" <<CONF
AutoDetect=off
NodeName=node[1-$NODES] Name=gpu File=$DIR/dev/nvidia[0-7]
CONF
export SLURM_CONF=$DIR/slurm.conf
setsid setpriv --reuid=munge --regid=munge --clear-groups munged -F \
  --socket="$DIR/munge/munge.socket.2" --pid-file="$DIR/munge/munged.pid" \
  --log-file="$DIR/munge/munged.log" --seed-file="$DIR/munge/munged.seed" </dev/null \
  >"$DIR/log/munged.out" 2>&1 &
echo $! >"$DIR/run/munged.mypid"
for _ in $(seq 50); do [ -S "$DIR/munge/munge.socket.2" ] && break; sleep 0.1; done
setsid slurmctld -D -c -i -f "$DIR/slurm.conf" </dev/null >"$DIR/log/slurmctld.out" 2>&1 &
echo $! >"$DIR/run/slurmctld.mypid"
for i in $(seq 1 "$NODES"); do
  setsid slurmd -D -N "node$i" -f "$DIR/slurm.conf" </dev/null >"$DIR/log/slurmd-node$i.out" 2>&1 &
  echo $! >"$DIR/run/slurmd-node$i.mypid"
done
deadline=$(($(date +%s) + 60))
while [ "$(date +%s)" -lt "$deadline" ]; do
  idle=$(timeout 5 sinfo -h -N -o '%T' 2>/dev/null | grep -c '^idle$' || true)
  [ "$idle" = "$NODES" ] && exit 0
  sleep 0.2
done
echo "slurm_cluster.sh: the nodes did not come up (logs in $DIR/log)" >&2
exit 1
