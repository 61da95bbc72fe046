#!/usr/bin/env bash
# `muster compat install` must make exactly the links that `cmake --install` makes.
#   usage: compat_links_check.sh MUSTER NAME...
set -euo pipefail
muster=$1; shift
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$muster" compat install "$d/links" >/dev/null
got=$(ls "$d/links" | sort | tr '\n' ' ')
want=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
[ "$got" = "$want" ] || { echo "compat install makes: $got; cmake --install makes: $want" >&2; exit 1; }
