#!/usr/bin/env bash
# System test: the daemons as systemd's Type=notify units see them. A stand-in for systemd's
# notification socket (NOTIFY_SOCKET, with a 1 s watchdog: WATCHDOG_USEC) records what each
# process says, by the pid the kernel attests. Checked: the controller says READY=1 only once it
# answers commands; every agent says READY=1; both feed the watchdog from their event loops
# (WATCHDOG=1 about every half second); a job sees none of systemd's variables; both say
# STOPPING=1 when stopped; a SIGHUP makes the controller read its file again (RELOADING=1, then
# READY=1), and a file it cannot take is logged and changes nothing; agents, which have no reload
# yet, log that and keep serving.
#   usage: systemd_notify_stest.sh BIN_DIR
set -euo pipefail
BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ -e /usr/lib/x86_64-linux-gnu/libsystemd.so.0 ] || [ -n "$(ldconfig -p | grep libsystemd.so.0)" ] ||
  { echo "SKIP: libsystemd.so.0 is not installed"; exit 77; }
DIR=$(mktemp -d /tmp/muster-notify.XXXXXX)
listener=""
cleanup() {
  rc=$?
  "$BIN/muster" local down --dir "$DIR/cluster" --purge >/dev/null 2>&1 || true
  [ -z "$listener" ] || { kill "$listener" 2>/dev/null; wait "$listener" 2>/dev/null || true; }
  if [ $rc -ne 0 ]; then
    echo "--- what systemd was told:" >&2
    cat "$DIR/notify.log" >&2 || true
  fi
  reap_leftovers "$DIR" || rc=1
  rm -rf "$DIR"
  exit $rc
}
trap cleanup EXIT

# The stand-in: one line per datagram, "PID<TAB>MESSAGE" (newlines as '|'); on a READY=1 from
# a musterctld it runs `muster queue` at once and appends whether that answered.
python3 - "$DIR/notify.sock" "$DIR/notify.log" "$BIN/muster" "$DIR/cluster/muster.toml" <<'EOF' &
import os, socket, struct, subprocess, sys
path, log, muster, conf = sys.argv[1:5]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
s.bind(path)
out = open(log, "a", buffering=1)
while True:
    msg, anc, _, _ = s.recvmsg(4096, socket.CMSG_SPACE(12))
    pid = 0
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid = struct.unpack("iII", data[:12])[0]
    text = msg.decode(errors="replace")
    line = "%d\t%s" % (pid, text.replace("\n", "|"))
    if "READY=1" in text.split("\n"):
        try:
            comm = open("/proc/%d/comm" % pid).read().strip()
        except OSError:
            comm = "?"
        if comm == "musterctld":
            r = subprocess.run([muster, "queue"], env=dict(os.environ, MUSTER_CONF=conf),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
            line += "\tqueue_rc=%d" % r.returncode
    out.write(line + "\n")
EOF
listener=$!
wait_for 10 test -S "$DIR/notify.sock"

NOTIFY_SOCKET=$DIR/notify.sock WATCHDOG_USEC=1000000 \
  "$BIN/muster" local up --dir "$DIR/cluster" --nodes 2 --gpus-per-node 2 >/dev/null
ctld=$(cat "$DIR/cluster/run/musterctld.pid")
agents=$(cat "$DIR"/cluster/run/musterd-*.pid)
[ "$(echo "$agents" | wc -l)" = 2 ] || fail "expected 2 agents' pid files"

said() { grep -c "^$1	$2" "$DIR/notify.log" || true; }
wait_for 10 grep -q "^$ctld	READY=1|STATUS=serving 2 nodes" "$DIR/notify.log"
first=$(grep -m1 "^$ctld	READY=1" "$DIR/notify.log")
case "$first" in
  *"	queue_rc=0") ;;
  *) fail "the controller said READY before it answered commands: $first" ;;
esac
for a in $agents; do wait_for 10 grep -q "^$a	READY=1|STATUS=node .* started" "$DIR/notify.log"; done

# The watchdog: half of WATCHDOG_USEC between keep-alives, from each daemon.
sleep 2.6
for p in $ctld $agents; do
  n=$(said "$p" "WATCHDOG=1$")
  [ "$n" -ge 3 ] || fail "pid $p fed the watchdog $n times in 2.6 s (want about 5)"
done

# A job sees none of it: it cannot speak for the agent (nor would systemd listen: NotifyAccess=main).
export MUSTER_CONF=$DIR/cluster/muster.toml
id=$("$BIN/muster" submit --parsable -o "$DIR/job-env.txt" --wrap env)
wait_for 20 grep -q '^PATH=' "$DIR/job-env.txt"
! grep -E '^(NOTIFY_SOCKET|WATCHDOG_USEC|WATCHDOG_PID)=' "$DIR/job-env.txt" ||
  fail "job $id inherited the daemon's systemd variables"

# SIGHUP (systemctl reload) to the controller: RELOADING=1, the file read again, READY=1 when
# done; the new partition is there at once.
conf=$DIR/cluster/muster.toml
cp "$conf" "$DIR/muster.toml.orig"
printf '\n[[partition]]\nname = "debug"\nnodes = "node2"\n' >>"$conf"
# Which partitions the controller says node2 is in (`control show partition` reads the file).
parts() {
  "$BIN/muster" nodes --json | python3 -c '
import json, sys
for n in json.load(sys.stdin)["nodes"]:
    if n["name"] == sys.argv[1]: print(",".join(n.get("partitions", [])))' "$1"
}
[ "$(parts node2)" = gpu ] || fail "node2 is in $(parts node2) before the reload"
kill -HUP "$ctld"
wait_for 10 grep -q "^$ctld	READY=1|STATUS=serving, epoch" "$DIR/notify.log"
reloading=$(grep -n "^$ctld	RELOADING=1|MONOTONIC_USEC=[0-9]*|STATUS=" "$DIR/notify.log" | cut -d: -f1 | tail -1)
ready=$(grep -n "^$ctld	READY=1|STATUS=serving, epoch" "$DIR/notify.log" | cut -d: -f1 | tail -1)
[ -n "$reloading" ] && [ "$reloading" -lt "$ready" ] || fail "no RELOADING=1 before READY=1"
[ "$(parts node2)" = gpu,debug ] || fail "after the reload node2 is in $(parts node2)"
# A file the controller cannot take: the error is logged, the unit is ready again, nothing changes.
cp "$conf" "$DIR/muster.toml.good"
printf '[[partition]\n' >>"$conf"
kill -HUP "$ctld"
wait_for 10 grep -q "SIGHUP: the running configuration is kept: $conf:" "$DIR/cluster/log/musterctld.log"
wait_for 10 grep -q "^$ctld	READY=1|STATUS=serving; the last reload was refused" "$DIR/notify.log"
cp "$DIR/muster.toml.good" "$conf"  # the CLI reads the file too
[ "$(parts node2)" = gpu,debug ] || fail "a refused reload changed the config"
# scontrol reconfigure, as the admin: silent when it works; `muster reconfigure` says what changed.
cp "$DIR/muster.toml.orig" "$conf"
printf '\n[[partition]]\nname = "debug"\nnodes = "node1"\n' >>"$conf"
out=$("$BIN/muster" control reconfigure) || fail "scontrol reconfigure failed"
[ -z "$out" ] || fail "scontrol reconfigure printed: $out"
cp "$DIR/muster.toml.orig" "$conf"
out=$("$BIN/muster" reconfigure) || fail "muster reconfigure failed"
echo "$out" | grep -q "^  partition debug removed$" || fail "muster reconfigure said: $out"
# The agents do not reload (yet): they say so and keep serving.
for p in $agents; do kill -HUP "$p"; done
for a in $DIR/cluster/log/musterd-*.log; do
  wait_for 10 grep -q "SIGHUP: reloading the configuration is not supported yet" "$a"
done
for p in $ctld $agents; do kill -0 "$p" 2>/dev/null || fail "pid $p stopped on SIGHUP"; done
"$BIN/muster" queue >/dev/null || fail "the controller stopped serving after SIGHUP"

"$BIN/muster" local down --dir "$DIR/cluster" >/dev/null
for p in $ctld $agents; do
  grep -q "^$p	STOPPING=1|STATUS=" "$DIR/notify.log" || fail "pid $p did not say STOPPING=1"
done
echo "PASS: READY once serving, watchdog fed from the loops, reload on SIGHUP, STOPPING on stop"
