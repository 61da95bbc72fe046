#include "slurm_conf_syntax.h"

#include <sstream>
#include <utility>

#include "muster/common/strings.h"

namespace muster::client {

const Setting* ConfLine::Find(const std::string& lower) const {
  for (const Setting& s : settings) {
    if (s.lower == lower) return &s;
  }
  return nullptr;
}

Result<std::vector<ConfLine>> ParseConf(const std::string& text, const std::string& file) {
  std::vector<ConfLine> lines;
  std::istringstream in(text);
  std::string raw;
  int number = 0;
  std::string pending;
  int first = 0;
  while (std::getline(in, raw)) {
    ++number;
    // '#' outside quotes starts a comment.
    bool quoted = false;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '"') quoted = !quoted;
      if (raw[i] == '#' && !quoted) {
        raw.resize(i);
        break;
      }
    }
    std::string_view t = Trim(raw);
    if (pending.empty()) first = number;
    // "Include FILE" (no '='): kept as one setting, which the importer names as not followed.
    if (pending.empty() && t.size() > 8 && EqualsIgnoreCase(t.substr(0, 8), "include ")) {
      lines.push_back(
          ConfLine{file, first, {Setting{"Include", "include", std::string(Trim(t.substr(8)))}}});
      continue;
    }
    if (!t.empty() && t.back() == '\\') {
      pending += std::string(t.substr(0, t.size() - 1)) + " ";
      continue;
    }
    pending += std::string(t);
    if (Trim(pending).empty()) {
      pending.clear();
      continue;
    }
    ConfLine line{file, first, {}};
    std::string word;
    bool in_quotes = false;
    auto flush = [&]() -> Status {
      if (word.empty()) return Status::Ok();
      const size_t eq = word.find('=');
      if (eq == std::string::npos || eq == 0) {
        return InvalidArgument(file + ":" + std::to_string(first) + ": expected KEY=VALUE, got '" +
                               word.substr(0, 80) + "'");
      }
      Setting s{word.substr(0, eq), ToLower(word.substr(0, eq)), word.substr(eq + 1)};
      line.settings.push_back(std::move(s));
      word.clear();
      return Status::Ok();
    };
    for (char ch : pending) {
      if (ch == '"') {
        in_quotes = !in_quotes;
      } else if ((ch == ' ' || ch == '\t') && !in_quotes) {
        MUSTER_RETURN_IF_ERROR(flush());
      } else {
        word += ch;
      }
    }
    if (in_quotes) {
      return InvalidArgument(file + ":" + std::to_string(first) + ": a quote is not closed");
    }
    MUSTER_RETURN_IF_ERROR(flush());
    pending.clear();
    if (line.settings.empty()) continue;  // only quotes, nothing said
    lines.push_back(std::move(line));
  }
  return lines;
}

// "a[1-3,5],b,set1" -> "a[1-3,5]", "b", "set1": commas inside brackets belong to a hostlist.
std::vector<std::string> SplitOutsideBrackets(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char ch : s) {
    if (ch == '[') ++depth;
    if (ch == ']') --depth;
    if (ch == ',' && depth == 0) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

}  // namespace muster::client
