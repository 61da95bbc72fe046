#!/usr/bin/env bash
# What this machine allows any batch system to drain, before any scheduling: N trivial jobs'
# own processes started two at a time (one per core) by xargs, with nothing else around them.
# A trivial job is a script (#!/bin/sh, then `true`); "as a user" adds the switch to another uid
# (setpriv), as every job of a real cluster has. Compare array_bench.sh's drain with these.
#   usage: tests/bench/process_ceiling.sh        Env: N (default 1000), PAR (default: the cores)
set -euo pipefail
N=${N:-1000}
PAR=${PAR:-$(nproc)}
DIR=$(mktemp -d /tmp/muster-ceiling.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
printf '#!/bin/sh\ntrue\n' >"$DIR/job.sh"
chmod 755 "$DIR" "$DIR/job.sh"
now() { echo "${EPOCHREALTIME/./}"; }  # microseconds
rate() {
  local what=$1
  shift
  local t0 t1
  t0=$(now)
  seq "$N" | xargs -P "$PAR" -I{} "$@"
  t1=$(now)
  awk -v n="$N" -v a="$t0" -v b="$t1" -v w="$what" -v p="$PAR" \
    'BEGIN { printf "%-40s %5.0f /s (%d at a time)\n", w, n / ((b - a) / 1e6), p }'
}
rate "/bin/true" /bin/true
rate "a script (sh, then true)" "$DIR/job.sh"
if command -v setpriv >/dev/null && [ "$(id -u)" = 0 ]; then
  rate "the script as user nobody (setpriv)" \
    setpriv --reuid=nobody --regid=nogroup --clear-groups "$DIR/job.sh"
fi
