// Step credentials: what the controller lets one step do on one node, sealed so that the node's
// agent can check it alone. Each node has its own step key, derived from the controller's secret
// and the node's name and handed to the node over its authenticated channel when it registers;
// a grant is sealed with HMAC-SHA256 under the key of the node it is for. A user who holds a
// grant can use it once, on that node, before it expires, and cannot change it; a node (even a
// compromised one) cannot make a grant for any other node.
#pragma once

#include <string>
#include <string_view>

#include "muster/common/status.h"
#include "muster/v1/agent.pb.h"

namespace muster::credentials {

// Bytes of a step key and of a controller's secret.
inline constexpr size_t kKeySize = 32;

// A fresh controller secret from the operating system's random source.
std::string NewSecret();

// The step key of `node` under the controller's `secret`.
std::string NodeStepKey(std::string_view secret, std::string_view node);

// `grant` sealed under `node_key`: a serialized SealedStepGrant.
std::string SealStepGrant(std::string_view node_key, const v1::StepGrant& grant);

// The grant inside `sealed`, when its seal is `node_key`'s: PERMISSION_DENIED for a credential
// that is malformed or sealed under another key. Says nothing of whom or when it is for; the
// caller checks that.
Result<v1::StepGrant> OpenStepGrant(std::string_view node_key, std::string_view sealed);

}  // namespace muster::credentials
