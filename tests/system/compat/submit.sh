# sbatch/srun/salloc options through the compat links (sourced by local_cluster_stest.sh).
# sbatch -W: returns when the job has ended, with its exit code.
set +e
"$DIR/compat/sbatch" -W -o /dev/null --wrap 'exit 3' >/dev/null; rc=$?
set -e
[ $rc = 3 ] || fail "sbatch -W of a job exiting 3: $rc"
out=$("$DIR/compat/sbatch" -W -o /dev/null --wrap true)
grep -q "^Submitted batch job [0-9]*$" <<<"$out" || fail "sbatch -W printed: $out"
# --export-file: NUL-separated definitions, a value with a newline kept whole.
printf 'FROM_FILE=one two\0MULTI=a\nb\0' > export.env
"$DIR/compat/sbatch" -W -o export.out --export=NONE --export-file=export.env \
  --wrap 'printf "%s|%s|%s\n" "$FROM_FILE" "$MULTI" "${HOME:-unset}"' >/dev/null
[ "$(cat export.out)" = "$(printf 'one two|a\nb|unset')" ] || fail "--export-file: $(cat export.out)"
# -F/--nodefile and -w with a file; --use-min-nodes takes the range's minimum.
printf 'node3\n' > nodes.txt
id=$("$DIR/compat/sbatch" --parsable -W -o /dev/null -F nodes.txt --wrap true)
[ "$("$DIR/compat/sacct" -j "$id" -X -n -o NodeList%20 | tr -d ' ')" = node3 ] ||
  fail "--nodefile: $("$DIR/compat/sacct" -j "$id" -X -n -o NodeList%20)"
out=$("$DIR/compat/srun" --use-min-nodes -N 1-3 -w ./nodes.txt printenv SLURM_NNODES SLURMD_NODENAME)
[ "$out" = "$(printf '1\nnode3')" ] || fail "srun --use-min-nodes -w FILE: $out"
# -M names this cluster or none.
"$DIR/compat/srun" -M local,all true || fail "srun -M local"
set +e
out=$("$DIR/compat/sbatch" -M elsewhere --wrap true 2>&1); rc=$?
set -e
[ $rc = 1 ] && grep -q "no cluster 'elsewhere' (this is 'local'" <<<"$out" || fail "sbatch -M elsewhere: $rc $out"
# salloc --bell rings once granted.
"$DIR/compat/salloc" --bell -N1 true 2>salloc.err
grep -q $'^\asalloc: Granted job allocation [0-9]*$' salloc.err || fail "salloc --bell: $(od -c salloc.err | head -5)"
# Refusals say why.
set +e
out=$("$DIR/compat/sbatch" --bb=capacity=1G --wrap true 2>&1); rc=$?
set -e
[ $rc = 2 ] && grep -q "option --bb is not supported: Muster has no burst buffers" <<<"$out" ||
  fail "sbatch --bb: $rc $out"
# --signal without B: the steps hear it, the batch shell does not; with B: the shell alone.
steps=$("$DIR/compat/sbatch" --parsable -t 1 --signal=USR1@50 -o signal_steps.out --wrap \
  'trap "echo batch heard" USR1; srun sh -c "trap \"echo step heard; exit 0\" USR1; sleep 30 & wait"; echo end')
shell=$("$DIR/compat/sbatch" --parsable -t 1 --signal=B:USR1@50 -o signal_shell.out --wrap \
  'trap "echo batch heard; exit 0" USR1; sh -c "trap \"echo child heard\" USR1; sleep 30 & wait" & wait')
wait_for 30 grep -q "^end$" signal_steps.out
wait_for 30 grep -q "batch heard" signal_shell.out
[ "$(cat signal_steps.out)" = "$(printf 'step heard\nend')" ] || fail "--signal=USR1: $(cat signal_steps.out)"
# Once the job is gone from squeue (ended, its processes killed, its nodes clean), a child told
# too would have written so.
gone() { [ -z "$("$DIR/compat/squeue" -h -j "$1")" ]; }
wait_for 30 gone "$shell"
grep -q "child heard" signal_shell.out && fail "--signal=B:USR1 reached the shell's child: $(cat signal_shell.out)"
"$DIR/compat/scancel" "$steps" "$shell"
# --open-mode=append adds to a file; --input feeds the batch script; --mincpus holds the CPUs.
echo first > appended.out
"$DIR/compat/sbatch" -W --open-mode=append -o appended.out --wrap 'echo second' >/dev/null
[ "$(cat appended.out)" = "$(printf 'first\nsecond')" ] || fail "--open-mode=append: $(cat appended.out)"
printf 'line from a file\n' > batch.in
"$DIR/compat/sbatch" -W -i batch.in -o batch_in.out --wrap 'cat' >/dev/null
[ "$(cat batch_in.out)" = "line from a file" ] || fail "sbatch --input: $(cat batch_in.out)"
id=$("$DIR/compat/sbatch" --parsable -W --mincpus=3 -o /dev/null --wrap true)
[ "$("$DIR/compat/sacct" -j "$id" -X -n -o AllocCPUS | tr -d ' ')" = 3 ] ||
  fail "--mincpus=3: $("$DIR/compat/sacct" -j "$id" -X -n -o AllocCPUS)"
# --mem-per-cpu: per node, times the slot's CPUs; --priority: an administrator's fixed value.
id=$("$DIR/compat/sbatch" --parsable -H -c 2 --mem-per-cpu=100 --priority=777 --wrap true)
muster job show "$id" --json | grep -q '"mem_per_node_mb":200' ||
  fail "--mem-per-cpu: $(muster job show "$id" --json)"
[ "$("$DIR/compat/squeue" -h -j "$id" -o %Q)" = 777 ] || fail "--priority: $("$DIR/compat/squeue" -h -j "$id" -o %Q)"
"$DIR/compat/scancel" "$id"
# --gpus-per-task: each task its own GPUs, with srun's option or the job's (SLURM_GPUS_PER_TASK).
# Each line: the task, its GPUs, then the allocation's (SLURM_JOB_GPUS) to compare with.
out=$("$DIR/compat/srun" -N1 -n4 --gpus-per-task=2 sh -c 'echo $SLURM_PROCID $CUDA_VISIBLE_DEVICES $SLURM_JOB_GPUS' | sort)
want=$(awk 'NR==1 {split($3, g, ","); for (i = 0; i < 4; i++) print i, g[2*i+1] "," g[2*i+2]}' <<<"$out")
[ "$(awk '{print $1, $2}' <<<"$out")" = "$want" ] || fail "srun --gpus-per-task=2: $out"
out=$("$DIR/compat/srun" -N1 -n2 --gpus-per-node=2 --gpu-bind=map_gpu:1,0 sh -c 'echo $SLURM_PROCID $CUDA_VISIBLE_DEVICES $SLURM_JOB_GPUS' | sort)
want=$(awk 'NR==1 {split($3, g, ","); print 0, g[2]; print 1, g[1]}' <<<"$out")
[ "$(awk '{print $1, $2}' <<<"$out")" = "$want" ] || fail "srun --gpu-bind=map_gpu:1,0: $out"
"$DIR/compat/sbatch" -W -N1 -n2 --gpus-per-task=1 -o per_task.out \
  --wrap 'echo batch $SLURM_GPUS_PER_TASK $CUDA_VISIBLE_DEVICES; srun sh -c "echo task \$SLURM_PROCID \$CUDA_VISIBLE_DEVICES"' >/dev/null
batch=$(grep '^batch' per_task.out)
[ "$(awk '{print $2}' <<<"$batch")" = 1 ] || fail "SLURM_GPUS_PER_TASK in the batch script: $(cat per_task.out)"
gpus=$(awk '{print $3}' <<<"$batch")  # the job's two, e.g. 2,3
[ "$(grep '^task' per_task.out | sort | awk '{print $3}' | paste -sd,)" = "$gpus" ] ||
  fail "the job's --gpus-per-task in its steps: $(cat per_task.out)"
# scontrol suspend stops a running job in place; resume continues it.
id=$("$DIR/compat/sbatch" --parsable -o suspended.out --wrap 'for i in $(seq 300); do echo $i; sleep 0.2; done')
wait_for 30 test -s suspended.out
"$DIR/compat/scontrol" suspend "$id"
[ "$("$DIR/compat/squeue" -h -j "$id" -o %t)" = S ] || fail "suspended job: $("$DIR/compat/squeue" -h -j "$id" -o %t)"
# The node stops it when it hears: the job's shell and its sleep (found by their SLURM_JOB_ID)
# in state T.
job_stopped() {
  local p found=0
  for p in /proc/[0-9]*; do
    case "$(cat "$p/comm" 2>/dev/null)" in sh | sleep) ;; *) continue ;; esac
    tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "SLURM_JOB_ID=$1" || continue
    found=1
    [ "$(sed 's/.*) //' "$p/stat" 2>/dev/null | cut -d' ' -f1)" = T ] || return 1
  done
  [ $found = 1 ]
}
wait_for 10 job_stopped "$id"
lines=$(wc -l < suspended.out)
sleep 1  # the window in which a running job would have written 5 lines
[ "$(wc -l < suspended.out)" = "$lines" ] || fail "a suspended job went on writing"
"$DIR/compat/scontrol" resume "$id"
grew() { [ "$(wc -l < suspended.out)" -gt "$lines" ]; }
wait_for 10 grew
[ "$("$DIR/compat/squeue" -h -j "$id" -o %t)" = R ] || fail "resumed job: $("$DIR/compat/squeue" -h -j "$id" -o %t)"
"$DIR/compat/scancel" "$id"
# srun --prolog/--epilog: run where srun runs, just before and after the step, with the step's
# SLURM_* variables and its command as arguments; a prolog that fails stops srun, naming it, and
# nothing of the step runs (inside a job the step is withdrawn: the next one is not held up).
printf '#!/bin/sh\necho "$SLURM_SCRIPT_CONTEXT $SLURM_JOB_ID.$SLURM_STEP_ID $SLURM_STEP_NUM_TASKS $*" >> around.log\n' > around.sh
chmod +x around.sh
rm -f around.log
"$DIR/compat/srun" -n2 --prolog=./around.sh --epilog="$PWD/around.sh" sh -c 'echo task >> around.log' ||
  fail "srun --prolog/--epilog: $(cat around.log)"
first=$(head -1 around.log) last=$(tail -1 around.log)
grep -qE '^prolog_srun [0-9]+\.[0-9]+ 2 sh -c echo task >> around.log$' <<<"$first" &&
  [ "$(grep -c '^task$' around.log)" = 2 ] && [ "$(wc -l < around.log)" = 4 ] &&
  [ "${last#epilog_srun }" = "${first#prolog_srun }" ] || fail "srun --prolog/--epilog: $(cat around.log)"
set +e
out=$("$DIR/compat/srun" --prolog=/bin/false sh -c 'echo ran > prolog_ran.out' 2>&1); rc=$?
set -e
[ $rc != 0 ] && grep -q -- "--prolog /bin/false failed with exit code 1" <<<"$out" || fail "srun --prolog=/bin/false: $rc $out"
[ ! -e prolog_ran.out ] || fail "a step ran after its prolog failed"
id=$("$DIR/compat/sbatch" --parsable -W -t 1 -N1 -n2 -o prolog_job.out \
  --wrap 'srun --prolog=/bin/false true; echo "rc $?"; srun true && echo next step ran')
[ "$(grep -c '^rc [1-9]\|^next step ran$' prolog_job.out)" = 2 ] || fail "a failed prolog inside a job: $(cat prolog_job.out)"
"$DIR/compat/sacct" -j "$id" -n -o JobID%12,State | grep -qE "^ *$id\.0 +CANCELLED" ||
  fail "a withdrawn step: $("$DIR/compat/sacct" -j "$id" -n -o JobID,State)"
# srun -W SECS: once the first task has ended, the others get SECS, then the step is killed.
start=$(date +%s)
set +e
"$DIR/compat/srun" -n2 -W 2 sh -c '[ "$SLURM_PROCID" = 0 ] || sleep 60' 2>srun_wait.err; rc=$?
set -e
took=$(( $(date +%s) - start ))
[ $rc = 137 ] && [ $took -lt 30 ] && grep -q "first task exited 2s ago" srun_wait.err ||
  fail "srun -W 2: rc $rc after ${took}s: $(cat srun_wait.err)"
# srun --quit-on-interrupt: one Ctrl-C ends the step (the task ignores SIGINT).
"$DIR/compat/srun" --quit-on-interrupt -n1 sh -c 'trap "" INT; echo ready; sleep 60' >quit.out 2>quit.err &
quit_pid=$!
wait_for 30 grep -q ready quit.out
kill -INT "$quit_pid"
srun_gone() { ! kill -0 "$quit_pid" 2>/dev/null; }
wait_for 10 srun_gone
set +e
wait "$quit_pid"; rc=$?
set -e
[ $rc = 137 ] && grep -q "forcing job step" quit.err || fail "srun --quit-on-interrupt: rc $rc $(cat quit.err)"
# srun --open-mode=append adds to the step's -o file; by default it is emptied.
echo first > step_append.out
"$DIR/compat/srun" -n1 --open-mode=append -o step_append.out echo second
[ "$(cat step_append.out)" = "$(printf 'first\nsecond')" ] || fail "srun --open-mode=append: $(cat step_append.out)"
"$DIR/compat/srun" -n1 -o step_append.out echo third
[ "$(cat step_append.out)" = third ] || fail "srun -o (truncate): $(cat step_append.out)"
# srun --test-only: the allocation's start forecast, nothing run; inside a job refused.
out=$("$DIR/compat/srun" --test-only -N2 sh -c 'echo ran > test_only_ran.out' 2>&1) || fail "srun --test-only: $out"
grep -qE "^srun: Job [0-9]+ to start at [0-9T:-]+ using [0-9]+ processors on nodes node.* in partition [^ ]+$" <<<"$out" ||
  fail "srun --test-only: $out"
[ ! -e test_only_ran.out ] || fail "srun --test-only ran the command"
"$DIR/compat/sbatch" -W -o test_only_step.out --wrap 'srun --test-only true; echo "rc $?"' >/dev/null
grep -q "option --test-only applies to a new allocation" test_only_step.out && grep -q "^rc [1-9]" test_only_step.out ||
  fail "srun --test-only in a job: $(cat test_only_step.out)"
# srun/salloc --priority (an administrator's): the allocation's priority.
out=$("$DIR/compat/salloc" --priority=555 -N1 sh -c "\"$DIR/compat/squeue\" -h -j \$SLURM_JOB_ID -o %Q" 2>/dev/null)
[ "$out" = 555 ] || fail "salloc --priority=555: $out"
out=$("$DIR/compat/srun" --priority=556 -N1 sh -c "\"$DIR/compat/squeue\" -h -j \$SLURM_JOB_ID -o %Q")
[ "$out" = 556 ] || fail "srun --priority=556: $out"
# srun -r N: the step starts at the job's N-th node.
"$DIR/compat/sbatch" -W -N3 -o relative.out --wrap \
  'muster run -r 1 -N1 printenv SLURMD_NODENAME; muster control show hostnames "$SLURM_JOB_NODELIST" | sed -n 2p' >/dev/null
[ "$(sed -n 1p relative.out)" = "$(sed -n 2p relative.out)" ] && [ -n "$(sed -n 1p relative.out)" ] ||
  fail "srun -r 1: $(cat relative.out)"
# squeue -u takes a numeric uid, as Slurm's.
id=$("$DIR/compat/sbatch" --parsable -H -o /dev/null --wrap true)
"$DIR/compat/squeue" -h -u "$(id -u)" -o %i | grep -qx "$id" || fail "squeue -u UID: $("$DIR/compat/squeue" -h -u "$(id -u)" -o %i)"
"$DIR/compat/scancel" "$id"
# -B and --ntasks-per-core choose nodes by the CPU topology their agents reported through hwloc
# (this machine's: every node of the local cluster runs on it); the job sees
# SLURM_NTASKS_PER_CORE. More sockets than any node has can never run.
sockets=$(muster nodes --json |
  python3 -c 'import json, sys; print(min(n["packages"] for n in json.load(sys.stdin)["nodes"]))')
if [ "$sockets" -gt 0 ]; then
  out=$("$DIR/compat/srun" -B "$sockets:1:1" --ntasks-per-core=1 printenv SLURM_NTASKS_PER_CORE)
  [ "$out" = 1 ] || fail "srun -B $sockets:1:1 --ntasks-per-core=1: $out"
  "$DIR/compat/srun" --hint=nomultithread true || fail "srun --hint=nomultithread"
  set +e
  out=$("$DIR/compat/sbatch" -B $((sockets + 1)) --wrap true 2>&1); rc=$?
  set -e
  [ $rc = 1 ] && grep -q "at least $((sockets + 1)) sockets; 0 of" <<<"$out" ||
    fail "sbatch -B $((sockets + 1)): $rc $out"
else
  echo "no hwloc topology from the agents: -B checks skipped"
fi
"$DIR/compat/sbatch" --hint=help | grep -q '^  nomultithread' || fail "sbatch --hint=help"
# -S/--core-spec, --thread-spec: the node sets aside its highest-numbered core (of its highest
# socket), every thread of it; the batch script and the steps' tasks never run there, as the
# kernel says from inside them. (The nodes run on this machine, so it is this machine's core.)
cores=$(muster nodes --json |
  python3 -c 'import json, sys; print(min(n["cores"] for n in json.load(sys.stdin)["nodes"]))')
if [ "$cores" -gt 1 ]; then
  # What this machine sets aside (a core; a thread: that core's highest), and what is left of what
  # this test may run on, by sysfs.
  read -r aside left thread_left < <(python3 - <<'PY'
import os
def cpus(text):
    out = set()
    for part in text.strip().split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out
base = "/sys/devices/system/cpu/"
core_of = {}
for c in cpus(open(base + "online").read()):
    t = base + "cpu%d/topology/" % c
    sock = int(open(t + "physical_package_id").read()) if os.path.exists(t + "physical_package_id") else 0
    sib = t + ("core_cpus_list" if os.path.exists(t + "core_cpus_list") else "thread_siblings_list")
    core_of[c] = (sock, min(cpus(open(sib).read())) if os.path.exists(sib) else c)
top = max(core_of.values())
aside = sorted(c for c, k in core_of.items() if k == top)
mine = os.sched_getaffinity(0)
left = sorted(mine - set(aside))
thread_left = sorted(mine - {max(aside)})
print(",".join(map(str, aside)), ",".join(map(str, left)), ",".join(map(str, thread_left)))
PY
)
  as_list() { python3 -c 'import sys
out = set()
for part in sys.argv[1].split(","):
    lo, _, hi = part.partition("-"); out.update(range(int(lo), int(hi or lo) + 1))
print(",".join(map(str, sorted(out))))' "$1"; }
  "$DIR/compat/sbatch" -W -S 1 -o core_spec.out --wrap \
    'grep Cpus_allowed_list /proc/self/status | cut -f2; srun -n1 grep Cpus_allowed_list /proc/self/status | cut -f2' >/dev/null
  [ "$(wc -l < core_spec.out)" = 2 ] || fail "sbatch -S 1: $(cat core_spec.out)"
  while read -r line; do
    [ "$(as_list "$line")" = "$left" ] || fail "sbatch -S 1: runs on $line; expected $left (set aside: $aside)"
  done < core_spec.out
  id=$("$DIR/compat/sbatch" --parsable -W -S 1 -o /dev/null --wrap true)
  [ "$("$DIR/compat/sacct" -j "$id" -X -n -o AllocCPUS | tr -d ' ')" = 16 ] ||
    fail "sbatch -S 1 holds the whole node: $("$DIR/compat/sacct" -j "$id" -X -n -o AllocCPUS)"
  out=$("$DIR/compat/srun" -N1 --thread-spec=1 grep Cpus_allowed_list /proc/self/status | cut -f2)
  [ "$(as_list "$out")" = "$thread_left" ] ||
    fail "srun --thread-spec=1: runs on $out; expected $thread_left"
  # More cores than a node has can never run; inside a job it is an allocation's option.
  set +e
  out=$("$DIR/compat/sbatch" -S "$cores" --wrap true 2>&1); rc=$?
  set -e
  [ $rc = 1 ] && grep -q "1 CPUs besides the $cores cores set aside (--core-spec=$cores); 0 of" <<<"$out" ||
    fail "sbatch -S $cores: $rc $out"
  "$DIR/compat/sbatch" -W -o core_spec_step.out --wrap 'srun -S 1 true; echo "rc $?"' >/dev/null
  grep -q "option -S/--core-spec applies to a new allocation" core_spec_step.out &&
    grep -q "^rc [1-9]" core_spec_step.out || fail "srun -S 1 in a job: $(cat core_spec_step.out)"
else
  echo "one core (or no topology) on the agents: --core-spec checks skipped"
fi
# srun --cpu-bind: each task runs on its own CPUs of the job's, as /proc says from inside it, with
# Slurm's SLURM_CPU_BIND* variables; verbose reports the binding on the task's stderr first. (A
# whole node, so that CPUs 0 and 1 are the job's; the node's other CPUs may not exist here.)
out=$("$DIR/compat/srun" -N1 -n2 --exclusive --cpu-bind=verbose,map_cpu:1,0 sh -c \
  'echo $SLURM_PROCID $(grep Cpus_allowed_list /proc/self/status | cut -f2) $SLURM_CPU_BIND_TYPE $SLURM_CPU_BIND_LIST' \
  2>cpu_bind.err | sort)
[ "$out" = "$(printf '0 1 map_cpu: 1,0\n1 0 map_cpu: 1,0')" ] || fail "srun --cpu-bind=map_cpu:1,0: $out $(cat cpu_bind.err)"
grep -qE '^cpu-bind=MAP  - node[0-9]+, task  0  0 \[[0-9]+\]: mask 0x2 set$' cpu_bind.err &&
  grep -qE '^cpu-bind=MAP  - node[0-9]+, task  1  1 \[[0-9]+\]: mask 0x1 set$' cpu_bind.err ||
  fail "srun --cpu-bind=verbose: $(cat cpu_bind.err)"
# An automatic binding (SLURM_CPU_BIND, srun's input variable): one thread each, not the same.
out=$(SLURM_CPU_BIND=threads "$DIR/compat/srun" -N1 -n2 --exclusive sh -c \
  'echo $(grep Cpus_allowed_list /proc/self/status | cut -f2) $SLURM_CPU_BIND_TYPE' | sort -u)
[ "$(wc -l <<<"$out")" = 2 ] && ! grep -qv '^[0-9]* mask_cpu:$' <<<"$out" ||
  fail "SLURM_CPU_BIND=threads: $out"
# A CPU the job does not hold is refused, naming it, and nothing runs.
set +e
out=$("$DIR/compat/srun" -N1 -n1 --cpu-bind=map_cpu:15 sh -c 'echo ran > cpu_bind_ran.out' 2>&1); rc=$?
set -e
[ $rc != 0 ] && grep -q "names CPU 15, which the step does not hold on this node" <<<"$out" &&
  [ ! -e cpu_bind_ran.out ] || fail "srun --cpu-bind=map_cpu:15 (not the job's): $rc $out"
# srun --multi-prog: each rank runs its line's program, %t its rank and %o its offset there.
printf '# rank 0 leads\n0 echo first %%t\n1-2 sh -c "echo rest %%t %%o"\n' > multi.conf
out=$("$DIR/compat/srun" -n3 -l --multi-prog multi.conf | sort)
[ "$out" = "$(printf '0: first 0\n1: rest 1 0\n2: rest 2 1')" ] || fail "srun --multi-prog: $out"
# What follows the file on the command line is added to every rank's arguments.
out=$("$DIR/compat/srun" -n3 -l --multi-prog multi.conf extra | sort | head -1)
[ "$out" = "0: first 0 extra" ] || fail "srun --multi-prog FILE ARGS: $out"
set +e
printf '0 true\n' > short.conf
out=$("$DIR/compat/srun" -n2 --multi-prog short.conf 2>&1); rc=$?
set -e
[ $rc != 0 ] && grep -q "short.conf: no executable program specified for task 1" <<<"$out" ||
  fail "srun --multi-prog with a rank no line names: $rc $out"
# srun --task-prolog/--task-epilog: around each task, as its user, in its environment; the
# prolog's export/unset/print lines shape the task.
cat > task_prolog.sh <<'EOF'
#!/bin/sh
echo "export FROM_PROLOG=hello $SLURM_PROCID"
echo "unset DROP_ME"
echo "print prolog of $SLURM_PROCID as $(id -u)"
EOF
printf '#!/bin/sh\necho "epilog $SLURM_PROCID $FROM_PROLOG" >> task_epilog.log\n' > task_epilog.sh
chmod +x task_prolog.sh task_epilog.sh
rm -f task_epilog.log
out=$(DROP_ME=1 "$DIR/compat/srun" -n2 --task-prolog=./task_prolog.sh --task-epilog="$PWD/task_epilog.sh" \
  sh -c 'echo "task $SLURM_PROCID $FROM_PROLOG ${DROP_ME:-gone}"' | sort)
me=$(id -u)
[ "$out" = "$(printf 'prolog of 0 as %s\nprolog of 1 as %s\ntask 0 hello 0 gone\ntask 1 hello 1 gone' "$me" "$me")" ] ||
  fail "srun --task-prolog: $out"
[ "$(sort task_epilog.log)" = "$(printf 'epilog 0 hello 0\nepilog 1 hello 1')" ] ||
  fail "srun --task-epilog: $(cat task_epilog.log)"
out=$(SLURM_TASK_PROLOG=./task_prolog.sh "$DIR/compat/srun" -n1 printenv FROM_PROLOG | tail -1)
[ "$out" = "hello 0" ] || fail "SLURM_TASK_PROLOG: $out"
set +e
out=$("$DIR/compat/srun" -n1 --task-prolog=/bin/false sh -c 'echo ran > task_prolog_ran.out' 2>&1); rc=$?
set -e
[ $rc = 1 ] && grep -q -- "--task-prolog /bin/false failed with exit code 1; the task was not started" <<<"$out" &&
  [ ! -e task_prolog_ran.out ] || fail "srun --task-prolog=/bin/false: $rc $out"
# sbatch's input variables: over the script's #SBATCH lines, under the command line; a flag
# (SBATCH_NO_REQUEUE=1) too. muster submit does not read them; salloc reads its SALLOC_* ones.
printf '#!/bin/sh\n#SBATCH -J fromscript -t 5 -A scriptacct\ntrue\n' > input_env.sh
id=$(SBATCH_JOB_NAME=fromenv SBATCH_ACCOUNT=envacct SBATCH_TIMELIMIT=7 SBATCH_PARTITION=gpu \
  SBATCH_NO_REQUEUE=1 "$DIR/compat/sbatch" --parsable -H -t 9 -o /dev/null input_env.sh)
job=$("$DIR/compat/scontrol" show job "$id")
grep -q "^JobId=$id JobName=fromenv$" <<<"$job" && grep -q " Account=envacct " <<<"$job" &&
  grep -q " TimeLimit=9:00 " <<<"$job" && grep -q "^   Partition=gpu$" <<<"$job" &&
  grep -q "^   Requeue=0 " <<<"$job" || fail "SBATCH_* variables: $job"
"$DIR/compat/scancel" "$id"
set +e
out=$(SBATCH_PARTITION=nosuch "$DIR/compat/sbatch" -o /dev/null --wrap true 2>&1); rc=$?
set -e
[ $rc = 1 ] && grep -q "partition 'nosuch' does not exist" <<<"$out" || fail "SBATCH_PARTITION=nosuch: $rc $out"
set +e
out=$(SBATCH_CONTAINER=/images/x "$DIR/compat/sbatch" --wrap true 2>&1); rc=$?
set -e
[ $rc = 2 ] && grep -q "^sbatch: error: SBATCH_CONTAINER: option --container is not supported" <<<"$out" ||
  fail "SBATCH_CONTAINER: $rc $out"
id=$(SBATCH_PARTITION=nosuch SBATCH_JOB_NAME=fromenv muster submit --parsable -H -o /dev/null --wrap true)
"$DIR/compat/scontrol" show job "$id" | grep -q "^JobId=$id JobName=wrap$" ||
  fail "muster submit read SBATCH_*: $("$DIR/compat/scontrol" show job "$id")"
"$DIR/compat/scancel" "$id"
out=$(SALLOC_TIMELIMIT=3 SBATCH_TIMELIMIT=8 "$DIR/compat/salloc" -N1 sh -c \
  "\"$DIR/compat/squeue\" -h -j \$SLURM_JOB_ID -o %l" 2>/dev/null)
[ "$out" = "3:00" ] || fail "SALLOC_TIMELIMIT: $out"
