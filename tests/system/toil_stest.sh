#!/usr/bin/env bash
# System test: Toil (Debian's `toil` package) drives a 2-agent local cluster through the compat
# front ends with `--batchSystem slurm` and nothing else Muster-specific: its Slurm batch system
# runs `scontrol show config`, `sbatch -J .. --export=ALL,.. --mem --cpus-per-task -o -e --wrap`,
# `squeue -h --format '%i %t %M'`, `sacct -n -j IDS --format JobIDRaw,State,ExitCode -P -S ..`
# and `scancel`, and parses their answers.
#   - a Python workflow (a root job and two children writing files): its outputs, each written
#     by a Slurm job of its own;
#   - the same with one child exiting 3 on purpose: Toil sees exit value 3, retries it once, and
#     the run fails naming the job;
#   - a running Toil job cancelled with scancel while Toil waits: Toil sees it end (exit value
#     143, Slurm's 0:15) and the run fails;
#   - a two-step CWL workflow with toil-cwl-runner: its output file.
# The four runs go at once (Toil polls every 36 s, 1.2 x Slurm's SchedulerTimeSlice).
#   usage: toil_stest.sh BIN_DIR         (exit 77, skipped, where toil is not installed)
set -euo pipefail
BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
if ! "$PY" -c 'import toil' 2>/dev/null || ! command -v toil-cwl-runner >/dev/null; then
  echo "SKIP: toil is not installed (apt-get install toil)"
  exit 77
fi
DIR=$(mktemp -d /tmp/muster-toil.XXXXXX)
PIDS=()
cleanup() {
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "--- FAILED (rc=$rc); logs:" >&2
    for f in "$DIR"/*.log "$DIR"/cluster/log/*.log; do
      [ -f "$f" ] && { echo "--- $f" >&2; tail -n 25 "$f" >&2; }
    done
  fi
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  "$BIN/muster" local down --dir "$DIR/cluster" --purge >/dev/null 2>&1 || true
  reap_leftovers "$DIR" || rc=1
  rm -rf "$DIR"
  exit $rc
}
trap cleanup EXIT
. "$ROOT/tests/system/lib.sh"
cd "$DIR"

eval "$("$BIN/muster" local up --dir "$DIR/cluster" --nodes 2 --gpus-per-node 2)"
"$BIN/muster" compat install "$DIR/compat" >/dev/null
export PATH="$DIR/compat:$BIN:$PATH"
# Toil's scratch (its work and coordination directories, the jobs' -o/-e files) stays in $DIR.
mkdir -p work coord tmp out_ok out_fail out_cancel
export TMPDIR=$DIR/tmp
toil_opts=(--batchSystem slurm --workDir "$DIR/work" --coordinationDir "$DIR/coord")
WF=$ROOT/tests/programs/toil_workflow.py

# run NAME CMD...: in the background, its output in NAME.log, its exit status in NAME.rc.
run() {
  local name=$1; shift
  ( set +e; timeout 400 "$@" >"$name.log" 2>&1; echo $? >"$name.rc" ) &
  PIDS+=($!)
}
run ok "$PY" "$WF" "file:$DIR/js_ok" "${toil_opts[@]}" --outdir "$DIR/out_ok"
run fail "$PY" "$WF" "file:$DIR/js_fail" "${toil_opts[@]}" --outdir "$DIR/out_fail" --fail
run cancel "$PY" "$WF" "file:$DIR/js_cancel" "${toil_opts[@]}" --outdir "$DIR/out_cancel" \
  --sleep --retryCount 0
run cwl toil-cwl-runner "${toil_opts[@]}" --jobStore "file:$DIR/js_cwl" --outdir "$DIR/out_cwl" \
  "$ROOT/tests/programs/toil_cwl/wf.cwl" "$ROOT/tests/programs/toil_cwl/job.yml"

echo "== cancel: scancel the running Toil job while Toil waits"
wait_for 180 test -s out_cancel/sleeping
job=$(cat out_cancel/sleeping)
[[ $job =~ ^[0-9]+$ ]] || fail "the sleeping Toil job has no SLURM_JOB_ID: '$job'"
[ "$(squeue -h -j "$job" -o %t)" = R ] || fail "job $job is not running: $(squeue -j "$job")"
scancel "$job"
wait_for 20 sh -c "sacct -n -X -j $job -o State -P | grep -qx CANCELLED"

echo "== waiting for the four Toil runs"
for name in ok fail cancel cwl; do wait_for 450 test -s "$name.rc"; done
PIDS=()

echo "== Python workflow: both children wrote their files, each from a Slurm job"
[ "$(cat ok.rc)" = 0 ] || fail "the workflow failed (rc $(cat ok.rc))"
grep -q "Finished toil run successfully" ok.log || fail "no success line in ok.log"
a=$(cat out_ok/a.txt) b=$(cat out_ok/b.txt)
[[ $a =~ ^child\ a\ [0-9]+$ && $b =~ ^child\ b\ [0-9]+$ ]] || fail "outputs: '$a' '$b'"
[ "${a##* }" != "${b##* }" ] || fail "both children ran in Slurm job ${a##* }"
for id in "${a##* }" "${b##* }"; do
  sacct -n -X -j "$id" -o JobName,State,ExitCode -P | grep -q '^toil_job_.*|COMPLETED|0:0$' \
    || fail "job $id: $(sacct -n -X -j "$id" -o JobName,State,ExitCode -P)"
done

echo "== failing job: Toil sees exit value 3, retries once, the run fails"
[ "$(cat fail.rc)" != 0 ] || fail "the failing workflow succeeded"
[ "$(grep -c "Job failed with exit value 3: 'child'" fail.log)" = 2 ] \
  || fail "Toil did not see exit value 3 twice: $(grep -i 'failed' fail.log)"
grep -q "is completely failed" fail.log || fail "no 'completely failed' in fail.log"
grep -q "Failed jobs at end of the run: .*'child'" fail.log || fail "the child is not named failed"
[ "$(cat out_fail/a.txt)" != "" ] && [ ! -e out_fail/b.txt ] || fail "fail run outputs: $(ls out_fail)"

echo "== cancel: Toil noticed the cancelled job (exit value 143) and failed the run"
[ "$(cat cancel.rc)" != 0 ] || fail "the cancelled workflow succeeded"
grep -q "Job failed with exit value 143" cancel.log \
  || fail "Toil did not see the cancel: $(grep -i 'failed' cancel.log)"
[ -z "$(squeue -h -j "$job" -o %i 2>/dev/null)" ] || fail "job $job still queued after cancel"

echo "== CWL workflow: toil-cwl-runner's output"
[ "$(cat cwl.rc)" = 0 ] || fail "toil-cwl-runner failed (rc $(cat cwl.rc))"
count=$(cat out_cwl/count.txt)
[ "${count%% *}" = 16 ] || fail "count.txt: '$count' (want 16 bytes: 'hello from toil')"
grep -q '"counted"' cwl.log || fail "no 'counted' output object in cwl.log"
echo "PASS"
