#!/usr/bin/env bash
# Fails when a C++ file is not formatted per .clang-format (Google style, 100 columns).
# Fix with: clang-format -i $(git ls-files '*.h' '*.cc')
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.h' '*.cc' 2>/dev/null || find src include cli daemons tests -name '*.h' -o -name '*.cc')
clang-format --dry-run -Werror $files
echo "format: ok"
