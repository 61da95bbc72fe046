#!/usr/bin/env bash
# sacct over HISTORY finished jobs, Slurm 22.05 (slurmdbd with MariaDB: slurm_sacct.sh) and Muster
# (the history written into a local cluster's store by history_fill, read through Muster's sacct
# front end) in one run, the same commands against each, and beside them the floor this machine
# allows measured in the same run: a sequential fork+exec of /bin/true. Each job has a batch step
# and two steps, spread over the last ten days, on both sides.
#   usage: tests/bench/vs-slurm/sacct_vs_slurm.sh [BUILD_DIR]   (as root; default build/release)
# Env: HISTORY (default 100000), SAMPLES (default 5), JSAMPLES (default 20).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:-$here/../../../build/release}" && pwd)
export HISTORY=${HISTORY:-100000} SAMPLES=${SAMPLES:-5} JSAMPLES=${JSAMPLES:-20}
[ "$(id -u)" = 0 ] || { echo "sacct_vs_slurm.sh: needs root (Slurm's daemons, munged)" >&2; exit 2; }
DIR=$(mktemp -d /tmp/muster-sacct-vs.XXXXXX)
cleanup() {
  "$BUILD/bin/muster" local down --dir "$DIR/cluster" --purge >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT

median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.1f", m / 1000}'; }
time_cmd() {  # time_cmd N CMD...: one duration in microseconds per line (the clock read here)
  local n=$1 i s e; shift
  for ((i = 0; i < n; i++)); do
    s=${EPOCHREALTIME/./}; "$@" >/dev/null; e=${EPOCHREALTIME/./}; echo $((e - s))
  done
}

# The floor: 500 sequential fork+execs of /bin/true.
t0=${EPOCHREALTIME/./}
for ((i = 0; i < 500; i++)); do /bin/true; done
t1=${EPOCHREALTIME/./}
floor=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 500 / 1e3 }')

# Slurm's side.
OUT="$DIR/slurm.tsv" "$here/slurm_sacct.sh" >"$DIR/slurm.log" 2>&1 || {
  tail -20 "$DIR/slurm.log" >&2
  exit 1
}

# Muster's side: the history in the store before the controller starts (read from disk).
"$BUILD/bin/muster" local up --dir "$DIR/cluster" --nodes 4 --gpus-per-node 8 >/dev/null 2>&1
"$BUILD/bin/muster" local down --dir "$DIR/cluster" >/dev/null 2>&1
"$BUILD/bench/history_fill" "$DIR/cluster/state" "$HISTORY" >/dev/null
eval "$("$BUILD/bin/muster" local up --dir "$DIR/cluster" --nodes 4 --gpus-per-node 8 2>/dev/null)"
"$BUILD/bin/muster" compat install "$DIR/compat" >/dev/null
export PATH="$DIR/compat:$BUILD/bin:$PATH"
: >"$DIR/muster.tsv"
measure() {  # measure KEY N CMD...
  local key=$1 n=$2; shift 2
  time_cmd "$n" "$@" >"$DIR/$key.txt"
  printf '%s\t%s\t%s\n' "$key" "$("$@" | wc -l)" "$(median <"$DIR/$key.txt")" >>"$DIR/muster.tsv"
}
measure a "$SAMPLES" sacct -a -S now-30days
measure ax "$SAMPLES" sacct -a -X -P -S now-30days
measure a1 "$SAMPLES" sacct -a -X -P -S now-1days
last=$(sacct -a -X -n -P -o JobID -S now-1days | tail -1)
measure aj "$JSAMPLES" sacct -j "$last"
rss=$(ps -o rss= -p "$(cat "$DIR/cluster/run/musterctld.pid")" | awk '{printf "%.1f", $1/1024}')
printf 'rss\t-\tmusterctld %s MB\n' "${rss:-?}" >>"$DIR/muster.tsv"

python3 - "$DIR/slurm.tsv" "$DIR/muster.tsv" "$floor" "$HISTORY" <<'EOF'
import sys
def load(path):
    return {k: (lines, v) for k, lines, v in (l.rstrip("\n").split("\t") for l in open(path))}
slurm, muster, floor, n = load(sys.argv[1]), load(sys.argv[2]), sys.argv[3], int(sys.argv[4])
rows = [("a", f"sacct -a -S now-30days ({n:,} jobs with steps)"),
        ("ax", "sacct -a -X -P -S now-30days (jobs only)"),
        ("a1", "sacct -a -X -P -S now-1days (the last day)"),
        ("aj", "sacct -j ID (one job)")]
print(f"| figure (p50) | Slurm 22.05 + slurmdbd | Muster | Slurm / Muster | floor (fork+exec) |")
print("|---|---|---|---|---|")
for key, what in rows:
    s_lines, s = slurm[key]
    m_lines, m = muster[key]
    print(f"| {what}; lines {s_lines} / {m_lines} | {float(s):,.1f} ms | {float(m):,.1f} ms | "
          f"{float(s) / max(float(m), 0.001):.1f}x | {floor} ms |")
print(f"| daemons' RSS after | {slurm['rss'][1]} | {muster['rss'][1]} | | |")
EOF
