#pragma once

namespace muster {
inline constexpr const char* kVersion = "0.1.0";
}
