#include "muster/common/node_keys.h"

#include "muster/common/own_files.h"

namespace muster {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Result<std::string> LoadNodeKey(const NodeAuthConfig& auth, const std::string& node) {
  if (!auth.enabled()) {
    return FailedPrecondition("[node_auth] key_file is not configured");
  }
  if (!IsValidNodeName(node)) return InvalidArgument("'" + node + "' is not a valid node name");
  const std::string path = auth.KeyFile(node);
  MUSTER_ASSIGN_OR_RETURN(std::string text, ReadProtectedFile(path, "node key", true, 256));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  std::string key;
  if (text.size() == 2 * kNodeKeyBytes) {
    for (size_t i = 0; i < text.size(); i += 2) {
      const int hi = HexValue(text[i]), lo = HexValue(text[i + 1]);
      if (hi < 0 || lo < 0) break;
      key.push_back(static_cast<char>(hi * 16 + lo));
    }
  }
  if (key.size() != kNodeKeyBytes) {
    return FailedPrecondition("node key " + path + " does not hold " +
                              std::to_string(2 * kNodeKeyBytes) +
                              " hex digits (make it with `muster certs --node-keys`)");
  }
  return key;
}

std::string NodeKeyText(const std::string& raw_key) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw_key) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  out.push_back('\n');
  return out;
}

}  // namespace muster
