# -O/--overcommit, --propagate and the cluster's PropagateResourceLimits through the compat
# links (sourced by local_cluster_stest.sh).
C="$DIR/compat"
"$C/scontrol" show config | grep -q '^PropagateResourceLimits *= ALL$' ||
  fail "scontrol show config: $("$C/scontrol" show config | grep Propagate)"
# -O: 4 more tasks than a node has CPUs fit one node, and srun starts all of them.
cpus=$("$C/scontrol" show node node1 | sed -n 's/.*CPUTot=\([0-9]*\).*/\1/p')
[ -n "$cpus" ] || fail "scontrol show node node1: no CPUTot"
n=$((cpus + 4))
"$C/sbatch" -W -O -N1 -n "$n" -o overcommit.out \
  --wrap 'echo "oc=$SLURM_OVERCOMMIT"; srun sh -c "echo task \$SLURM_PROCID"' >/dev/null ||
  fail "sbatch -O -n$n: $(cat overcommit.out)"
grep -q '^oc=1$' overcommit.out || fail "SLURM_OVERCOMMIT: $(cat overcommit.out)"
[ "$(grep -c '^task ' overcommit.out)" = "$n" ] || fail "sbatch -O -n$n ran: $(cat overcommit.out)"
# --propagate: the shell's lowered limits reach the batch script and a step's tasks; a limit
# above the node's hard one never does (the agent runs as this user: its hard limit is ours).
soft=$(( $(ulimit -Hn) > 200 ? 200 : $(ulimit -Hn) ))
(ulimit -Sn "$soft"; "$C/sbatch" -W --propagate=NOFILE -o propagate.out \
  --wrap 'echo "batch=$(ulimit -Sn)"; srun --propagate=NOFILE sh -c "echo step=\$(ulimit -Sn)"' \
  >/dev/null) || fail "sbatch --propagate: $(cat propagate.out)"
[ "$(cat propagate.out)" = "$(printf 'batch=%s\nstep=%s' "$soft" "$soft")" ] ||
  fail "--propagate=NOFILE: $(cat propagate.out) (wanted $soft)"
(ulimit -Sn "$soft"; "$C/sbatch" -W --propagate=NONE -o propagate.out --wrap 'ulimit -Sn' >/dev/null)
[ "$(cat propagate.out)" != "$soft" ] || [ "$(ulimit -Sn)" = "$soft" ] ||
  fail "--propagate=NONE still propagated NOFILE"
rm -f overcommit.out propagate.out
