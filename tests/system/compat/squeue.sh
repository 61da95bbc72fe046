# squeue, sprio and sshare options through the compat links (sourced by local_cluster_stest.sh).
sq="$DIR/compat/squeue"
# Two held jobs (one asking for 1 GiB per node) and a running one with a step.
sq_a=$("$DIR/compat/sbatch" --parsable -H -J sq-a --mem=1024 -o /dev/null --wrap true)
sq_b=$("$DIR/compat/sbatch" --parsable -H -J sq-b -o /dev/null --wrap true)
sq_run=$("$DIR/compat/sbatch" --parsable -J sq-run -N1 -o /dev/null --wrap 'srun -n1 sleep 300')
sq_step() { "$sq" -h -s -j "$sq_run" -o %i | grep -qx "$sq_run.0"; }
wait_for 30 sq_step
sq_ids() { "$sq" -h -o %i "$@" | tr '\n' ' ' | sed 's/ $//'; }
sq_expect() {  # sq_expect WANT ARGS...
  local want=$1; shift
  [ "$(sq_ids "$@")" = "$want" ] || fail "squeue $*: [$(sq_ids "$@")], want [$want]"
}
# Filters the controller does not apply: names (any case), accounts, QoS, reservations,
# licenses, nodes.
sq_expect "$sq_a $sq_b" -n sq-a,SQ-B
sq_expect "" -n sq-a -A nosuch
sq_expect "$sq_a" -n sq-a -q NORMAL
sq_expect "" -n sq-a -q nosuch
sq_expect "" -n sq-a -R nosuch
sq_expect "" -n sq-a,sq-b,sq-run -L lic
sq_node=$("$sq" -h -j "$sq_run" -o %N)
sq_expect "$sq_run" -n sq-a,sq-run -w "$sq_node"
[ "$sq_node" = node4 ] && sq_other=node3 || sq_other=node4
sq_expect "" -n sq-a,sq-run --nodelist="$sq_other"
# -S: squeue's keys, '-' descending.
sq_expect "$sq_b $sq_a" -n sq-a,sq-b -S -i
sq_expect "$sq_a $sq_b $sq_run" -n sq-a,sq-b,sq-run -S t,i
sq_expect "$sq_run $sq_b $sq_a" -n sq-a,sq-b,sq-run --sort=-t,-i
set +e
err=$("$sq" -S K 2>&1); rc=$?
set -e
[ $rc = 2 ] && grep -q "invalid sort key 'K'" <<<"$err" || fail "squeue -S K: rc=$rc $err"
# Letters and field names the listing carries: memory as squeue converts it, or not.
[ "$("$sq" -h -j "$sq_a" -o '%i|%m|%c|%L|%E|%f|%B')" = "$sq_a|1G|1|UNLIMITED||(null)|n/a" ] ||
  fail "squeue -o: $("$sq" -h -j "$sq_a" -o '%i|%m|%c|%L|%E|%f|%B')"
[ "$("$sq" -h -j "$sq_a" -o %m --noconvert)" = 1024M ] || fail "squeue --noconvert"
[ "$("$sq" -h -j "$sq_run" -O 'JobID:.8|,BatchHost:6,MinMemory:4,NumTasks:2')" = \
  "$(printf '%8s|' "$sq_run")$(printf '%-6s' "$sq_node")0   1 " ] ||
  fail "squeue -O: $("$sq" -h -j "$sq_run" -O 'JobID:.8|,BatchHost:6,MinMemory:4,NumTasks:2')"
[ "$("$sq" -j "$sq_a" -o %all | head -1 | cut -d'|' -f1-3)" = "ACCOUNT|TRES_PER_NODE|MIN_CPUS" ] ||
  fail "squeue -o %all"
set +e
err=$("$sq" -o '%i %k' 2>&1); rc=$?
set -e
[ $rc = 2 ] && grep -q "format field %k is not supported" <<<"$err" || fail "squeue %k: $err"
# -s/--steps: the running steps and the batch script, in squeue's step columns.
[ "$("$sq" -s -j "$sq_run" | head -1)" = "         STEPID     NAME PARTITION     USER      TIME NODELIST" ] ||
  fail "squeue -s header: $("$sq" -s -j "$sq_run")"
[ "$("$sq" -h -s -j "$sq_run" -o '%i %j %N' | tr '\n' ' ')" = \
  "$sq_run.0 sleep $sq_node $sq_run.batch batch $sq_node " ] ||
  fail "squeue -s: $("$sq" -h -s -j "$sq_run" -o '%i %j %N')"
[ "$("$sq" -h --steps="$sq_run.batch" -o %i)" = "$sq_run.batch" ] || fail "squeue --steps=ID.batch"
# --start: pending jobs only, in squeue's --start columns.
[ "$("$sq" --start -n sq-a,sq-run | head -1 | awk '{print $6, $8}')" = "START_TIME SCHEDNODES" ] ||
  fail "squeue --start header: $("$sq" --start -n sq-a,sq-run)"
sq_expect "$sq_a" --start -n sq-a,sq-run
# -P is squeue's listing (not the sprio view), --array-unique one row per task, -M this cluster.
[ "$("$sq" -P -j "$sq_a" | head -1)" = "$("$sq" -j "$sq_a" | head -1)" ] || fail "squeue -P"
sq_arr=$("$DIR/compat/sbatch" --parsable -H -J sq-arr -a 1-3 -o /dev/null --wrap true)
sq_expect "${sq_arr}_[1-3]" -j "$sq_arr"
sq_expect "${sq_arr}_1 ${sq_arr}_2 ${sq_arr}_3" -j "$sq_arr" --array-unique
[[ "$("$sq" -M all -j "$sq_a" | head -1)" == "CLUSTER: "* ]] || fail "squeue -M all"
sq_expect "$sq_a" -M all -j "$sq_a"
set +e
err=$("$sq" -M nosuch 2>&1); rc=$?
set -e
[ $rc != 0 ] && grep -q "no cluster 'nosuch'" <<<"$err" || fail "squeue -M nosuch: $err"
"$sq" --yaml -j "$sq_a" | python3 -c 'import json, sys; assert json.load(sys.stdin)["jobs"]' ||
  fail "squeue --yaml"
[[ "$("$sq" -v -j "$sq_a" | head -1)" =~ ^[A-Z][a-z]{2}\ [A-Z][a-z]{2}\  ]] || fail "squeue -v"
# -i: the listing again after a blank line, under its time; SIGTERM ends it with exit 0.
"$sq" -i 1 -j "$sq_a" >sq-iterate.out 2>&1 &
sq_pid=$!
sq_twice() { [ "$(grep -c '^ *JOBID' sq-iterate.out)" -ge 2 ]; }
wait_for 10 sq_twice
kill -TERM "$sq_pid"
set +e
wait "$sq_pid"; rc=$?
set -e
[ $rc = 0 ] || fail "squeue -i ended with $rc"
[[ "$(sed -n 4,5p sq-iterate.out | head -1)" == "" ]] &&
  [[ "$(sed -n 5p sq-iterate.out)" =~ ^[A-Z][a-z]{2}\  ]] || fail "squeue -i: $(cat sq-iterate.out)"

# sprio: its -o letters and -S order.
[ "$("$DIR/compat/sprio" -j "$sq_a,$sq_b" -o '%i %Y %a' | head -1)" = "JOBID PRIORITY AGE" ] ||
  fail "sprio -o: $("$DIR/compat/sprio" -j "$sq_a,$sq_b" -o '%i %Y %a')"
[ "$("$DIR/compat/sprio" -h -j "$sq_a,$sq_b" -o %i -S -i | tr '\n' ' ')" = "$sq_b $sq_a " ] ||
  fail "sprio -S -i: $("$DIR/compat/sprio" -h -j "$sq_a,$sq_b" -o %i -S -i)"
"$DIR/compat/sprio" -M all -j "$sq_a" >/dev/null || fail "sprio -M all"

# sshare (no account exists yet): its field names, -p's trailing bar, -e.
[ "$("$DIR/compat/sshare" -p -o Account,User%12 | head -1)" = "Account|User|" ] || fail "sshare -p"
[ "$("$DIR/compat/sshare" -P -o A,Eff,Cl | head -1)" = "Account|EffectvUsage|Cluster" ] ||
  fail "sshare -o by the start of names: $("$DIR/compat/sshare" -P -o A,Eff,Cl)"
"$DIR/compat/sshare" -m | head -1 | grep -q " Partition " || fail "sshare -m"
"$DIR/compat/sshare" -e | grep -q "^Account  *Cluster " || fail "sshare -e"
set +e
err=$("$DIR/compat/sshare" -o NormUsage 2>&1); rc=$?
set -e
[ $rc = 2 ] && grep -q "NormUsage" <<<"$err" || fail "sshare -o NormUsage: $err"

"$DIR/compat/scancel" "$sq_a" "$sq_b" "$sq_run" "$sq_arr"
sq_gone() { [ -z "$("$sq" -h -n sq-a,sq-b,sq-run,sq-arr)" ]; }
wait_for 30 sq_gone
