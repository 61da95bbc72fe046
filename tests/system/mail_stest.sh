#!/usr/bin/env bash
# System test: --mail-type through a real local cluster whose controller has a mail_prog (Slurm's
# MailProg): a capturing program records each call's argv and SLURM_* environment.
#   usage: mail_stest.sh BIN_DIR
# BEGIN and END of a job (to its --mail-user), FAIL of a failing one (#SBATCH, to its submitter),
# TIME_LIMIT_50 of one with a 10 s limit; a --mail-user that would be an option is refused, and
# `scontrol show config` names the program. Stops exactly the processes it started (pid files).
set -euo pipefail
BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$BIN:$PATH"
DIR=$(mktemp -d /tmp/muster-mail.XXXXXX)
WORK="$DIR/work"
MAILS="$DIR/mails.log"
mkdir -p "$WORK"
cd "$WORK"
cleanup() {
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "--- FAILED (rc=$rc); mails:" >&2
    cat "$MAILS" >&2 || true
    echo "--- logs:" >&2
    tail -n 30 "$DIR"/cluster/log/*.log >&2 || true
  fi
  muster cancel --user "$(id -un)" >/dev/null 2>&1 || true
  muster local down --dir "$DIR/cluster" --purge >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT
. "$ROOT/tests/system/lib.sh"

# The mail program: one record per call (its environment is the controller's fixed one plus
# SLURM_*, so the log's path is written into the script).
cat >"$DIR/mailprog" <<EOF
#!/bin/sh
{
  printf 'ARGV'
  for a in "\$@"; do printf ' [%s]' "\$a"; done
  echo
  env | grep '^SLURM_' | sort
  echo "UID \$(id -u)"
  echo END
} >>"$MAILS"
EOF
chmod 755 "$DIR/mailprog"
: >"$MAILS"
# Under a root controller the program runs as nobody: it must reach the script and the log.
if [ "$(id -u)" = 0 ]; then
  chmod 755 "$DIR"
  chmod 666 "$MAILS"
fi

echo "== local up --mail-prog"
eval "$(muster local up --dir "$DIR/cluster" --nodes 2 --gpus-per-node 8 --mail-prog "$DIR/mailprog")"
muster compat install "$DIR/compat" >/dev/null
SB="$DIR/compat/sbatch"
"$DIR/compat/scontrol" show config | grep -q "^MailProg *= $DIR/mailprog\$" ||
  fail "scontrol show config does not name the mail program"

echo "== a --mail-user that would be an option of the mail program is refused"
set +e
out=$("$SB" --mail-type=END --mail-user=-oProxyCommand=x --wrap true 2>&1); rc=$?
set -e
[ $rc != 0 ] && grep -q -- "--mail-user" <<<"$out" || fail "bad --mail-user accepted: $out"

echo "== submit"
ok=$("$SB" --parsable -J okjob -o /dev/null --mail-type=BEGIN,END --mail-user=tester@example.org \
  --wrap 'sleep 1')
cat >fail.sh <<'EOF'
#!/bin/sh
#SBATCH -J badjob
#SBATCH --mail-type=FAIL
#SBATCH -o /dev/null
exit 3
EOF
bad=$("$SB" --parsable fail.sh)
half=$("$SB" --parsable -J halfjob -o /dev/null -t 0:10 --mail-type=TIME_LIMIT_50 --wrap 'sleep 7')
me=$(id -un)

state() { muster job show "$1" --json | LC_ALL=C sed -n 's/.*"state":"\([A-Z_]*\)".*/\1/p'; }
is_done() { [ "$(state "$1")" = COMPLETED ]; }
has() { grep -qF -- "$1" "$MAILS"; }
has_re() { grep -qE -- "$1" "$MAILS"; }
wait_for 45 has_re "^ARGV \[-s\] \[Slurm Job_id=$ok Name=okjob Ended, Run time [0-9:]+, COMPLETED, ExitCode 0\] \[tester@example.org\]$"
wait_for 45 has_re "^ARGV \[-s\] \[Slurm Job_id=$bad Name=badjob Failed, Run time [0-9:]+, FAILED, ExitCode 3\] \[$me\]$"
wait_for 45 has_re "^ARGV \[-s\] \[Slurm Job_id=$half Name=halfjob Reached 50% of time limit, Run time 00:00:0[5-9]\] \[$me\]$"

echo "== what each mail says"
has_re "^ARGV \[-s\] \[Slurm Job_id=$ok Name=okjob Began, Queued time [0-9:]+\] \[tester@example.org\]$" ||
  fail "no BEGIN mail for $ok"
[ "$(grep -c "Job_id=$ok Name=okjob Began" "$MAILS")" = 1 ] || fail "BEGIN mailed more than once"
# A root controller runs the program as mail_prog_user (nobody), never as root.
if [ "$(id -u)" = 0 ]; then
  [ "$(grep '^UID ' "$MAILS" | sort -u)" = "UID $(id -u nobody)" ] ||
    fail "the mail program ran as: $(grep '^UID ' "$MAILS" | sort -u | tr '\n' ' ')"
fi
# The environment of the END mail: the record after its ARGV line, up to END.
end_env=$(awk -v id="$ok" '$0 ~ "Job_id=" id " Name=okjob Ended" {on=1; next} on && /^END$/ {exit} on' "$MAILS")
for want in "SLURM_JOB_ID=$ok" "SLURM_JOB_NAME=okjob" "SLURM_JOB_USER=$me" \
            "SLURM_JOB_MAIL_TYPE=Ended" "SLURM_JOB_STATE=COMPLETED" "SLURM_JOB_EXIT_CODE_MAX=0" \
            "SLURM_CLUSTER_NAME=local"; do
  grep -qx -- "$want" <<<"$end_env" || fail "END mail's environment lacks $want: $end_env"
done
# Nothing was asked of the others beyond what came.
has "Job_id=$bad Name=badjob Began" && fail "BEGIN mailed to a job that asked for FAIL only"
wait_for 30 is_done "$half"
has "Job_id=$half Name=halfjob Ended" && fail "END mailed to a job that asked for TIME_LIMIT_50 only"
[ "$(grep -c "Job_id=$half Name=halfjob Reached 50%" "$MAILS")" = 1 ] || fail "50% mailed more than once"
echo "PASS"
