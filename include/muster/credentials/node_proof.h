// How an agent without TLS proves that it speaks for its node: the controller hands out a
// challenge (a nonce it can recognise later without keeping it), the agent answers with an
// HMAC-SHA256 over the challenge, its node name and its instance under the node's key
// ([node_auth]), which only root on that node (and the controllers) can read. A challenge is good
// for one registration, for a short while.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "muster/common/status.h"

namespace muster::credentials {

// What the agent sends: the proof for `nonce`, `node` and `instance_id` under `node_key`.
std::string NodeProof(std::string_view node_key, std::string_view nonce, std::string_view node,
                      std::string_view instance_id);

// The controller's side: issues challenges and checks answers. Thread-safe.
class NodeChallenges {
 public:
  // How long a challenge may be answered.
  static constexpr int64_t kMaxAgeMs = 30'000;

  NodeChallenges();  // a fresh random key: challenges of another process are not ours

  std::string Issue(int64_t now_ms);

  // OK when `nonce` is a challenge issued here that may still be answered (cheap: a caller checks
  // it before it looks up the node's key).
  Status Fresh(std::string_view nonce, int64_t now_ms) const;

  // OK when `proof` answers `nonce` (issued here, still fresh, never answered before) for `node`
  // and `instance_id` under `node_key`; the challenge is then spent. PERMISSION_DENIED saying
  // which part failed otherwise.
  Status Check(std::string_view nonce, std::string_view proof, std::string_view node_key,
               std::string_view node, std::string_view instance_id, int64_t now_ms);

 private:
  std::string key_;
  std::mutex mu_;
  // Spent challenges (and when, oldest first) until they would have expired anyway. Only a right
  // answer spends one, so this holds at most the real registrations of kMaxAgeMs.
  std::unordered_set<std::string> spent_;
  std::deque<std::pair<int64_t, std::string>> spent_order_;
};

}  // namespace muster::credentials
