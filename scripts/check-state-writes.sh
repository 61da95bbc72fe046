#!/usr/bin/env bash
# A job's state is assigned in one function, JobManager::NextRecord (job_state_machine.cc), and a
# step's in step_state.cc; views only copy states into replies (info.set_state, x.set_state).
# Fails when anything else under src/controller assigns a state. Run from the repository root.
set -euo pipefail
bad=$(grep -rn 'set_state(' src/controller |
      grep -v -e '^src/controller/job_state_machine.cc:' -e '^src/controller/step_state.cc:' |
      grep -vE '(\binfo\.|\binfo->|\bx\.)set_state\(' || true)
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
echo "state writes: ok"
