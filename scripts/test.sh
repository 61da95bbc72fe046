#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine: dependencies, a release build with warnings
# as errors, then every test (unit, integration, system). This is what CI runs (.ci/run).
#   usage: scripts/test.sh [ctest args...]      e.g. scripts/test.sh -L unit
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
./scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release
echo "build: $(( $(date +%s) - start )) s"
ctest --preset release --timeout 600 "$@"
echo "total: $(( $(date +%s) - start )) s"
