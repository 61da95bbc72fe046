#!/bin/bash
# The programs root runs on every node are built hardened, as Debian builds its own packages:
# full RELRO (read-only relocations, bound at load), a stack protector, and fortified libc calls
# (checked at run time where a buffer's size is known). Fails on any program that lacks one.
#   usage: hardening_check.sh BIN_DIR BUILD_TYPE
set -u
bin=$1
build_type=${2:-}
for tool in readelf nm; do
  command -v $tool >/dev/null || { echo "SKIP: no $tool"; exit 77; }
done
# Only the optimised configurations are fortified (_FORTIFY_SOURCE needs optimisation).
case "$build_type" in Release | RelWithDebInfo | MinSizeRel) fortified=1 ;; *) fortified=0 ;; esac
failed=0
fail() {
  echo "FAIL: $1"
  failed=1
}
for prog in musterctld musterd muster muster-stepd; do
  f=$bin/$prog
  [ -x "$f" ] || { fail "$f is missing"; continue; }
  readelf -lW "$f" | grep -q GNU_RELRO || fail "$prog has no RELRO segment"
  readelf -dW "$f" | grep -Eq 'BIND_NOW|Flags:.* NOW' || fail "$prog is not bound at load (-z now)"
  syms=$(nm -D "$f")
  grep -q ' __stack_chk_fail' <<<"$syms" || fail "$prog has no stack protector"
  if [ "$fortified" = 1 ]; then
    grep -Eq ' __[a-z_]+_chk(@|$)' <<<"$syms" || fail "$prog calls no fortified libc function"
  fi
done
# The keeper is static (it loads nothing a job's environment could steer): its own calls are
# fortified all the same.
keeper=$bin/muster-keeper
if [ -x "$keeper" ] && [ "$fortified" = 1 ]; then
  nm "$keeper" | grep -Eq ' __[a-z_]+_chk$' || fail "muster-keeper calls no fortified libc function"
fi
[ $failed = 0 ] && echo "hardening: ok"
exit $failed
