#!/usr/bin/env bash
# The shipped manual pages render without a warning from man/groff (skipped, 77, without man).
#   usage: man_pages_check.sh MAN_DIR
set -euo pipefail
command -v man >/dev/null || { echo "SKIP: man is not installed"; exit 77; }
bad=0
for page in "${1:?usage: $0 MAN_DIR}"/*.[1-8]; do
  out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null) || bad=1
  if [ -n "$out" ]; then echo "$page: $out"; bad=1; fi
  [ -n "$(MANWIDTH=80 man -l "$page" 2>/dev/null | grep -m1 NAME)" ] || { echo "$page: no NAME"; bad=1; }
done
[ $bad = 0 ] && echo "man pages: ok"
exit $bad
