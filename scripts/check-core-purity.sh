#!/usr/bin/env bash
# The pure core (src/core) does no I/O, reads no clock and starts no thread: the symbols its
# library needs from outside are muster's own, the C++ runtime's and the standard containers',
# and a few libc functions on memory and numbers. Anything else (open, read, clock_gettime,
# time, pthread_create, std::thread, a clock's now(), a file stream) fails. A backstop for the
# include rules of check-boundaries.py, which a header of common could walk around.
#   usage: check-core-purity.sh LIBRARY_OR_OBJECT ...; --self-test compiles a planted call.
set -euo pipefail
if [ "${1:-}" = "--self-test" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  for plant in '#include <ctime>
long f() { return std::time(nullptr); }' \
               '#include <chrono>
long f() { return std::chrono::steady_clock::now().time_since_epoch().count(); }' \
               '#include <fstream>
bool f() { std::ifstream in("/etc/hostname"); return in.good(); }' \
               '#include <thread>
void f() { std::thread([] {}).join(); }' \
               '#include <fcntl.h>
int f() { return ::open("/x", 0); }'; do
    printf '%s\n' "$plant" | c++ -std=c++20 -O2 -x c++ -c -o "$tmp/p.o" -
    if "$0" "$tmp/p.o" >/dev/null 2>&1; then
      echo "core purity check: a planted call passed: $plant" >&2
      exit 1
    fi
  done
  printf '#include <map>\n#include <string>\nint f(){std::map<std::string,int> m; m["a"]=1; return m.size();}\n' |
    c++ -std=c++20 -O2 -x c++ -c -o "$tmp/ok.o" -
  "$0" "$tmp/ok.o" >/dev/null || { echo "core purity check: a pure container refused" >&2; exit 1; }
  echo "core purity check: planted calls refused"
  exit 0
fi
allowed='^(muster::|std::(_Rb_tree|__throw_|exception|nothrow|allocator<|__detail::_Prime_rehash_policy|_Hash_bytes|__cxx11::basic_string|basic_string)|operator (new|delete)|__cxa_|_Unwind_|__gxx_personality|__popcount|__dso_handle|__stack_chk_fail|__asan_|__ubsan_|__sanitizer_|__sancov|__lsan_|__start___sancov|__stop___sancov|std::terminate\(\)$|typeinfo for std::|vtable for __cxxabiv1::|(mem(chr|cmp|cpy|move|set)|strlen|strcmp|l?l?round|floor|ceil|sqrt|log|log2|exp|pow|fmod)$)'
bad=$(nm -u --demangle "$@" | awk 'NF >= 2 { $1 = ""; print substr($0, 2) }' | sort -u |
      grep -vE "$allowed" || true)
if [ -n "$bad" ]; then
  echo "the core needs symbols outside its pure set (no I/O, clock or threads):" >&2
  echo "$bad" >&2
  exit 1
fi
echo "core purity: ok"
