// HMAC-SHA256 with a purpose label (domain separation: a MAC made for one purpose is never valid
// for another). Private to the credentials library.
#pragma once

#include <string>
#include <string_view>

namespace muster::credentials {

// HMAC-SHA256(key, label || 0 || message): kKeySize bytes.
std::string Hmac(std::string_view key, std::string_view label, std::string_view message);

}  // namespace muster::credentials
