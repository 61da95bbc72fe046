// Checks for strings that arrive from users and end up in paths, argv arrays or lines of output:
// bounded in length and free of NUL bytes. Shared by every place that bounds a request.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "muster/common/status.h"

namespace muster {

// INVALID_ARGUMENT naming `what` when `s` is longer than `max_bytes` or holds a NUL byte.
Status CheckText(std::string_view what, std::string_view s, size_t max_bytes);

// The same for each of a list of strings, after its length: at most `max_entries` of them.
template <typename Strings>
Status CheckTextList(std::string_view what, const Strings& list, size_t max_entries,
                     size_t max_bytes) {
  const size_t n = static_cast<size_t>(list.size());
  if (n > max_entries) {
    return InvalidArgument(std::string(what) + " has " + std::to_string(n) + " entries; at most " +
                           std::to_string(max_entries));
  }
  for (const auto& s : list) MUSTER_RETURN_IF_ERROR(CheckText(what, s, max_bytes));
  return Status::Ok();
}

}  // namespace muster
