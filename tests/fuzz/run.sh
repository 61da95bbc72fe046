#!/usr/bin/env bash
# Fuzzes every target in tests/fuzz/targets for SECONDS each (libFuzzer, clang, ASan + UBSan),
# starting from its corpus, and reports executions and crashes per target. New inputs go to
# build/fuzz/work/<target>, never into the repository's corpus (add an input that found a bug to
# tests/fuzz/corpus/<target> by hand, with its fix). Crash inputs are kept in build/fuzz/crashes.
#   usage: tests/fuzz/run.sh SECONDS [TARGET...]      (default: every target)
# Needs Debian's clang (`apt-get install clang`: fuzzing only; the build and the corpus tests use g++).
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH=${1:?usage: tests/fuzz/run.sh SECONDS [TARGET...]}
shift
if [ $# -gt 0 ]; then
  TARGETS=("$@")
else
  TARGETS=()
  for f in tests/fuzz/targets/*.cc; do TARGETS+=("$(basename "$f" .cc)"); done
fi
command -v clang++ >/dev/null || { echo "run.sh: clang++ is missing (apt-get install clang)" >&2; exit 1; }
cmake --preset fuzz >/dev/null
mkdir -p build/fuzz
if ! cmake --build --preset fuzz --target "${TARGETS[@]/#/fuzz_}" >build/fuzz/build.log 2>&1; then
  tail -n 40 build/fuzz/build.log >&2
  echo "run.sh: the fuzz build failed (build/fuzz/build.log)" >&2
  exit 1
fi
OUT=build/fuzz/work
mkdir -p "$OUT" build/fuzz/crashes
status=0
printf "%-18s %12s %10s %8s %6s %s\n" TARGET EXECUTIONS EXEC/S CRASHES SLOW CORPUS
for t in "${TARGETS[@]}"; do
  mkdir -p "$OUT/$t"
  log="$OUT/$t.log"
  # -rss_limit_mb: a target that grows without bound is a finding too.
  set +e
  "build/fuzz/fuzz/fuzz_$t" "$OUT/$t" "tests/fuzz/corpus/$t" -max_total_time="$SECONDS_EACH" \
    -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="build/fuzz/crashes/$t-" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  # Crashes, leaks, timeouts and running out of memory fail the run; a slow unit (over 10 s,
  # usually a loaded machine) is reported, to be looked at.
  crashes=$(find build/fuzz/crashes \( -name "$t-crash-*" -o -name "$t-leak-*" \
    -o -name "$t-timeout-*" -o -name "$t-oom-*" \) | wc -l)
  slow=$(find build/fuzz/crashes -name "$t-slow-unit-*" | wc -l)
  units=$(find "$OUT/$t" -type f | wc -l)
  printf "%-18s %12s %10s %8s %6s %s\n" "$t" "${execs:-?}" "${rate:-?}" "$crashes" "$slow" "$units"
  if [ "$rc" != 0 ] || [ "$crashes" != 0 ]; then
    status=1
    echo "  $t: exit $rc; see $log" >&2
  fi
done
exit $status
