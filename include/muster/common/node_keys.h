// The node keys of [node_auth]: one random 32-byte key per node, kept as 64 hex digits in a file
// only root (or the daemon's user) can read. An agent without TLS proves its node with it; the
// controller reads the named node's file to check the proof.
#pragma once

#include <string>

#include "muster/common/config.h"
#include "muster/common/status.h"

namespace muster {

inline constexpr size_t kNodeKeyBytes = 32;

// The raw key of `node` (kNodeKeyBytes). FAILED_PRECONDITION naming the file and its fault (not
// configured, missing, readable by others, not 64 hex digits). `node` must be a valid node name
// (it becomes part of a path).
Result<std::string> LoadNodeKey(const NodeAuthConfig& auth, const std::string& node);

// A key as its file holds it: 64 lowercase hex digits and a newline.
std::string NodeKeyText(const std::string& raw_key);

}  // namespace muster
