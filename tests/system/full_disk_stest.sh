#!/usr/bin/env bash
# System test: the controller's state directory on a small tmpfs (its own mount namespace) fills
# up. New submissions are refused with an error naming the directory and the space, while the
# job already running goes on, ends and is accounted; the controller restarted on the full disk
# comes up and still refuses; once the space is freed, submissions are accepted and run.
#   usage: full_disk_stest.sh BIN_DIR
set -euo pipefail
BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
. "$(dirname "$0")/lib.sh"
if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root (a tmpfs in a mount namespace)"; exit 77; fi
if [ -z "${MUSTER_FULL_DISK_NS:-}" ]; then
  if ! unshare -m --propagation private true 2>/dev/null; then
    echo "SKIP: cannot make a mount namespace here"; exit 77
  fi
  # The tmpfs is seen by this script and what it starts only, and goes with them.
  exec env MUSTER_FULL_DISK_NS=1 unshare -m --propagation private bash "$0" "$@"
fi
export PATH="$BIN:$PATH"
DIR=$(mktemp -d /tmp/muster-fd.XXXXXX)
chmod 755 "$DIR"
cd "$DIR"
CL="$DIR/cluster"
cleanup() {
  rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
    echo "--- FAILED (rc=$rc); logs:" >&2
    tail -n 25 "$CL"/log/*.log >&2 || true
  fi
  muster local down --dir "$CL" >/dev/null 2>&1 || true
  umount "$CL/state" 2>/dev/null || true
  muster local down --dir "$CL" --purge >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT
state() { muster job show "$1" --json | sed -n 's/.*"state":"\([A-Z_]*\)".*/\1/p'; }
is_state() { [ "$(state "$1")" = "$2" ]; }
avail() { df -B1 --output=avail "$CL/state" | tail -n 1 | tr -d ' '; }
# Leaves about $1 MiB free on the state directory's tmpfs.
fill_to() {
  local more=$(( $(avail) - $1 * 1048576 ))
  [ "$more" -le 0 ] || fallocate -l "$more" "$CL/state/filler.$RANDOM"
}

mkdir -p "$CL/state"
mount -t tmpfs -o size=48m,mode=0700 tmpfs "$CL/state" || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
muster local up --dir "$CL" --nodes 2 --gpus-per-node 2 >/dev/null
muster local down --dir "$CL" >/dev/null
sed -i 's/^state_dir = .*/&\nstate_reserve_mb = 8/' "$CL/muster.toml"
grep -q '^state_reserve_mb = 8$' "$CL/muster.toml" || fail "could not set the reserve"
eval "$(muster local up --dir "$CL" --nodes 2 --gpus-per-node 2)"

echo "== below the reserve: submissions refused, the running job goes on"
running=$(muster submit --parsable --gpus=1 --wrap "while [ ! -e $DIR/go ]; do sleep 0.1; done")
wait_for 30 is_state "$running" RUNNING
fill_to 5  # below the reserve (8 MiB), above the floor (2 MiB)
set +e
out=$(muster submit --parsable --wrap true 2>&1); rc=$?
set -e
[ $rc = 1 ] || fail "a submission on a nearly full disk exited $rc: $out"
grep -q "state directory $CL/state is nearly full (.* free, 9 MiB needed): new jobs are refused" \
  <<<"$out" || fail "unclear refusal: $out"
wait_for 5 bash -c "muster diag | grep -q '^State store .*nearly full'"
muster queue >/dev/null || fail "reads must still work"
touch "$DIR/go"
wait_for 30 is_state "$running" COMPLETED
muster acct -j "$running" | grep -q COMPLETED || fail "the job that ended is not accounted"

echo "== restarted on the nearly full disk: up, still refusing, nothing lost"
ctld=$(cat "$CL/run/musterctld.pid")
kill -9 "$ctld"
wait_for 10 bash -c "! kill -0 $ctld"
muster local up --dir "$CL" --nodes 2 --gpus-per-node 2 >/dev/null
is_state "$running" COMPLETED || fail "job $running after the restart: $(state "$running")"
set +e
out=$(muster submit --parsable --wrap true 2>&1); rc=$?
set -e
[ $rc = 1 ] && grep -q "nearly full" <<<"$out" || fail "restarted controller accepted: $rc $out"
grep -q "nearly full" "$CL/log/musterctld.log" || fail "the controller did not log the full disk"

echo "== space freed: submissions accepted again"
rm -f "$CL"/state/filler.*
wait_for 10 bash -c "muster diag | grep -q '^State store *room to write'"
next=$(muster submit --parsable --wrap true)
[ "$next" -gt "$running" ] || fail "job id $next after $running"
wait_for 30 is_state "$next" COMPLETED
echo "PASS"
