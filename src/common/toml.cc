#include "muster/common/toml.h"

#include <algorithm>

#include "muster/common/strings.h"

namespace muster {

namespace {

// toml++ 3.3 (Debian 12) reaches undefined behaviour (a __builtin_unreachable in its Unicode
// whitespace test) when a non-ASCII character stands where whitespace may be: outside strings
// and comments, or first after a line-ending backslash in a multi-line string. Valid TOML has
// non-ASCII characters only inside strings and comments, so those places are refused before the
// parser sees them (found by fuzzing; tests/fuzz/corpus/config). Returns the offset, or npos.
size_t FindUnsafeNonAscii(std::string_view t) {
  enum { kNormal, kComment, kBasic, kLiteral, kMultiBasic, kMultiLiteral } state = kNormal;
  bool trimming = false;  // after a line-ending backslash in a multi-line basic string
  const size_t n = t.size();
  auto starts = [&](size_t i, std::string_view what) { return t.substr(i, what.size()) == what; };
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(t[i]);
    switch (state) {
      case kNormal:
        if (c >= 0x80) return i;
        if (c == '#') {
          state = kComment;
        } else if (starts(i, "\"\"\"")) {
          state = kMultiBasic;
          i += 2;
        } else if (c == '"') {
          state = kBasic;
        } else if (starts(i, "'''")) {
          state = kMultiLiteral;
          i += 2;
        } else if (c == '\'') {
          state = kLiteral;
        }
        break;
      case kComment:
        if (c == '\n') state = kNormal;
        break;
      case kBasic:
        if (c == '\\') {
          ++i;
        } else if (c == '"' || c == '\n') {
          state = kNormal;
        }
        break;
      case kLiteral:
        if (c == '\'' || c == '\n') state = kNormal;
        break;
      case kMultiBasic:
        if (trimming) {
          if (c == ' ' || c == '\t' || c == '\n' || c == '\r') break;
          if (c >= 0x80) return i;
          trimming = false;
        }
        if (c == '\\') {
          // A backslash, optional blanks, then the end of the line: what follows is trimmed.
          // (The parser tests what follows a backslash for whitespace too: a non-ASCII
          // character there is refused, as it is no valid escape anyway.)
          size_t j = i + 1;
          while (j < n && (t[j] == ' ' || t[j] == '\t' || t[j] == '\r')) ++j;
          if (j < n && static_cast<unsigned char>(t[j]) >= 0x80) return j;
          if (j < n && t[j] == '\n') {
            trimming = true;
            i = j;
          } else {
            ++i;
          }
        } else if (starts(i, "\"\"\"")) {
          state = kNormal;
          i += 2;
        }
        break;
      case kMultiLiteral:
        if (starts(i, "'''")) {
          state = kNormal;
          i += 2;
        }
        break;
    }
  }
  return std::string_view::npos;
}

size_t LineOf(const std::string& text, size_t offset) {
  return 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + offset, '\n'));
}

// The text with every non-ASCII character replaced by U+0500, one the parser's whitespace test
// answers safely: same lines, same structure.
std::string WithSafeNonAscii(const std::string& text) {
  std::string out;
  out.reserve(text.size() * 2);
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if ((c & 0xc0) != 0x80) {
      out += "\xd4\x80";  // a lead byte: one replacement per character
    }
  }
  return out;
}

Result<toml::table> Parse(const std::string& text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return InvalidArgument(source + ":" + std::to_string(e.source().begin.line) + ": " +
                           std::string(e.description()));
  }
}

}  // namespace

Result<toml::table> ParseToml(const std::string& text, const std::string& source) {
  if (size_t bad = FindInvalidUtf8(text); bad != std::string::npos) {
    return InvalidArgument(source + ":" + std::to_string(LineOf(text, bad)) +
                           ": not valid UTF-8 (byte " + std::to_string(bad) + ")");
  }
  // First the structure, with characters the parser handles safely: an invalid document is
  // refused here, before the parser can meet a troublesome character where whitespace may be.
  // A valid one has non-ASCII characters only in strings and comments, where the scan below
  // knows where they are.
  if (std::any_of(text.begin(), text.end(),
                  [](char c) { return static_cast<unsigned char>(c) >= 0x80; })) {
    MUSTER_RETURN_IF_ERROR(Parse(WithSafeNonAscii(text), source).status());
  }
  if (size_t bad = FindUnsafeNonAscii(text); bad != std::string::npos) {
    return InvalidArgument(source + ":" + std::to_string(LineOf(text, bad)) +
                           ": a non-ASCII character where TOML allows only ASCII (outside "
                           "strings and comments, or first after a line-ending backslash)");
  }
  return Parse(text, source);
}

}  // namespace muster
