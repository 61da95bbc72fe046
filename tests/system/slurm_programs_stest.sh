#!/usr/bin/env bash
# System test: real programs that are launched the Slurm way, unchanged, through the compat
# front ends on a 4-agent local cluster.
#   - torch.distributed (gloo, CPU) over 4 agents with srun: rank, world size and the rendezvous
#     address from SLURM_* only; the all-reduce sums right on every rank;
#   - an MPICH hello world started by srun (srun serves PMI-1 through each task's inherited
#     socket, and opens no port anyone could find), with -m cyclic, its MPI_Abort, and mpiexec
#     inside salloc (hydra launches its proxies with srun);
#   - srun --mpi=pmi2: a PMI-2 client of our own (Debian's MPICH speaks PMI-1 only) across two
#     nodes, its abort, and MPICH's PMI-1 served under --mpi=pmi2 too; srun --mpi=list.
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

echo "== MPICH with -m cyclic: ranks alternate over the nodes (PMI_process_mapping says so)"
out=$(timeout 120 srun -N2 -n4 -m cyclic ./mpi_hello | sort)
for r in 0 1 2 3; do
  grep -q "^rank $r of 4 on node$(( r % 2 + 1 )): sum 10$" <<<"$out" || fail "cyclic rank $r: $out"
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

# aborts MESSAGE SRUN_ARGS...: the step fails (before the timeout) and srun says MESSAGE.
aborts() {
  local want=$1 rc
  shift
  set +e
  timeout 60 srun "$@" >abort.out 2>abort.err; rc=$?
  set -e
  [ $rc != 0 ] && [ $rc != 124 ] && grep -qF "$want" abort.err \
    || fail "srun $*: rc $rc: $(cat abort.out abort.err)"
}

echo "== MPI_Abort of one rank ends the step"
aborts "rank 1 called MPI_Abort (exit code 3)" -N2 -n4 ./mpi_hello abort

echo "== srun --mpi=list, and --mpi=pmix refused by name"
out=$(srun --mpi=list)
[ "$out" = "$(printf 'MPI plugin types are...\n\tnone\n\tpmi1\n\tpmi2')" ] || fail "--mpi=list: $out"
set +e
srun --mpi=pmix true 2>err.txt; rc=$?
set -e
[ $rc != 0 ] && grep -q "mpi=pmix is not supported" err.txt || fail "--mpi=pmix not refused: $(cat err.txt)"

# Debian's MPICH 4.0.2 speaks PMI-1 only (its first line is "cmd=init pmi_version=1" whatever
# PMI_VERSION or MPIR_CVAR_PMI_VERSION say), so a small client of our own speaks PMI-2.
echo "== PMI-2 (srun --mpi=pmi2 -N2 -n4): fullinit, node attributes, put/fence/get, finalize"
cc -O2 -o pmi2_client "$ROOT/tests/programs/pmi2_client.c"
out=$(timeout 60 srun --mpi=pmi2 -N2 -n4 ./pmi2_client | sort) || fail "pmi2 client: $out"
for r in 0 1 2 3; do
  grep -q "^pmi2 rank $r of 4 on node$(( r / 2 + 1 )): cards 4, node leader $(( r / 2 * 2 )), mapping (vector,(0,2,2))$" <<<"$out" \
    || fail "pmi2 rank $r: $out"
done
out=$(SLURM_MPI_TYPE=pmi2 timeout 60 srun -N2 -n2 sh -c 'echo "$SLURM_MPI_TYPE $PMI_JOBID"' | sort -u)
[[ "$out" =~ ^pmi2\ [0-9]+\.[0-9]+$ ]] || fail "pmi2 tasks' environment: $out"
out=$(SLURM_MPI_TYPE=pmi2 timeout 60 srun --mpi=none -n1 sh -c 'echo "${PMI_FD:-nofd} ${PMI_JOBID:-nojobid} $SLURM_MPI_TYPE"')
[ "$out" = "nofd nojobid none" ] || fail "--mpi=none tasks' environment: $out"
# A PMI-2 client in a PMI-1 step fails at once (its socket closes), rather than waiting.
set +e
timeout 60 srun --mpi=pmi1 -N1 -n2 ./pmi2_client >pmi1.out 2>pmi1.err; rc=$?
set -e
[ $rc != 0 ] && [ $rc != 124 ] && grep -q "init answered cmd=response_to_init pmi_version=1" pmi1.err \
  || fail "PMI-2 client under --mpi=pmi1: rc $rc: $(cat pmi1.out pmi1.err)"

echo "== PMI-2 abort of one rank, or its end outside a fence, ends the step (no hang)"
aborts "rank 1 called MPI_Abort: rank 1 gives up" --mpi=pmi2 -N2 -n4 ./pmi2_client abort
aborts "rank 1 ended outside the PMI fence the others wait in" --mpi=pmi2 -N2 -n4 ./pmi2_client vanish

echo "== MPICH (PMI-1) under --mpi=pmi2, as Slurm's mpi/pmi2 serves it, and its MPI_Abort"
out=$(timeout 120 srun --mpi=pmi2 -N2 -n4 ./mpi_hello | sort)
[ "$(grep -c ': sum 10$' <<<"$out")" = 4 ] || fail "mpi_hello under --mpi=pmi2: $out"
aborts "rank 1 called MPI_Abort (exit code 3)" --mpi=pmi2 -N2 -n4 ./mpi_hello abort

echo "== MPICH hello world: mpiexec inside salloc"
# hydra's proxies call back to mpiexec by host name, which a bare machine (or container) may not
# resolve: -iface lo makes it give its loopback address instead.
out=$(timeout 120 salloc -N2 -n4 mpiexec.mpich -iface lo ./mpi_hello 2>salloc.err | sort)
[ "$(grep -c ': sum 10$' <<<"$out")" = 4 ] || fail "mpiexec in salloc: $out $(cat salloc.err)"
echo "PASS"
