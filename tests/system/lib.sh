# Shared by the system tests (sourced): fail, wait_for, skip_without_netns, reap_leftovers.

fail() { echo "FAIL: $*" >&2; exit 1; }

# wait_for SECONDS COMMAND...: poll until COMMAND succeeds; fail with it named when time runs out.
wait_for() {
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "timed out waiting for: $*"
    sleep 0.1
  done
}

# skip_without_netns TAG TOOL...: exit 77 (ctest's "skipped") unless this runs as root with the
# tools, and network namespaces can be both created and entered here (inside a chroot `ip -n`
# cannot enter them).
skip_without_netns() {
  local tag=$1; shift
  if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root (network namespaces)"; exit 77; fi
  for tool in ip "$@"; do
    command -v "$tool" >/dev/null || { echo "SKIP: $tool is missing"; exit 77; }
  done
  if ! ip netns add "$tag-probe" 2>/dev/null; then
    echo "SKIP: cannot create network namespaces here"; exit 77
  fi
  if ! ip -n "$tag-probe" link set lo up 2>/dev/null; then
    ip netns del "$tag-probe" 2>/dev/null || umount "/run/netns/$tag-probe" 2>/dev/null || true
    rm -f "/run/netns/$tag-probe"
    echo "SKIP: cannot enter network namespaces here (a chroot?)"; exit 77
  fi
  ip netns del "$tag-probe"
}

# reap_leftovers DIR: after a test's cleanup stopped what it started, whatever still runs with DIR
# (the test's own temporary directory) on its command line escaped it: name it, kill it by pid,
# and return 1 so that the test fails.
reap_leftovers() {
  local left
  left=$(pgrep -f -- "$1/" || true)
  [ -n "$left" ] || return 0
  echo "FAIL: still running after cleanup:" >&2
  ps -o pid=,args= -p "$(echo $left | tr ' ' ,)" >&2 || true
  kill -KILL $left 2>/dev/null || true
  return 1
}
