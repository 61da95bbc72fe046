// TOML text to a table, with errors as the rest of Muster words them ("file:line: problem").
// For the configuration and the GPU fixtures.
#pragma once

#include <toml++/toml.h>

#include <string>

#include "muster/common/status.h"

namespace muster {

// INVALID_ARGUMENT "source:LINE: what is wrong" when `text` is not TOML.
Result<toml::table> ParseToml(const std::string& text, const std::string& source);

}  // namespace muster
