#!/usr/bin/env bash
# System test: real programs that are launched the Slurm way, unchanged, through the compat
# front ends on a 4-agent local cluster.
#   - torch.distributed (gloo, CPU) over 4 agents with srun: rank, world size and the rendezvous
#     address from SLURM_* only; the all-reduce sums right on every rank;
#   - an MPICH hello world started by srun (srun serves PMI-1 through each task's inherited
#     socket, and opens no port anyone could find), its MPI_Abort, and mpiexec inside salloc
#     (hydra launches its proxies with srun).
#   usage: slurm_programs_stest.sh BIN_DIR
set -euo pipefail
BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=$(mktemp -d /tmp/muster-programs.XXXXXX)
cleanup() {
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "--- FAILED (rc=$rc); logs:" >&2
    tail -n 20 "$DIR"/cluster/log/*.log >&2 || true
  fi
  "$BIN/muster" local down --dir "$DIR/cluster" --purge >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT
. "$ROOT/tests/system/lib.sh"
cd "$DIR"

# Debian's packages (scripts/install-deps.sh installs them).
PY=/usr/bin/python3
"$PY" -c 'import torch.distributed' 2>/dev/null || fail "python3-torch is not installed"
command -v mpicc.mpich >/dev/null || fail "mpich (libmpich-dev) is not installed"
mpicc.mpich -O2 -o mpi_hello "$ROOT/tests/programs/mpi_hello.c"

eval "$("$BIN/muster" local up --dir "$DIR/cluster" --nodes 4 --gpus-per-node 8)"
"$BIN/muster" compat install "$DIR/compat" >/dev/null
export PATH="$DIR/compat:$BIN:$PATH"

echo "== torch.distributed all-reduce over 4 agents (srun -N4 -n4)"
# gloo picks its interface from the host name; all agents share this machine's loopback.
out=$(GLOO_SOCKET_IFNAME=lo timeout 300 srun -N4 -n4 "$PY" "$ROOT/tests/programs/torch_allreduce.py" | sort)
expected=$(printf 'rank 0 of 4 on node1: sum 10\nrank 1 of 4 on node2: sum 10\nrank 2 of 4 on node3: sum 10\nrank 3 of 4 on node4: sum 10')
[ "$out" = "$expected" ] || fail "torch all-reduce: $out"

echo "== MPICH hello world: srun -N4 -n8 (PMI-1 from srun)"
out=$(timeout 120 srun -N4 -n8 ./mpi_hello | sort)
[ "$(wc -l <<<"$out")" = 8 ] && [ "$(grep -c ': sum 36$' <<<"$out")" = 8 ] || fail "srun mpi: $out"
for r in 0 1 2 3 4 5 6 7; do
  grep -q "^rank $r of 8 on node$(( r / 2 + 1 )): sum 36$" <<<"$out" || fail "rank $r: $out"
done

echo "== PMI has no port: the tasks hold their sockets, srun listens nowhere"
out=$(timeout 60 srun -N2 -n2 sh -c 'echo "${PMI_PORT:-noport} $PMI_FD $(readlink /proc/self/fd/$PMI_FD | cut -c1-7)"' | sort -u)
[ "$out" = "noport 3 socket:" ] || fail "tasks' PMI: $out"
srun -N2 -n2 sleep 3 & srun_pid=$!
sleep 1
inodes=$(find /proc/$srun_pid/fd -lname 'socket:*' -printf '%l\n' 2>/dev/null | tr -dc '0-9\n')
[ -n "$inodes" ] || fail "srun has no sockets to look at"
for i in $inodes; do
  # /proc/net/tcp columns: sl local remote st(0A: LISTEN) ... inode (10th)
  if awk -v i="$i" '$4 == "0A" && $10 == i { found = 1 } END { exit !found }' /proc/net/tcp /proc/net/tcp6; then
    fail "srun listens on a TCP port (socket $i) during a step"
  fi
done
wait $srun_pid || fail "srun -N2 -n2 sleep 3"

echo "== MPI with a large stdin that rank 0 never reads (PMI answers must not wait behind it)"
head -c 10000000 /dev/zero >big.in
out=$(timeout 60 srun -N2 -n4 ./mpi_hello <big.in | sort) || fail "MPI with 10 MB of stdin: $out"
[ "$(grep -c ': sum 10$' <<<"$out")" = 4 ] || fail "MPI with 10 MB of stdin: $out"

echo "== MPI_Abort of one rank ends the step"
set +e
timeout 60 srun -N2 -n4 ./mpi_hello abort >abort.out 2>abort.err; rc=$?
set -e
[ $rc != 0 ] && grep -q "rank 1 called MPI_Abort (exit code 3)" abort.err \
  || fail "MPI_Abort: rc $rc: $(cat abort.out abort.err)"

set +e
srun --mpi=pmi2 true 2>err.txt; rc=$?
set -e
[ $rc != 0 ] && grep -q "mpi=pmi2 is not supported" err.txt || fail "--mpi=pmi2 not refused: $(cat err.txt)"

echo "== MPICH hello world: mpiexec inside salloc"
# hydra's proxies call back to mpiexec by host name, which a bare machine (or container) may not
# resolve: -iface lo makes it give its loopback address instead.
out=$(timeout 120 salloc -N2 -n4 mpiexec.mpich -iface lo ./mpi_hello 2>salloc.err | sort)
[ "$(grep -c ': sum 10$' <<<"$out")" = 4 ] || fail "mpiexec in salloc: $out $(cat salloc.err)"
echo "PASS"
