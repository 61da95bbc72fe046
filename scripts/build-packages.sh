#!/usr/bin/env bash
# The Debian packages (muster-controller, muster-agent, muster-client, muster-slurm-compat,
# muster-sim) of a build, made by CPack (cmake/packaging.cmake), into OUT_DIR (default BUILD_DIR/packages).
#   usage: build-packages.sh [OUT_DIR]      BUILD_DIR (default build/release) must be built.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build/release}
out=${1:-$build/packages}
[ -f "$build/CPackConfig.cmake" ] || { echo "no CPack config in $build: configure it first" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/*.deb
(cd "$build" && cpack -G DEB -B "$out" >"$out/cpack.log" 2>&1) ||
  { cat "$out/cpack.log" >&2; exit 1; }
rm -rf "$out/_CPack_Packages"
ls "$out"/*.deb
