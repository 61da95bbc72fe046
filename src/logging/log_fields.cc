#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "muster/logging/logging.h"

namespace muster {
namespace {

bool KeyChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

bool Digits(std::string_view v) {
  return !v.empty() && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
}
// A name as the config and passwd allow them: letters, digits, '.', '_', '-', '@'.
bool Name(std::string_view v) {
  return !v.empty() && std::all_of(v.begin(), v.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
           c == '@';
  });
}

// The fields lifted, each with the shape its value must have: a job (42, or an array task's
// 42_7), its step, a node, a user or account, a uid, an epoch. Other key=value text in a message
// stays text: it may be anyone's.
bool Lifted(std::string_view key, std::string_view v) {
  if (key == "job") {
    const size_t u = v.find('_');
    return u == std::string_view::npos ? Digits(v)
                                       : Digits(v.substr(0, u)) && Digits(v.substr(u + 1));
  }
  if (key == "step" || key == "uid" || key == "epoch") return Digits(v);
  if (key == "node" || key == "user" || key == "account" || key == "partition") return Name(v);
  return false;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> LogFields(std::string_view m) {
  constexpr size_t kMaxFields = 16, kMaxValue = 128, kMaxKey = 32;
  std::vector<std::pair<std::string, std::string>> out;
  std::vector<std::string> ambiguous;
  size_t i = 0;
  while (i < m.size() && out.size() < kMaxFields) {
    // The fields are the message's head, written by us: what a user chose comes quoted ('...')
    // or after a colon ("job=7 node=gpu1 launch failed: ..."), so the first quote that opens a
    // word, or a ": " once a field was read, ends them.
    const bool word_start = i == 0 || m[i - 1] == ' ' || m[i - 1] == '(';
    if ((m[i] == '\'' || m[i] == '"') && word_start) break;
    if (m[i] == ':' && i + 1 < m.size() && m[i + 1] == ' ' && !out.empty()) break;
    if (!word_start || !(m[i] >= 'a' && m[i] <= 'z')) {
      ++i;
      continue;
    }
    size_t k = i;
    while (k < m.size() && KeyChar(m[k]) && k - i < kMaxKey) ++k;
    if (k >= m.size() || m[k] != '=') {
      i = k;
      continue;
    }
    std::string key(m.substr(i, k - i));
    size_t end = k + 1;
    while (end < m.size() && m[end] != ' ') ++end;
    std::string value(m.substr(k + 1, end - k - 1));
    i = end;
    // "job=7:" or "node=gpu1," as prose writes them (a colon there ends the fields too).
    bool colon = false;
    while (!value.empty() && (value.back() == ',' || value.back() == ';' || value.back() == ':' ||
                              value.back() == '.')) {
      colon = colon || value.back() == ':';
      value.pop_back();
    }
    if (value.size() <= kMaxValue && Lifted(key, value)) {
      // A key given twice with two values says nothing for sure: neither is kept.
      auto same =
          std::find_if(out.begin(), out.end(), [&](const auto& f) { return f.first == key; });
      if (same == out.end()) {
        out.emplace_back(std::move(key), std::move(value));
      } else if (same->second != value) {
        ambiguous.push_back(key);
      }
    }
    if (colon && !out.empty()) break;
  }
  for (const std::string& key : ambiguous) {
    out.erase(std::remove_if(out.begin(), out.end(), [&](const auto& f) { return f.first == key; }),
              out.end());
  }
  return out;
}

}  // namespace muster
