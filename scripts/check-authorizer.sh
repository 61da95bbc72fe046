#!/usr/bin/env bash
# Who may do what is decided in one place: src/controller/access.cc (the access rules). Fails when
# any other source under src/, cli/ or daemons/ reads whether a caller is an admin or an operator
# (`.is_admin`, `.is_operator`, `->is_admin`, ...). Setting them, where the transport resolves the
# caller (src/rpc/api_dispatch.cc), is allowed.
#   usage: check-authorizer.sh [ROOT]   (default: the repository); --self-test plants a read in a
#   copy and expects the check to refuse it.
set -euo pipefail
if [ "${1:-}" = "--self-test" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/src/controller" "$tmp/src/rpc"
  printf 'bool F(const Caller& c) { return c.is_admin; }\n' >"$tmp/src/controller/sneaky.cc"
  if "$0" "$tmp" >/dev/null 2>&1; then
    echo "authorizer check: a planted read of is_admin passed" >&2
    exit 1
  fi
  for plant in 'bool G(const Caller* c) { return c->is_operator || !c->is_admin; }' \
               'bool H(const Caller& c) { return c. is_admin; }' \
               'auto I = &Caller::is_admin;'; do
    printf '%s\n' "$plant" >"$tmp/src/controller/sneaky.cc"
    if "$0" "$tmp" >/dev/null 2>&1; then
      echo "authorizer check: a planted '$plant' passed" >&2
      exit 1
    fi
  done
  mkdir -p "$tmp/include/muster/controller"
  printf 'inline bool J(const Caller& c) { return c.is_admin; }\n' \
    >"$tmp/include/muster/controller/engine.h"
  rm "$tmp/src/controller/sneaky.cc"
  if "$0" "$tmp" >/dev/null 2>&1; then
    echo "authorizer check: a planted read in a public header passed" >&2
    exit 1
  fi
  rm "$tmp/include/muster/controller/engine.h"
  printf 'void R(Caller& c) {\n  c.is_admin = true;\n  c.is_operator = false;\n}\n' \
    >"$tmp/src/rpc/api_dispatch.cc"
  "$0" "$tmp" >/dev/null || { echo "authorizer check: caller resolution refused" >&2; exit 1; }
  echo "authorizer check: planted reads refused"
  exit 0
fi
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
dirs=()
for d in src include cli daemons; do [ -d "$d" ] && dirs+=("$d"); done
bad=$(grep -rnE '((\.|->)\s*|::)is_(admin|operator)\b' "${dirs[@]}" --include='*.cc' --include='*.h' |
      grep -v -e '^src/controller/access.cc:' -e '^include/muster/controller/access.h:' |
      grep -vE '^src/rpc/api_dispatch.cc:[0-9]+:\s*c\.is_(admin|operator) = ' || true)
if [ -n "$bad" ]; then
  echo "only src/controller/access.cc decides who is privileged (use May/Authorize):" >&2
  echo "$bad" >&2
  exit 1
fi
echo "authorizer: ok"
