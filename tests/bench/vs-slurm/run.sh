#!/usr/bin/env bash
# Muster beside Slurm 22.05 in one run: a 4-node Slurm (Debian's packages, installed if missing;
# slurm_cluster.sh) and a 4-node Muster (`muster local up`, 16 CPUs and 8 fake GPUs per node, as
# the Slurm nodes) up together on this machine, and one workload (workload.sh) run against each
# through the same commands: Slurm's own, and Muster's front ends under Slurm's names. Beside each
# figure, the floor this machine allows, measured in the same run: a sequential fork+exec of
# /bin/true (what any one command costs at least) and the parallel process ceiling
# (process_ceiling.sh: what any drain of trivial jobs can reach). Medians over REPS rounds, the
# systems alternating within each round.
#   usage: tests/bench/vs-slurm/run.sh [BIN_DIR]      (as root; default build/release/bin)
# Env: REPS (default 3), N (jobs per throughput phase, default 1000), BIG (jobs queued for the
# second squeue phase, default 10000), LAT_N (default 20), GANG_N (default 5).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BIN=$(cd "${1:-$here/../../../build/release/bin}" && pwd)
REPS=${REPS:-3}
export N=${N:-1000} BIG=${BIG:-10000} LAT_N=${LAT_N:-20} GANG_N=${GANG_N:-5}
[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (Slurm's daemons, munged)" >&2; exit 2; }
DIR=$(mktemp -d /tmp/muster-vs-slurm.XXXXXX)
chmod 755 "$DIR"  # munged runs as its own user below it
cleanup() {
  "$BIN/muster" local down --dir "$DIR/muster" --purge >/dev/null 2>&1 || true
  "$here/slurm_cluster.sh" stop "$DIR/slurm" >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT

"$here/slurm_cluster.sh" start "$DIR/slurm" 4
"$BIN/muster" local up --dir "$DIR/muster" --nodes 4 --gpus-per-node 8 >/dev/null 2>&1
"$BIN/muster" compat install "$DIR/muster-front" >/dev/null
sleep 2  # the agents' first heartbeats, out of the way
# on_system SYSTEM COMMAND...: the command with that system's commands first in PATH, and its config.
on_system() {
  local sys=$1
  shift
  if [ "$sys" = slurm ]; then
    env "PATH=/usr/bin:/bin:/usr/sbin:/sbin" "SLURM_CONF=$DIR/slurm/slurm.conf" "$@"
  else
    env "PATH=$DIR/muster-front:/usr/bin:/bin:/usr/sbin:/sbin" \
      "MUSTER_CONF=$DIR/muster/muster.toml" "$@"
  fi
}
mkdir -p "$DIR/out"
# The Slurm side must be Slurm's own commands (not Muster's muster-slurm-compat in /usr/bin).
if on_system slurm sbatch --version | grep -q muster; then
  echo "run.sh: /usr/bin/sbatch is Muster's (muster-slurm-compat): no Slurm to compare with" >&2
  exit 2
fi

# The floor: N sequential fork+execs of /bin/true, and the parallel ceiling.
t0=${EPOCHREALTIME/./}
for ((i = 0; i < N; i++)); do /bin/true; done
t1=${EPOCHREALTIME/./}
floor_call_ms=$(awk -v a="$t0" -v b="$t1" -v n="$N" 'BEGIN { printf "%.2f", (b - a) / n / 1e3 }')
# A drain's reference: trivial job scripts as another user, two at a time (one per core).
ceiling=$(N=$N bash "$here/../process_ceiling.sh" | awk '/as user nobody/ { print $(NF-5) }')

# REPS rounds of the throughput and latency phases, alternating which system goes first.
for ((r = 1; r <= REPS; r++)); do
  order="slurm muster"
  [ $((r % 2)) = 0 ] && order="muster slurm"
  for sys in $order; do
    on_system "$sys" WORK="$DIR/out/$sys-$r" bash "$here/workload.sh" rounds >>"$DIR/out/$sys.tsv"
  done
done
# The queue views, once each (filling 10,000 pending jobs takes a minute per system).
for sys in slurm muster; do
  on_system "$sys" WORK="$DIR/out/$sys-q" bash "$here/workload.sh" queue >>"$DIR/out/$sys.tsv"
done
# Resident memory of each system's daemons now (MB, summed over the pids this run started).
rss() { cat "$@" | xargs ps -o rss= -p 2>/dev/null | awk '{ s += $1 } END { printf "%.1f", s / 1024 }'; }
echo -e "rss_ctld_mb\t$(rss "$DIR"/slurm/run/slurmctld.mypid)" >>"$DIR/out/slurm.tsv"
echo -e "rss_nodes_mb\t$(rss "$DIR"/slurm/run/slurmd-*.mypid)" >>"$DIR/out/slurm.tsv"
echo -e "rss_ctld_mb\t$(rss "$DIR"/muster/run/musterctld.pid)" >>"$DIR/out/muster.tsv"
echo -e "rss_nodes_mb\t$(rss "$DIR"/muster/run/musterd-*.pid)" >>"$DIR/out/muster.tsv"

# The table: the median of each metric per system, their ratio, and the floor beside it.
python3 - "$DIR/out/slurm.tsv" "$DIR/out/muster.tsv" "$floor_call_ms" "$ceiling" "$N" "$BIG" \
  "$REPS" <<'PY'
import statistics, sys
slurm_f, muster_f, floor_ms, ceiling, n, big, reps = sys.argv[1:8]
def load(path):
    d = {}
    for line in open(path):
        k, v = line.split("\t")
        d.setdefault(k, []).append(float(v))
    return {k: statistics.median(v) for k, v in d.items()}
s, m = load(slurm_f), load(muster_f)
rows = [
    ("seq_sbatch_per_s", f"{n} sequential sbatch, jobs/s", "higher", f"{1000 / float(floor_ms):.0f} fork+exec/s"),
    ("seq_done_per_s", f"{n} trivial jobs, first submit -> all finished, jobs/s", "higher", f"{ceiling} jobs/s reference"),
    ("array_call_ms", f"one sbatch --array=1-{n} call, ms", "lower", f"{floor_ms} ms per exec"),
    ("array_done_per_s", f"array of {n} -> all finished, tasks/s", "higher", f"{ceiling} jobs/s reference"),
    ("latency_p50_ms", "submit -> job start, idle cluster, p50 ms", "lower", f"{floor_ms} ms per exec"),
    ("gang_p50_ms", "4-node gang submit -> all 4 srun tasks started, p50 ms", "lower", f"{floor_ms} ms per exec"),
    ("squeue_1k_ms", f"squeue, {n} jobs queued, p50 ms", "lower", f"{floor_ms} ms per exec"),
    ("squeue_json_1k_ms", f"squeue --json, {n} jobs queued, p50 ms", "lower", f"{floor_ms} ms per exec"),
    ("squeue_10k_ms", f"squeue, {big} jobs queued, p50 ms", "lower", f"{floor_ms} ms per exec"),
    ("squeue_json_10k_ms", f"squeue --json, {big} jobs queued, p50 ms", "lower", f"{floor_ms} ms per exec"),
    ("rss_ctld_mb", f"controller RSS after the run, MB", "lower", ""),
    ("rss_nodes_mb", "4 node daemons' RSS, MB", "lower", ""),
]
print(f"| metric ({reps} rounds, medians) | Slurm 22.05 | Muster | Muster vs Slurm | this machine's floor |")
print("|---|---|---|---|---|")
for key, label, better, floor in rows:
    a, b = s.get(key), m.get(key)
    if a is None or b is None:
        print(f"| {label} | {a} | {b} | n/a | {floor} |")
        continue
    ratio = (b / a if better == "higher" else a / b) if a and b else float("nan")
    print(f"| {label} | {a:.1f} | {b:.1f} | {ratio:.1f}x {'better' if ratio >= 1 else 'worse'} | {floor} |")
PY
