// Small string helpers used across modules.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace muster {

std::vector<std::string> Split(std::string_view s, char sep, bool skip_empty = false);
std::string Join(const std::vector<std::string>& parts, std::string_view sep);
std::string_view Trim(std::string_view s);
bool StartsWith(std::string_view s, std::string_view prefix);
std::string ToLower(std::string_view s);
std::string ToUpper(std::string_view s);
bool EqualsIgnoreCase(std::string_view a, std::string_view b);  // ASCII
// For secrets (credentials): the time taken depends on the lengths only, never on where the
// first difference is.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// Strict unsigned parse: digits only, no sign, no trailing junk, no overflow.
std::optional<uint64_t> ParseUint(std::string_view s);
std::optional<int64_t> ParseInt(std::string_view s);

// Quotes a string as a JSON string literal (with the quotes).
std::string JsonQuote(std::string_view s);
void AppendJsonQuoted(std::string& out, std::string_view s);

// A random 128-bit hex token from /dev/urandom (for credentials and instance ids).
std::string RandomHex(size_t bytes);

// The offset of the first byte that breaks UTF-8 (a bad lead or continuation byte, an overlong
// form, a surrogate, past U+10FFFF, a truncated sequence); npos when the text is valid.
size_t FindInvalidUtf8(std::string_view text);

// Text another user chose (a job name, a path, a reason), made safe to show on a terminal or
// write as one log line: control characters (C0, DEL and C1) become \n, \r, \t or \xNN, and
// bytes that are not UTF-8 become \xNN, so that nothing can end a line, move the cursor or
// restyle the screen. Plain text passes unchanged (and costs no allocation with the Append form).
std::string Printable(std::string_view s);
void AppendPrintable(std::string& out, std::string_view s);

}  // namespace muster
