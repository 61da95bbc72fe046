// The format language of squeue's and sinfo's -o/--format: "%[.][WIDTH]LETTER" fields between
// literal text; a '.' right-justifies, a value longer than WIDTH is cut (as Slurm's tools cut
// it), and "%%" is a literal '%'. One parser for both commands; each gives its own letters.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "muster/common/status.h"

namespace muster::cli {

struct FormatItem {
  std::string literal;  // text, when letter == 0
  char letter = 0;
  bool right = false;
  size_t width = 0;  // 0: as wide as the value
};

// INVALID_ARGUMENT for a letter not in `letters` (the message lists them) or a format that ends
// inside a field.
Result<std::vector<FormatItem>> ParseFormatSpec(const std::string& format,
                                                std::string_view letters);

// Appends `v` in a column of `width` (0: as is), cut to fit.
void AppendColumn(std::string& out, std::string_view v, size_t width, bool right);

// One line, each field's text from `value(letter)`, appended to `out` with its newline; sinfo
// drops trailing blanks (`trim`), squeue keeps them.
void RenderLine(const std::vector<FormatItem>& items,
                const std::function<std::string(char letter)>& value, bool trim, std::string& out);

// Slurm's lists of named fields (sacct -o, sshare -o, sacctmgr format=): "Name,Name%WIDTH",
// names case-insensitive. `find` gives a name's field (nullopt: not one); a width of 0 means the
// field's own. INVALID_ARGUMENT naming `supported` for an unknown name, a bad width (1 to 1000)
// or an empty list.
struct NamedField {
  size_t index = 0;
  size_t width = 0;
};
Result<std::vector<NamedField>> ParseNamedFields(
    const std::string& spec, const std::function<std::optional<size_t>(const std::string&)>& find,
    const std::string& supported);

}  // namespace muster::cli
