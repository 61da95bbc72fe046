#!/usr/bin/env bash
# One writer per job record. JobEntry::rec() is read-only outside JobManager (the compiler holds
# that); this checks what the compiler cannot see:
#   - a job's state is assigned in one function, JobManager::NextRecord (job_state_machine.cc),
#     and a step's in step_state.cc; views only copy states into replies (info.set_state, ...);
#   - only JobManager's files (job_manager.cc, job_state_machine.cc, job_arrays.cc,
#     job_events.cc) write job records to the store (PutJob) or touch JobEntry's rec_.
#   usage: check-state-writes.sh [ROOT]; --self-test plants each walk-around in a copy.
set -euo pipefail
jobmanager='^src/controller/(job_manager\.(h|cc)|(job_state_machine|job_arrays|job_events)\.cc):'
if [ "${1:-}" = "--self-test" ]; then
  me=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/src/controller"
  printf 'void A() { r.set_state(v1::RUNNING); }\n' >"$tmp/src/controller/job_state_machine.cc"
  for plant in 'void B(JobRecord& r) { r.set_state(v1::FAILED); }' \
               'void B2(JobRecord& x) { x.set_state(v1::FAILED); }' \
               'void C(store::Mutation& m, const JobRecord& r) { m.PutJob(r); }' \
               'void C2(store::Mutation& m, uint64_t id) { m.DeleteJob(id); }' \
               'void C3(store::Mutation& m, const JobRecord& r) { m.ArchiveJob(r); }' \
               'void D(JobEntry& e) { e.rec_.set_nice(1); }' \
               'void E(const JobEntry& e) { const_cast<v1::JobRecord&>(e.rec()).set_nice(1); }'; do
    printf '%s\n' "$plant" >"$tmp/src/controller/step_manager.cc"
    if "$me" "$tmp" >/dev/null 2>&1; then
      echo "state writes check: a planted '$plant' passed" >&2
      exit 1
    fi
  done
  rm "$tmp/src/controller/step_manager.cc"
  "$me" "$tmp" >/dev/null || { echo "state writes check: the clean copy failed" >&2; exit 1; }
  echo "state writes check: planted writes refused"
  exit 0
fi
cd "${1:-$(cd "$(dirname "$0")/.." && pwd)}"
# Views copy states into replies (JobInfo, StepInfo): only there may `info`/`x` set one.
bad=$(grep -rn 'set_state(' src/controller |
      grep -v -e '^src/controller/job_state_machine.cc:' -e '^src/controller/step_state.cc:' |
      grep -vE '^src/controller/(job_views|node_views|job_explainer)\.cc:.*(\binfo\.|\binfo->|\bx\.)set_state\(' ||
      true)
if [ -n "$bad" ]; then
  echo "job and step states change only in job_state_machine.cc and step_state.cc:" >&2
  echo "$bad" >&2
  exit 1
fi
n=$(grep -c 'set_state(' src/controller/job_state_machine.cc)
if [ "$n" -ne 1 ]; then
  echo "job_state_machine.cc assigns a job's state in $n places; NextRecord should be the one" >&2
  exit 1
fi
bad=$(grep -rnE '\b(PutJob|DeleteJob|ArchiveJob)\(|\brec_\b|const_cast<[^>]*JobRecord' \
        src/controller src/rpc src/ha include/muster/controller 2>/dev/null |
      grep -vE "$jobmanager" | grep -vE '^src/controller/job_entry\.(h|cc):' |
      grep -vE '^src/store/' || true)
if [ -n "$bad" ]; then
  echo "only JobManager writes job records (StageChange/ApplyChange, Transition):" >&2
  echo "$bad" >&2
  exit 1
fi
echo "state writes: ok"
