# sacct options through the compat link (sourced by local_cluster_stest.sh).
sa_sacct="$DIR/compat/sacct"
# A finished 2-node job whose step failed with 3 (the job itself exits 0), and a held one.
sa_done=$("$DIR/compat/sbatch" --parsable -J sacct-done -N2 -t 5 --mem=1G -o /dev/null \
  --wrap 'srun -N2 sh -c "exit 3"; sleep 3; exit 0')
sa_held=$("$DIR/compat/sbatch" --parsable -J sacct-held -H -o /dev/null --wrap true)
sa_finished() { [ "$("$sa_sacct" -j "$sa_done" -X -n -P -o State)" = COMPLETED ]; }
wait_for 60 sa_finished
# sa_ids ARGS...: the ids of the jobs named sacct-* that ARGS select, one line.
sa_ids() { "$sa_sacct" -X -n -P -o JobID "$@" | tr '\n' ' ' | sed 's/ $//'; }
sa_expect() {  # sa_expect WANT ARGS...
  local want=$1; shift
  [ "$(sa_ids "$@")" = "$want" ] || fail "sacct $*: [$(sa_ids "$@")], want [$want]"
}
# Selections the controller does not make: --name, -A, -q, -R, -N, -i, -I, -k/-K, -g, -u UID, -W.
sa_expect "$sa_done" --name=sacct-done
sa_expect "$sa_held" --name=sacct-held,nosuch
sa_expect "" --name=sacct-done -A nosuch
sa_qos=$("$sa_sacct" -j "$sa_done" -X -n -P -o QOS)
[ -n "$sa_qos" ] || fail "sacct QOS is empty"
sa_expect "$sa_done" --name=sacct-done -q "$sa_qos"
sa_expect "" --name=sacct-done -q nosuch
sa_expect "$sa_held" --name=sacct-done,sacct-held -R JobHeldUser
sa_nl=$("$sa_sacct" -j "$sa_done" -X -n -P -o NodeList)
for sa_elsewhere in node1 node2 node3 node4; do
  "$DIR/compat/scontrol" show hostnames "$sa_nl" | grep -qx "$sa_elsewhere" || break
done
sa_expect "$sa_done" --name=sacct-done -N "$sa_nl"
sa_expect "" --name=sacct-done -N "$sa_elsewhere"
sa_expect "$sa_done" --name=sacct-done -i 2
sa_expect "$sa_done" --name=sacct-done --nnodes=1-4
sa_expect "" --name=sacct-done -i 1
sa_cpus=$("$sa_sacct" -j "$sa_done" -X -n -P -o AllocCPUS)
sa_expect "$sa_done" --name=sacct-done -I "$sa_cpus"
sa_expect "" --name=sacct-done --ncpus="$((sa_cpus + 1))-9999"
sa_expect "$sa_done" --name=sacct-done -k 5
sa_expect "" --name=sacct-done -k 6
sa_expect "$sa_done" --name=sacct-done -k 1 -K 0:10:00
sa_expect "" --name=sacct-done --timelimit-min=6 --timelimit-max=10
sa_expect "$sa_done" --name=sacct-done -K 1  # ignored alone, as sacct
sa_expect "$sa_done" --name=sacct-done -g "$(id -g)"
sa_expect "$sa_done" --name=sacct-done --group="$(id -gn)"
sa_other_gid=$([ "$(id -g)" = 65534 ] && echo 0 || echo 65534)
sa_expect "" --name=sacct-done -g "$sa_other_gid"
sa_expect "$sa_done" --name=sacct-done -u "$(id -u)"
sa_expect "" -j "$sa_done" -W anykey
# Fields: Slurm's names and prefixes, %-W, blank usage fields, refused ones by name.
[ "$("$sa_sacct" -j "$sa_done" -X -n -P -o ExitCode,DerivedExitCode,TimelimitRaw,GID,Group,UID,Cluster)" = \
  "0:0|3:0|5|$(id -g)|$(id -gn)|$(id -u)|local" ] ||
  fail "sacct fields: $("$sa_sacct" -j "$sa_done" -X -n -P -o ExitCode,DerivedExitCode,TimelimitRaw,GID,Group,UID,Cluster)"
[ "$("$sa_sacct" -j "$sa_done" -X -n -o jobid%-10,stat%-10,exit)" = "$(printf '%-10s %-10s %8s ' "$sa_done" COMPLETED 0:0)" ] ||
  fail "sacct -o prefixes and %-W: [$("$sa_sacct" -j "$sa_done" -X -n -o jobid%-10,stat%-10,exit)]"
[ "$("$sa_sacct" -j "$sa_done" -X -n -P -o MaxRSS,AveCPU,TRESUsageInTot,JobID)" = "|||$sa_done" ] ||
  fail "sacct usage fields: $("$sa_sacct" -j "$sa_done" -X -n -P -o MaxRSS,AveCPU,TRESUsageInTot,JobID)"
read -r sa_raw sa_elapsed sa_alloc <<<"$("$sa_sacct" -j "$sa_done" -X -n -P -o CPUTimeRAW,ElapsedRaw,AllocCPUS | tr '|' ' ')"
[ "$sa_raw" = "$((sa_elapsed * sa_alloc))" ] || fail "sacct CPUTimeRAW $sa_raw != $sa_elapsed x $sa_alloc"
[ "$("$sa_sacct" -j "$sa_done" -X -n -P -o ReqMem)" = 2G ] || fail "sacct ReqMem: $("$sa_sacct" -j "$sa_done" -X -n -P -o ReqMem)"
[ "$("$sa_sacct" -j "$sa_done" -X -n -P -o ReqMem --noconvert)" = 2048M ] || fail "sacct --noconvert"
[ "$("$sa_sacct" -j "$sa_done" -X -n -P -o ReqMem --units=K)" = 2097152K ] || fail "sacct --units=K"
"$sa_sacct" -j "$sa_done" -X -n -P -o AllocTRES | grep -q "mem=2G,node=2$" ||
  fail "sacct AllocTRES: $("$sa_sacct" -j "$sa_done" -X -n -P -o AllocTRES)"
set +e
out=$("$sa_sacct" -j "$sa_done" -o JobID,Eligible 2>&1); rc=$?
set -e
[ $rc = 2 ] && grep -q "'Eligible' is not available: when a job became eligible" <<<"$out" ||
  fail "sacct -o Eligible: $rc $out"
"$sa_sacct" -e | grep -q "MaxRSS" || fail "sacct -e: $("$sa_sacct" -e)"
# Output forms: -b, -l, --delimiter, SACCT_FORMAT, --yaml.
[ "$("$sa_sacct" -b -j "$sa_done" -X | head -1 | awk '{print $1, $2, $3, NF}')" = "JobID State ExitCode 3" ] ||
  fail "sacct -b: $("$sa_sacct" -b -j "$sa_done" -X)"
sa_hdr=$("$sa_sacct" -l -P -j "$sa_done" | head -1)
[ "$(tr '|' '\n' <<<"$sa_hdr" | wc -l)" = 54 ] && [[ "$sa_hdr" == JobID\|JobIDRaw\|JobName\|Partition\|MaxVMSize\|* ]] ||
  fail "sacct -l: $sa_hdr"
[ "$("$sa_sacct" -j "$sa_done" -X -n -p --delimiter=: -o JobID,State)" = "$sa_done:COMPLETED:" ] ||
  fail "sacct --delimiter: $("$sa_sacct" -j "$sa_done" -X -n -p --delimiter=: -o JobID,State)"
[ "$(SACCT_FORMAT=JobID,JobName "$sa_sacct" -j "$sa_done" -X -n -P)" = "$sa_done|sacct-done" ] ||
  fail "SACCT_FORMAT: $(SACCT_FORMAT=JobID,JobName "$sa_sacct" -j "$sa_done" -X -n -P)"
"$sa_sacct" --yaml -j "$sa_done" | python3 -c 'import sys, yaml; d = yaml.safe_load(sys.stdin); assert d["jobs"][0]["job_id"] == int(sys.argv[1]), d' "$sa_done" ||
  fail "sacct --yaml"
# -T: start and end (and so Elapsed) cut to the -S/-E window; the job ran over 3 seconds.
sa_st=$("$sa_sacct" -j "$sa_done" -X -n -P -o Start)
sa_at() { date -d "@$(( $(date -d "$sa_st" +%s) + $1 ))" +%Y-%m-%dT%H:%M:%S; }
[ "$("$sa_sacct" -T -S "$(sa_at 1)" -E "$(sa_at 2)" -j "$sa_done" -X -n -P -o Start,End,Elapsed)" = \
  "$(sa_at 1)|$(sa_at 2)|00:00:01" ] &&
  [ "$("$sa_sacct" -S "$(sa_at 1)" -j "$sa_done" -X -n -P -o Start)" = "$sa_st" ] ||
  fail "sacct -T: $("$sa_sacct" -T -S "$(sa_at 1)" -E "$(sa_at 2)" -j "$sa_done" -X -n -P -o Start,End,Elapsed) ($sa_st)"
# -M names this cluster; -v says the window; what has nothing to change here changes nothing.
sa_base=$("$sa_sacct" -j "$sa_done" -n -P)
for o in -D -L --local --federation --whole-hetjob --use-local-uid -Mlocal --clusters=all; do
  [ "$("$sa_sacct" "$o" -j "$sa_done" -n -P)" = "$sa_base" ] || fail "sacct $o changed the output"
done
set +e
out=$("$sa_sacct" -M elsewhere -j "$sa_done" 2>&1); rc=$?
set -e
[ $rc = 1 ] && grep -q "no cluster 'elsewhere'" <<<"$out" || fail "sacct -M elsewhere: $rc $out"
"$sa_sacct" -v -j "$sa_done" 2>&1 >/dev/null | grep -q "jobs not over before" || fail "sacct -v"
# -B: the finished job's script, while the controller keeps it.
out=$("$sa_sacct" -B -j "$sa_done" 2>&1) || fail "sacct -B: $out"
[ "$(head -1 <<<"$out")" = "Batch Script for $sa_done" ] && grep -q '^#!' <<<"$out" ||
  fail "sacct -B: $out"
# Refused by name, with the reason.
set +e
out=$("$sa_sacct" -c -j "$sa_done" 2>&1); rc=$?
set -e
[ $rc = 2 ] && grep -q "completion is not supported" <<<"$out" || fail "sacct -c: $rc $out"
"$DIR/compat/scancel" "$sa_held"
