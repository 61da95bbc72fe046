#include "hmac.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "muster/common/check.h"
#include "muster/credentials/step_credential.h"

namespace muster::credentials {

std::string Hmac(std::string_view key, std::string_view label, std::string_view message) {
  std::string input;
  input.reserve(label.size() + 1 + message.size());
  input.append(label);
  input.push_back('\0');
  input.append(message);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  const unsigned char* done =
      HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(input.data()), input.size(), out, &len);
  MUSTER_CHECK(done != nullptr && len == kKeySize);
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string NewSecret() {
  std::string secret(kKeySize, '\0');
  MUSTER_CHECK(RAND_bytes(reinterpret_cast<unsigned char*>(secret.data()),
                          static_cast<int>(secret.size())) == 1);
  return secret;
}

}  // namespace muster::credentials
