#include "muster/common/text_bounds.h"

namespace muster {

Status CheckText(std::string_view what, std::string_view s, size_t max_bytes) {
  if (s.size() > max_bytes) {
    return InvalidArgument(std::string(what) + " is longer than " + std::to_string(max_bytes) +
                           " bytes");
  }
  if (s.find('\0') != std::string_view::npos) {
    return InvalidArgument(std::string(what) + " contains a NUL byte");
  }
  return Status::Ok();
}

}  // namespace muster
