#!/usr/bin/env bash
# System test: a cluster of separate hosts on this one machine. The controller, two compute nodes
# and a login node each live in a network namespace of their own, joined through a bridge by veth
# pairs this test creates; every command runs in a mount namespace where the controller's Unix
# socket is hidden, so the CLI must go over TCP with MUNGE, and the daemons talk mutual TLS.
#   usage: multi_host_stest.sh BIN_DIR
# Checks, as users and as attackers would:
#   - a user on the login node submits a 2-node gang; its script, on the compute node, runs
#     `muster queue` and a `muster run` step across both nodes, and the job completes;
#   - srun and salloc allocations, srun --pty, and sbatch/squeue/scontrol/sinfo/sacct/scancel
#     work from the login host;
#   - a request with no credential gets UNAUTHENTICATED and no data;
#   - a rogue agent with a certificate from its own CA cannot register as node1;
#   - user A can neither see, cancel, nor run a step in user B's job (private_data = ["jobs"]).
# Needs root (namespaces, users) and Debian's munge, openssl and iproute2; exits 77 (skipped)
# without them. Stops exactly the processes it started, by pid, and removes what it made.
set -euo pipefail
BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
. "$(dirname "$0")/lib.sh"
TAG="mh$$"
skip_without_netns "$TAG" munged openssl useradd runuser python3
NS_SW="$TAG-sw" NS_CTL="$TAG-ctl" NS_N1="$TAG-n1" NS_N2="$TAG-n2" NS_LOGIN="$TAG-login"
NET=10.213.7
CTL_IP=$NET.1 N1_IP=$NET.11 N2_IP=$NET.12 LOGIN_IP=$NET.20 ROGUE_IP=$NET.30
USER_A=muster-mh-a USER_B=muster-mh-b
DIR=$(mktemp -d /tmp/muster-mh.XXXXXX)
chmod 755 "$DIR"
PIDS=()
MADE_USERS=()
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
  for u in "${MADE_USERS[@]}"; do userdel "$u" 2>/dev/null || true; done
  rm -rf "$DIR"
  exit $rc
}
trap cleanup EXIT

echo "== hosts: namespaces, a bridge, veth pairs"
for ns in "$NS_SW" "$NS_CTL" "$NS_N1" "$NS_N2" "$NS_LOGIN"; do
  ip netns add "$ns"
  NAMESPACES+=("$ns")
  ip -n "$ns" link set lo up
done
ip -n "$NS_SW" link add br0 type bridge
ip -n "$NS_SW" link set br0 up
plug() {  # plug NS IP: a veth from the bridge to eth0 in NS, with address IP
  local ns=$1 addr=$2 port="p${1##*-}"
  ip -n "$NS_SW" link add "$port" type veth peer name eth0 netns "$ns"
  ip -n "$NS_SW" link set "$port" master br0 up
  ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set eth0 up
}
plug "$NS_CTL" $CTL_IP
plug "$NS_N1" $N1_IP
plug "$NS_N2" $N2_IP
plug "$NS_LOGIN" $LOGIN_IP

echo "== users, binaries, munged, certificates, config"
for u in $USER_A $USER_B; do
  if ! id "$u" >/dev/null 2>&1; then
    useradd --no-create-home --shell /bin/sh "$u"
    MADE_USERS+=("$u")
  fi
done
mkdir -p "$DIR"/{bin,log,ctl/run,ctl/state,spool,munge,tls,home}
# The binaries where every user may run them (the build tree may be closed to them).
cp "$BIN/muster" "$BIN/musterctld" "$BIN/musterd" "$DIR/bin/"
for u in $USER_A $USER_B; do
  install -d -o "$u" -g "$(id -g "$u")" -m 700 "$DIR/home/$u"
done
head -c 1024 /dev/urandom > "$DIR/munge/munge.key"
chmod 600 "$DIR/munge/munge.key"
/usr/sbin/munged --foreground --socket="$DIR/munge/munge.sock" --key-file="$DIR/munge/munge.key" \
  --log-file="$DIR/log/munged.log" --pid-file="$DIR/munge/munged.pid" \
  --seed-file="$DIR/munge/munged.seed" --num-threads=2 </dev/null >/dev/null 2>&1 &
PIDS+=($!)
wait_for 10 test -S "$DIR/munge/munge.sock"

CONF="$DIR/muster.toml"
cat > "$CONF" <<EOF
cluster_name = "mh"
private_data = ["jobs"]

[controller]
socket = "$DIR/ctl/run/musterctld.sock"
agent_address = "$CTL_IP:6817"
api_address = "$CTL_IP:6819"
state_dir = "$DIR/ctl/state"

[munge]
socket = "$DIR/munge/munge.sock"

[scheduling]
heartbeat_interval_ms = 500
node_not_responding_ms = 5000
node_down_ms = 15000
kill_grace_ms = 2000

[agent]
spool_dir = "$DIR/spool"
kill_jobs_on_stop = true
cgroup_root = "muster-$TAG"

[tls]
ca_file = "$DIR/tls/ca.crt"
controller_cert_file = "$DIR/tls/controller.crt"
controller_key_file = "$DIR/tls/controller.key"
node_cert_file = "$DIR/tls/%n.crt"
node_key_file = "$DIR/tls/%n.key"

[[nodes]]
names = "node[1-2]"
cpus = 4
memory_mb = 8000
gpus = 2
gpu_type = "h100"

[[partition]]
name = "gpu"
nodes = "node[1-2]"
default = true
EOF
chmod 644 "$CONF"
export MUSTER_CONF="$CONF"
"$DIR/bin/muster" certs --dir "$DIR/tls" --node 'node[1-2]' >/dev/null
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

# host NS COMMAND...: run COMMAND on that "host": its network namespace, and a mount namespace of
# its own in which the controller's run directory is an empty tmpfs (so only TCP reaches it).
host() {
  local ns=$1; shift
  ip netns exec "$ns" unshare --mount --propagation private \
    sh -c 'mount -t tmpfs -o size=1m,mode=755 none "$0" && exec "$@"' "$DIR/ctl/run" "$@"
}
# daemon NS COMMAND... &: host, as the background job itself, so that $! is the daemon's pid
# (a function run in the background is a subshell that would otherwise stand in between).
daemon() { local ns=$1; shift; exec ip netns exec "$ns" unshare --mount --propagation private \
  sh -c 'mount -t tmpfs -o size=1m,mode=755 none "$0" && exec "$@"' "$DIR/ctl/run" "$@"; }
# as USER NS COMMAND...: run the CLI's COMMAND as USER on host NS.
as() {
  local u=$1 ns=$2; shift 2
  host "$ns" runuser -u "$u" -- env -i PATH="$DIR/bin:/usr/bin:/bin" MUSTER_CONF="$CONF" \
    HOME="$DIR/home/$u" sh -c 'cd "$HOME" && exec "$@"' sh "$@"
}

echo "== start: musterctld on its host, musterd on each compute host"
# The controller keeps its own socket (its own host sees it).
ip netns exec "$NS_CTL" "$DIR/bin/musterctld" --config "$CONF" >"$DIR/log/musterctld.log" 2>&1 &
PIDS+=($!)
wait_for 20 ip netns exec "$NS_CTL" "$DIR/bin/muster" info
for n in 1 2; do
  ns_var=NS_N$n ip_var=N${n}_IP
  daemon "${!ns_var}" "$DIR/bin/musterd" --config "$CONF" --name "node$n" \
    --gpu-fixture "$DIR/gpus.toml" --spool "$DIR/spool/node$n" \
    --step-address "${!ip_var}:0" >"$DIR/log/musterd-node$n.log" 2>&1 &
  PIDS+=($!)
done
idle_nodes() { [ "$(ip netns exec "$NS_CTL" "$DIR/bin/muster" nodes | grep -c ' idle ')" = 2 ]; }
wait_for 30 idle_nodes
registrations() { grep -c "register node=node1" "$DIR/log/musterctld.log" || true; }
[ "$(registrations)" = 1 ] || fail "node1 registered $(registrations) times"

echo "== the login host has no controller socket; the CLI goes over TCP with MUNGE"
as $USER_A "$NS_LOGIN" sh -c "test ! -e $DIR/ctl/run/musterctld.sock" ||
  fail "the controller's socket is visible on the login host"
out=$(as $USER_A "$NS_LOGIN" muster info) || fail "muster info from the login host: $out"

echo "== a 2-node gang from the login host; its script uses squeue and srun on its node"
cat > "$DIR/home/$USER_A/gang.sh" <<'SCRIPT'
#!/bin/sh
#SBATCH -J mh-gang
#SBATCH -N 2
#SBATCH --gpus-per-node=1
echo "queue:"
muster queue --noheader --format '%i %j %u %t'
muster run sh -c 'echo "task $SLURM_PROCID on $SLURMD_NODENAME as $(id -un)"'
SCRIPT
chown $USER_A "$DIR/home/$USER_A/gang.sh"
id_a=$(as $USER_A "$NS_LOGIN" muster submit --parsable gang.sh) || fail "submit: $id_a"
state_of() { as "$1" "$NS_LOGIN" muster job show "$2" --json | sed -n 's/.*"state":"\([A-Z_]*\)".*/\1/p'; }
is_state() { [ "$(state_of "$1" "$2")" = "$3" ]; }
wait_for 60 is_state $USER_A "$id_a" COMPLETED
out="$DIR/home/$USER_A/slurm-$id_a.out"
[ -f "$out" ] || fail "no output file $out"
grep -q "^$id_a mh-gang $USER_A R" "$out" || { cat "$out"; fail "squeue from the job's node"; }
grep -q "^task 0 on node1 as $USER_A$" "$out" && grep -q "^task 1 on node2 as $USER_A$" "$out" ||
  { cat "$out"; fail "the step's tasks across both compute hosts"; }
[ "$(stat -c %U "$out")" = $USER_A ] || fail "output file not the user's"
sed 's/^/  | /' "$out"

echo "== from the login host: srun and salloc allocations, --pty, and the Slurm front ends"
"$DIR/bin/muster" compat install "$DIR/bin" >/dev/null
out=$(as $USER_A "$NS_LOGIN" srun -N2 -l hostname) || fail "srun -N2 from the login host: $out"
[ "$(grep -c "^[01]: " <<<"$out")" = 2 ] || fail "srun -N2 output: $out"
out=$(as $USER_A "$NS_LOGIN" salloc -N1 sh -c 'srun printenv SLURMD_NODENAME') ||
  fail "salloc from the login host: $out"
grep -q "^node[12]$" <<<"$out" || fail "salloc's step: $out"
# A terminal for the step's task 0 (script(1) gives srun one).
out=$(as $USER_A "$NS_LOGIN" script -qec "srun -N1 --pty sh -c 'tty; id -un'" /dev/null) ||
  fail "srun --pty: $out"
grep -q "^/dev/pts/" <<<"$out" && grep -q "$USER_A" <<<"$out" || fail "srun --pty: $out"
out=$(as $USER_A "$NS_LOGIN" sacct -j "$id_a" -n -X -o JobID,State) || fail "sacct: $out"
grep -q "COMPLETED" <<<"$out" || fail "sacct: $out"
id_s=$(as $USER_A "$NS_LOGIN" sbatch --parsable --wrap 'sleep 30') || fail "sbatch: $id_s"
as $USER_A "$NS_LOGIN" squeue -h -j "$id_s" -o %i | grep -q "^$id_s$" || fail "squeue"
as $USER_A "$NS_LOGIN" scontrol show job "$id_s" | grep -q "JobId=$id_s" || fail "scontrol"
as $USER_A "$NS_LOGIN" sinfo -h >/dev/null || fail "sinfo"
as $USER_A "$NS_LOGIN" scancel "$id_s" || fail "scancel"
wait_for 30 is_state $USER_A "$id_s" CANCELLED

echo "== a request without a credential gets nothing"
reply=$(host "$NS_LOGIN" python3 - "$CTL_IP" <<'PY'
import socket, struct, sys
s = socket.create_connection((sys.argv[1], 6819), timeout=10)
s.sendall(struct.pack(">II", 4, 4))  # ListJobs, empty request, no Authenticate first
head = b""
while len(head) < 8:
    chunk = s.recv(8 - len(head))
    if not chunk: break
    head += chunk
length, status = struct.unpack(">II", head)
body = b""
while len(body) < length - 4:
    chunk = s.recv(length - 4 - len(body))
    if not chunk: break
    body += chunk
print(status, body.decode(errors="replace"))
PY
) || fail "raw request: $reply"
[ "${reply%% *}" = 16 ] || fail "expected UNAUTHENTICATED (16), got: $reply"
grep -q "mh-gang" <<<"$reply" && fail "data leaked without a credential: $reply"
echo "  | $reply"
# A host whose munged is gone: the CLI says so and gets nothing.
sed "s|^socket = \"$DIR/munge/munge.sock\"|socket = \"$DIR/munge/none.sock\"|" "$CONF" > "$DIR/nomunge.toml"
chmod 644 "$DIR/nomunge.toml"
set +e
out=$(host "$NS_LOGIN" runuser -u $USER_A -- env -i PATH="$DIR/bin:/usr/bin:/bin" \
  MUSTER_CONF="$DIR/nomunge.toml" muster queue 2>&1); rc=$?
set -e
[ $rc != 0 ] && grep -qi munge <<<"$out" || fail "queue without munged: rc=$rc $out"
echo "  | $out"

echo "== a rogue agent with its own CA cannot register as node1"
mkdir -p "$DIR/rogue"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj "/CN=rogue-ca" -keyout "$DIR/rogue/ca.key" -out "$DIR/rogue/ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=node1" \
  -addext "subjectAltName=DNS:node1" -keyout "$DIR/rogue/node1.key" -out "$DIR/rogue/node1.csr" 2>/dev/null
printf "subjectAltName=DNS:node1\nextendedKeyUsage=clientAuth\n" > "$DIR/rogue/ext"
openssl x509 -req -in "$DIR/rogue/node1.csr" -CA "$DIR/rogue/ca.crt" -CAkey "$DIR/rogue/ca.key" \
  -CAcreateserial -days 2 -extfile "$DIR/rogue/ext" -out "$DIR/rogue/node1.crt" 2>/dev/null
chmod 600 "$DIR/rogue/"*.key
# The rogue trusts the real controller's CA, so only the controller's check can stop it.
cp "$DIR/tls/ca.crt" "$DIR/rogue/trust.crt"
sed -e "s|node_cert_file = .*|node_cert_file = \"$DIR/rogue/node1.crt\"|" \
    -e "s|node_key_file = .*|node_key_file = \"$DIR/rogue/node1.key\"|" \
    -e "s|spool_dir = .*|spool_dir = \"$DIR/rogue/spool\"|" "$CONF" > "$DIR/rogue/muster.toml"
ip -n "$NS_LOGIN" addr add $ROGUE_IP/24 dev eth0
daemon "$NS_LOGIN" "$DIR/bin/musterd" --config "$DIR/rogue/muster.toml" --name node1 \
  --gpu-fixture "$DIR/gpus.toml" --spool "$DIR/rogue/spool/node1" \
  --step-address "$ROGUE_IP:0" >"$DIR/log/rogue.log" 2>&1 &
rogue=$!
PIDS+=($rogue)
# It tries, and the controller refuses its certificate at the handshake.
wait_for 20 grep -q "cannot register" "$DIR/log/rogue.log"
grep -q "certificate verify failed" "$DIR/log/musterctld.log" ||
  fail "the controller did not refuse the rogue's certificate"
[ "$(registrations)" = 1 ] || fail "the rogue registered as node1"
idle_nodes || fail "node1 changed while the rogue tried"
grep "cannot register" "$DIR/log/rogue.log" | head -1 | cut -c1-160 | sed 's/^/  | /'
kill -TERM $rogue

echo "== user A cannot see, cancel, or run steps in user B's job"
id_b=$(as $USER_B "$NS_LOGIN" muster submit --parsable -J secret-b --wrap 'sleep 60') ||
  fail "submit as B: $id_b"
wait_for 30 is_state $USER_B "$id_b" RUNNING
as $USER_A "$NS_LOGIN" muster queue | grep -q secret-b && fail "A sees B's job in the queue"
set +e
out=$(as $USER_A "$NS_LOGIN" muster job show "$id_b" 2>&1); rc_show=$?
out_cancel=$(as $USER_A "$NS_LOGIN" muster cancel "$id_b" 2>&1); rc_cancel=$?
out_run=$(as $USER_A "$NS_LOGIN" muster run --jobid "$id_b" --overlap true 2>&1); rc_run=$?
set -e
[ $rc_show != 0 ] && ! grep -q secret-b <<<"$out" || fail "A read B's job: $out"
[ $rc_cancel != 0 ] || fail "A cancelled B's job: $out_cancel"
[ $rc_run != 0 ] || fail "A ran a step in B's job: $out_run"
printf '  | %s\n' "$out" "$out_cancel" "$out_run"
is_state $USER_B "$id_b" RUNNING || fail "B's job did not survive A's attempts"
as $USER_B "$NS_LOGIN" muster cancel "$id_b" || fail "B cannot cancel its own job"
wait_for 30 is_state $USER_B "$id_b" CANCELLED

echo "PASS"
