#include "muster/credentials/node_proof.h"

#include <cstring>

#include "hmac.h"
#include "muster/common/strings.h"
#include "muster/credentials/step_credential.h"

namespace muster::credentials {
namespace {

constexpr std::string_view kChallengeLabel = "muster node challenge v1";
constexpr std::string_view kProofLabel = "muster node proof v1";
// A challenge: the time it was issued (8 bytes), 16 random bytes, and the first 16 bytes of the
// issuer's MAC over both.
constexpr size_t kStampBytes = 8, kRandomBytes = 16, kTagBytes = 16;
constexpr size_t kChallengeBytes = kStampBytes + kRandomBytes + kTagBytes;

std::string Tag(std::string_view key, std::string_view body) {
  return Hmac(key, kChallengeLabel, body).substr(0, kTagBytes);
}

}  // namespace

std::string NodeProof(std::string_view node_key, std::string_view nonce, std::string_view node,
                      std::string_view instance_id) {
  std::string message(nonce);
  message.append(node);
  message.push_back('\0');
  message.append(instance_id);
  return Hmac(node_key, kProofLabel, message);
}

NodeChallenges::NodeChallenges() : key_(NewSecret()) {}

std::string NodeChallenges::Issue(int64_t now_ms) {
  std::string body(kStampBytes, '\0');
  const uint64_t stamp = static_cast<uint64_t>(now_ms);
  for (size_t i = 0; i < kStampBytes; ++i) body[i] = static_cast<char>(stamp >> (8 * i));
  body += NewSecret().substr(0, kRandomBytes);
  return body + Tag(key_, body);
}

Status NodeChallenges::Fresh(std::string_view nonce, int64_t now_ms) const {
  if (nonce.size() != kChallengeBytes ||
      !ConstantTimeEquals(nonce.substr(kStampBytes + kRandomBytes),
                          Tag(key_, nonce.substr(0, kStampBytes + kRandomBytes)))) {
    return PermissionDenied("the registration answers no challenge of this controller");
  }
  uint64_t stamp = 0;
  for (size_t i = 0; i < kStampBytes; ++i) {
    stamp |= static_cast<uint64_t>(static_cast<unsigned char>(nonce[i])) << (8 * i);
  }
  const int64_t issued = static_cast<int64_t>(stamp);
  if (now_ms - issued > kMaxAgeMs || issued - now_ms > 1'000) {
    return PermissionDenied("the registration answers an expired challenge");
  }
  return Status::Ok();
}

Status NodeChallenges::Check(std::string_view nonce, std::string_view proof,
                             std::string_view node_key, std::string_view node,
                             std::string_view instance_id, int64_t now_ms) {
  MUSTER_RETURN_IF_ERROR(Fresh(nonce, now_ms));
  if (!ConstantTimeEquals(proof, NodeProof(node_key, nonce, node, instance_id))) {
    return PermissionDenied("the registration's proof is not made with the key of node '" +
                            std::string(node) + "'");
  }
  std::lock_guard l(mu_);
  // Kept past the latest moment the challenge could still be answered.
  while (!spent_order_.empty() && spent_order_.front().first < now_ms - kMaxAgeMs - 1'000) {
    spent_.erase(spent_order_.front().second);
    spent_order_.pop_front();
  }
  if (!spent_.emplace(nonce).second) {
    return PermissionDenied("the registration answers a challenge that was answered before");
  }
  spent_order_.emplace_back(now_ms, std::string(nonce));
  return Status::Ok();
}

}  // namespace muster::credentials
