#!/usr/bin/env bash
# One user floods the controller; does another user notice? Root's `muster queue` (1,000 pending
# jobs) is timed idle, then while a second user sends squeue's request (all 1,000 jobs) on
# FLOODERS connections as fast as the controller answers (one small process, so that the flood
# loads the controller rather than the machine's process table), first with the per-user
# request rate (controller.user_request_rate, default 100/s) and then without it (0). The
# issue's target: the other user's p99 within 2x of idle.
#   usage: tests/bench/flood_bench.sh [BIN_DIR]     (default build/release/bin); needs root
# Env: SAMPLES (default 300), FLOODERS (default 8), RATE (default 100, the config's default),
# WARMUP seconds of flood before measuring (default 5: the flooder's burst is spent by then),
# NOREAD connections that ask for the listing and never read it (default 64), ONLY_NOREAD=1 for
# that part alone.
set -euo pipefail
BIN=$(cd "${1:-build/release/bin}" && pwd)
SAMPLES=${SAMPLES:-300}
FLOODERS=${FLOODERS:-8}
RATE=${RATE:-100}
WARMUP=${WARMUP:-5}
NOREAD=${NOREAD:-64}
[ "$(id -u)" = 0 ] || { echo "flood_bench: needs root (it runs the flood as another user)" >&2; exit 1; }
DIR=$(mktemp -d /tmp/muster-flood.XXXXXX)
chmod 755 "$DIR"
FLOOD_USER=muster-flood
MADE_USER=
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "$BIN/muster" local down --dir "$DIR/cluster" --purge >/dev/null 2>&1 || true
  [ -n "$MADE_USER" ] && userdel "$FLOOD_USER" 2>/dev/null
  rm -rf "$DIR"
}
trap cleanup EXIT
if ! id "$FLOOD_USER" >/dev/null 2>&1; then useradd --no-create-home "$FLOOD_USER"; MADE_USER=1; fi
# The flood: squeue's request (METHOD_LIST_JOBS, an empty ListJobsRequest) on N connections,
# each sending the next as soon as the last is answered; it writes its answers per second.
cat > "$DIR/flood.py" <<'PY'
import selectors, socket, struct, sys, time
path, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
request = struct.pack(">II", 4, 4)  # length 4 (the type only), METHOD_LIST_JOBS, no payload
sel = selectors.DefaultSelector()
bufs = {}
for _ in range(n):
    s = socket.socket(socket.AF_UNIX); s.connect(path); s.sendall(request)
    sel.register(s, selectors.EVENT_READ); bufs[s] = b""
answers, start = 0, time.time()
while True:
    for key, _ in sel.select(timeout=1):
        s = key.fileobj
        data = s.recv(1 << 20)
        if not data:
            sys.exit(0)
        buf = bufs[s] + data
        while len(buf) >= 8:
            length = struct.unpack(">I", buf[:4])[0]
            if len(buf) < 4 + length:
                break
            buf = buf[4 + length:]
            answers += 1
            s.sendall(request)
        bufs[s] = buf
    if time.time() - start > 0.2:
        start = time.time()
        open(out + ".tmp", "w").write("%d\n" % answers)
        __import__("os").replace(out + ".tmp", out)
PY
# The flood that never reads: NOREAD connections (the per-user cap is 64), each asking for the
# listing once and never reading the answer, with a small receive buffer so that the controller
# holds the rest of its page; a connection the controller closes (30 s) is opened again.
cat > "$DIR/noread.py" <<'PY'
import selectors, socket, struct, sys, time
path, n = sys.argv[1], int(sys.argv[2])
request = struct.pack(">II", 4, 4)  # METHOD_LIST_JOBS, no payload
sel = selectors.DefaultSelector()
def open_one():
    s = socket.socket(socket.AF_UNIX)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(path); s.sendall(request)
    sel.register(s, selectors.EVENT_READ)
opened = 0
for _ in range(n):
    try: open_one(); opened += 1
    except OSError: break
print("noread: %d connections" % opened, file=sys.stderr)
while True:
    for key, _ in sel.select(timeout=1):
        s = key.fileobj
        try:
            peek = s.recv(1, socket.MSG_PEEK)
        except OSError:
            peek = b""
        if peek:
            time.sleep(0.01)  # an answer is waiting: leave it unread
            continue
        sel.unregister(s); s.close()
        try: open_one()
        except OSError: pass
PY
chmod 644 "$DIR/flood.py" "$DIR/noread.py"
mkdir -m 777 "$DIR/out"  # where the flooding user writes its count
export PATH="$BIN:$PATH"

p() {  # percentile P of microsecond samples on stdin, in ms
  sort -n | awk -v p="$1" '{a[NR]=$1} END {i=int(NR*p/100+0.5); if (i<1) i=1; printf "%.2f", a[i]/1000}'
}
measure() {  # SAMPLES timed `muster queue` calls as root
  for ((i = 0; i < SAMPLES; i++)); do
    local s=${EPOCHREALTIME/./}; muster queue >/dev/null; local e=${EPOCHREALTIME/./}; echo $(( e - s ))
  done
}
run() {  # run RATE_SETTING LABEL
  eval "$(muster local up --dir "$DIR/cluster" --nodes 2 2>/dev/null)"
  muster local down --dir "$DIR/cluster" >/dev/null 2>&1
  sed -i "/^user_request_rate/d; s|^\[controller\]$|[controller]\nuser_request_rate = $1|" "$MUSTER_CONF"
  eval "$(muster local up --dir "$DIR/cluster" --nodes 2 2>/dev/null)"
  if [ "$(muster queue --noheader | wc -l)" -lt 1000 ]; then
    for ((i = 0; i < 1000; i++)); do muster submit -H --wrap true -o /dev/null >/dev/null; done
  fi
  chmod 755 "$DIR/cluster" "$DIR/cluster/run"
  measure > "$DIR/idle.txt"
  PIDS=()
  local socket
  socket=$(sed -n 's/^socket = "\(.*\)"$/\1/p' "$MUSTER_CONF" | head -1)
  setpriv --reuid="$FLOOD_USER" --regid="$FLOOD_USER" --clear-groups \
    /usr/bin/python3 "$DIR/flood.py" "$socket" "$FLOODERS" "$DIR/out/flood-count.txt" &
  PIDS+=($!)
  sleep "$WARMUP"  # long enough to spend the flooder's burst: what follows is its steady rate
  local a0 t0 a1 t1
  a0=$(cat "$DIR/out/flood-count.txt" 2>/dev/null || echo 0); t0=${EPOCHREALTIME/./}
  measure > "$DIR/flood.txt"
  a1=$(cat "$DIR/out/flood-count.txt" 2>/dev/null || echo 0); t1=${EPOCHREALTIME/./}
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  PIDS=()
  local i50 i99 f50 f99
  i50=$(p 50 < "$DIR/idle.txt"); i99=$(p 99 < "$DIR/idle.txt")
  f50=$(p 50 < "$DIR/flood.txt"); f99=$(p 99 < "$DIR/flood.txt")
  echo "$2: idle p50 $i50 ms p99 $i99 ms; during the flood p50 $f50 ms p99 $f99 ms; p99 ratio $(awk -v a="$f99" -v b="$i99" 'BEGIN {printf "%.2f", a / b}'); meanwhile the flood got $(( (a1 - a0) * 1000000 / (t1 - t0) )) answers/s"
  muster local down --dir "$DIR/cluster" >/dev/null 2>&1
}
# Listings that are asked for and never read: 1,000 held jobs with 900-byte names (a reply of
# about one page, 1 MiB), NOREAD connections of another user holding one each.
run_noread() {
  eval "$(muster local up --dir "$DIR/cluster" --nodes 2 2>/dev/null)"
  local name
  name=$(head -c 900 /dev/zero | tr '\0' n)
  for ((i = 0; i < 1000; i++)); do muster submit -H -J "$name" --wrap true -o /dev/null >/dev/null; done
  chmod 755 "$DIR/cluster" "$DIR/cluster/run"
  measure > "$DIR/idle.txt"
  local rss0
  rss0=$(awk '/VmRSS/ {print $2}' "/proc/$(cat "$DIR/cluster/run/musterctld.pid")/status" 2>/dev/null || echo '?')
  local socket
  socket=$(sed -n 's/^socket = "\(.*\)"$/\1/p' "$MUSTER_CONF" | head -1)
  PIDS=()
  setpriv --reuid="$FLOOD_USER" --regid="$FLOOD_USER" --clear-groups \
    /usr/bin/python3 "$DIR/noread.py" "$socket" "$NOREAD" &
  PIDS+=($!)
  sleep 2
  local rss
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$(cat "$DIR/cluster/run/musterctld.pid")/status" 2>/dev/null || echo '?')
  measure > "$DIR/flood.txt"
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  PIDS=()
  echo "never read ($NOREAD connections, 1,000 jobs of 900-byte names, $SAMPLES samples): idle p50 $(p 50 < "$DIR/idle.txt") ms p99 $(p 99 < "$DIR/idle.txt") ms; during it p50 $(p 50 < "$DIR/flood.txt") ms p99 $(p 99 < "$DIR/flood.txt") ms; controller RSS ${rss0} KiB before, ${rss} KiB with the unread pages"
  muster local down --dir "$DIR/cluster" --purge >/dev/null 2>&1
}
if [ "${ONLY_NOREAD:-}" = 1 ]; then run_noread; exit 0; fi
run "$RATE" "user_request_rate = $RATE ($FLOODERS flooders, $SAMPLES samples)"
run 0 "user_request_rate = 0, no limit ($FLOODERS flooders, $SAMPLES samples)"
run_noread
