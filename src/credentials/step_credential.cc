#include "muster/credentials/step_credential.h"

#include "hmac.h"
#include "muster/common/strings.h"

namespace muster::credentials {
namespace {

// Domain separation: a MAC made for one purpose is never valid for another.
constexpr std::string_view kKeyLabel = "muster step key v1";
constexpr std::string_view kGrantLabel = "muster step grant v1";

// A step credential is a few hundred bytes (plus the CPU and GPU ids of one node).
constexpr size_t kMaxSealed = 64 * 1024;

}  // namespace

std::string NodeStepKey(std::string_view secret, std::string_view node) {
  return Hmac(secret, kKeyLabel, node);
}

std::string SealStepGrant(std::string_view node_key, const v1::StepGrant& grant) {
  v1::SealedStepGrant sealed;
  grant.SerializeToString(sealed.mutable_grant());
  sealed.set_mac(Hmac(node_key, kGrantLabel, sealed.grant()));
  return sealed.SerializeAsString();
}

Result<v1::StepGrant> OpenStepGrant(std::string_view node_key, std::string_view sealed_bytes) {
  if (node_key.size() != kKeySize) {
    return Unavailable("this node has no step key yet (it has not registered with the controller)");
  }
  v1::SealedStepGrant sealed;
  if (sealed_bytes.empty() || sealed_bytes.size() > kMaxSealed ||
      !sealed.ParseFromArray(sealed_bytes.data(), static_cast<int>(sealed_bytes.size()))) {
    return PermissionDenied("the step's credential is not one the controller made");
  }
  if (!ConstantTimeEquals(sealed.mac(), Hmac(node_key, kGrantLabel, sealed.grant()))) {
    return PermissionDenied("the step's credential is not sealed for this node by its controller");
  }
  v1::StepGrant grant;
  if (!grant.ParseFromString(sealed.grant())) {
    return PermissionDenied("the step's credential does not parse");
  }
  return grant;
}

}  // namespace muster::credentials
