#include "muster/common/strings.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <limits>
#include <random>

namespace muster {

std::vector<std::string> Split(std::string_view s, char sep, bool skip_empty) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    std::string_view part = s.substr(start, pos == std::string_view::npos ? s.npos : pos - start);
    if (!(skip_empty && part.empty())) out.emplace_back(part);
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

std::string Join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string ToUpper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

std::optional<uint64_t> ParseUint(std::string_view s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

std::optional<int64_t> ParseInt(std::string_view s) {
  bool neg = !s.empty() && s.front() == '-';
  if (neg) s.remove_prefix(1);
  auto u = ParseUint(s);
  if (!u || *u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return neg ? -static_cast<int64_t>(*u) : static_cast<int64_t>(*u);
}

void AppendJsonQuoted(std::string& out, std::string_view s) {
  out += '"';
  size_t plain = 0;  // start of the run of characters that need no escape
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + plain, i - plain);
    plain = i + 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default: {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      }
    }
  }
  out.append(s.data() + plain, s.size() - plain);
  out += '"';
}

std::string JsonQuote(std::string_view s) {
  std::string out;
  AppendJsonQuoted(out, s);
  return out;
}

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  size_t got = 0;
  if (fd >= 0) {
    while (got < bytes) {
      ssize_t n = ::read(fd, raw.data() + got, bytes - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  if (got < bytes) {  // no /dev/urandom: fall back to the library's random device
    std::random_device rd;
    for (auto& c : raw) c = static_cast<char>(rd());
  }
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(bytes * 2);
  for (unsigned char c : raw) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  // Through a volatile, so the compiler cannot turn the loop into an early-exit comparison.
  volatile unsigned char result = diff;
  return result == 0;
}

size_t FindInvalidUtf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;  // a continuation byte, an overlong lead (0xc0, 0xc1) or past 0xf4
    }
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return i;
    i += len;
  }
  return std::string_view::npos;
}

void AppendPrintable(std::string& out, std::string_view s) {
  size_t plain = 0;  // start of the run that needs no escape
  auto escape = [&](size_t at, size_t len, unsigned char c) {
    out.append(s.data() + plain, at - plain);
    plain = at + len;
    switch (c) {
      case '\n':
        out += "\\n";
        return;
      case '\r':
        out += "\\r";
        return;
      case '\t':
        out += "\\t";
        return;
      default:
        for (size_t k = 0; k < len; ++k) {
          static constexpr char kDigits[] = "0123456789abcdef";
          const auto b = static_cast<unsigned char>(s[at + k]);
          out += "\\x";
          out += kDigits[b >> 4];
          out += kDigits[b & 15];
        }
    }
  };
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) escape(i, 1, c);
      ++i;
      continue;
    }
    const size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;  // as its lead byte says
    if (i + len > s.size() || FindInvalidUtf8(s.substr(i, len)) != std::string_view::npos) {
      escape(i, 1, c);  // not UTF-8: the byte alone
      ++i;
      continue;
    }
    // U+0080..U+009F (C1 controls: 8-bit CSI and the like) as escapes too.
    if (c == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0) escape(i, 2, c);
    i += len;
  }
  out.append(s.data() + plain, s.size() - plain);
}

std::string Printable(std::string_view s) {
  std::string out;
  AppendPrintable(out, s);
  return out;
}

}  // namespace muster
