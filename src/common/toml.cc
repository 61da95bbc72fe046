#include "muster/common/toml.h"

namespace muster {

Result<toml::table> ParseToml(const std::string& text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return InvalidArgument(source + ":" + std::to_string(e.source().begin.line) + ": " +
                           std::string(e.description()));
  }
}

}  // namespace muster
