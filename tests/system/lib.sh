# Shared by the system tests (sourced): fail and wait_for.

fail() { echo "FAIL: $*" >&2; exit 1; }

# wait_for SECONDS COMMAND...: poll until COMMAND succeeds; fail with it named when time runs out.
wait_for() {
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "timed out waiting for: $*"
    sleep 0.1
  done
}
