#!/usr/bin/env bash
# muster-sim's speed on whole traces (issue 35's targets: SDSC-SP2's 59,715 jobs in under 5 s,
# the Philly table's ~150,000 in under 30 s on this 2-core machine), median of RUNS runs, beside
# this machine's floors measured in the same run: reading and inflating the trace (what no
# replay can go below) and process_ceiling.sh's /bin/true rate (how busy the machine is).
#   usage: tests/bench/sim_bench.sh BUILD_DIR TRACES_DIR     Env: RUNS (default 3)
set -euo pipefail
BIN=$1/bin/muster-sim
T=$2
RUNS=${RUNS:-3}
here=$(cd "$(dirname "$0")" && pwd)
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
seconds() {  # runs "$@" RUNS times, prints the median wall seconds
  for _ in $(seq "$RUNS"); do
    local t0=${EPOCHREALTIME/./}
    "$@" >/dev/null 2>&1
    local t1=${EPOCHREALTIME/./}
    echo "$(( (t1 - t0) / 1000 ))"
  done | median | awk '{ printf "%.2f", $1 / 1000 }'
}
N=500 "$here/process_ceiling.sh" | sed -n 1p
printf '%-58s %8s s\n' "floor: read and inflate SDSC-SP2" \
  "$(seconds sh -c "gzip -dc $T/SDSC-SP2-1998-4.2-cln.swf.gz | wc -l")"
sdsc="--trace $T/SDSC-SP2-1998-4.2-cln.swf.gz"
philly="--trace $T/philly_df_schedule.csv --nodes 250 --gpus-per-node 8 --cpus-per-node 64 --leaf-size 16"
printf '%-58s %8s s\n' "SDSC-SP2 whole (54,034 jobs), Muster's default policy" "$(seconds "$BIN" $sdsc)"
printf '%-58s %8s s\n' "SDSC-SP2 whole, FCFS + EASY" "$(seconds "$BIN" $sdsc --policy fcfs+easy)"
printf '%-58s %8s s\n' "Philly, first 20,000 jobs, 250 x 8 GPUs, default policy" \
  "$(seconds "$BIN" $philly --jobs 20000)"
printf '%-58s %8s s\n' "Philly whole (151,816 jobs), 250 x 8 GPUs, default policy" \
  "$(seconds "$BIN" $philly)"
printf '%-58s %8s s\n' "Lublin-1, 10 sequences x 12 policies (2 threads)" \
  "$(seconds "$BIN" --trace $T/lublin_256.swf --sequences 10 --seed 1 --policy fcfs+none,fcfs+strict,sjf+strict,f1+strict,wfp3+strict,unicep+strict,fcfs+easy,sjf+easy,f1+easy,fcfs+conservative,fcfs+easy/shortest,muster)"
