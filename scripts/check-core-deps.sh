#!/usr/bin/env bash
# The scheduling core is pure: nothing under src/core or include/muster/core may include gRPC,
# protobuf, RocksDB or Asio (docs/architecture.md). Run from the repository root.
set -euo pipefail
bad=$(grep -rnE '#\s*include\s*[<"](grpc|grpcpp|google/protobuf|boost/asio|asio|rocksdb)[/.]|#\s*include\s*[<"][^>"]*\.pb\.h' \
      src/core include/muster/core || true)
if [ -n "$bad" ]; then
  echo "core must not include gRPC, protobuf, RocksDB or Asio headers:" >&2
  echo "$bad" >&2
  exit 1
fi
echo "core purity: ok"
