#!/usr/bin/env bash
# What a command costs over the TCP API with MUNGE (a login or compute node) against the Unix
# socket (the controller's host), on one local cluster: `muster info` (the bare round trip),
# `sbatch` and `squeue` with 1,000 pending jobs. Samples of the two ways alternate.
#   usage: tests/bench/remote_api_bench.sh [BIN_DIR]     (default build/release/bin)
# Env: SAMPLES (default 200). Needs munged (Debian's munge); starts its own with a fresh key.
set -euo pipefail
BIN=$(cd "${1:-build/release/bin}" && pwd)
SAMPLES=${SAMPLES:-200}
DIR=$(mktemp -d /tmp/muster-apibench.XXXXXX)
chmod 755 "$DIR"
MUNGED_PID=
cleanup() {
  "$BIN/muster" local down --dir "$DIR/cluster" --purge >/dev/null 2>&1 || true
  [ -n "$MUNGED_PID" ] && kill "$MUNGED_PID" 2>/dev/null && wait "$MUNGED_PID" 2>/dev/null
  rm -rf "$DIR"
}
trap cleanup EXIT
export PATH="$BIN:$PATH"

mkdir -m 755 "$DIR/munge"
head -c 1024 /dev/urandom > "$DIR/munge/munge.key"
chmod 600 "$DIR/munge/munge.key"
/usr/sbin/munged --foreground --socket="$DIR/munge/munge.sock" --key-file="$DIR/munge/munge.key" \
  --log-file="$DIR/munge/munged.log" --pid-file="$DIR/munge/munged.pid" \
  --seed-file="$DIR/munge/munged.seed" >/dev/null 2>&1 &
MUNGED_PID=$!
until [ -S "$DIR/munge/munge.sock" ]; do sleep 0.01; done

# A cluster whose controller also serves the API on TCP.
eval "$(muster local up --dir "$DIR/cluster" --nodes 2 2>/dev/null)"
muster local down --dir "$DIR/cluster" >/dev/null 2>&1
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sed -i "s|^\[controller\]$|[controller]\napi_address = \"127.0.0.1:$port\"|" "$MUSTER_CONF"
printf '\n[munge]\nsocket = "%s"\n' "$DIR/munge/munge.sock" >> "$MUSTER_CONF"
# [munge] must not end up inside an array of tables: move it before the first [[nodes]].
python3 - "$MUSTER_CONF" <<'PY'
import sys
p = sys.argv[1]; s = open(p).read()
block = s[s.rindex("\n[munge]"):]; s = s[:s.rindex("\n[munge]")]
i = s.index("[[nodes]]"); open(p, "w").write(s[:i] + block.strip() + "\n\n" + s[i:])
PY
eval "$(muster local up --dir "$DIR/cluster" --nodes 2 2>/dev/null)"
MUSTER_API=tcp muster info >/dev/null

median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f", m / 1000}'; }
# sample FILE_PREFIX CMD...: SAMPLES runs each way, alternating; microseconds per line.
sample() {
  local name=$1; shift
  : > "$DIR/$name.socket"; : > "$DIR/$name.tcp"
  for ((i = 0; i < SAMPLES; i++)); do
    for way in socket tcp; do
      local s=${EPOCHREALTIME/./}; MUSTER_API=$way "$@" >/dev/null; local e=${EPOCHREALTIME/./}
      echo $(( e - s )) >> "$DIR/$name.$way"
    done
  done
}
report() {
  local a b; a=$(median < "$DIR/$1.socket"); b=$(median < "$DIR/$1.tcp")
  echo "$2: socket p50 $a ms, tcp+munge p50 $b ms, difference $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", b - a}') ms"
}

sample info muster info
report info "muster info ($SAMPLES each)"
sample submit muster submit -H --wrap true -o /dev/null
report submit "muster submit (sbatch) ($SAMPLES each)"
for ((i = 0; i < 1000 - 2 * SAMPLES; i++)); do muster submit -H --wrap true -o /dev/null >/dev/null; done
sample queue muster queue
report queue "muster queue (squeue) with $(muster queue --noheader | wc -l) pending ($SAMPLES each)"
