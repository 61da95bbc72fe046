#include "muster/common/hostlist.h"

#include <algorithm>
#include <map>
#include <set>

#include "muster/common/strings.h"

namespace muster {
namespace {

struct Range {
  uint64_t lo, hi;
  size_t width;  // zero-padding width, 0 for none
};

// Parses "1-3,05,7-9" (the inside of one bracket).
Result<std::vector<Range>> ParseRanges(std::string_view body, std::string_view expr) {
  std::vector<Range> out;
  for (const std::string& part : Split(body, ',')) {
    if (part.empty())
      return InvalidArgument("empty range in host list '" + std::string(expr) + "'");
    size_t dash = part.find('-');
    std::string lo_s = part.substr(0, dash);
    std::string hi_s = dash == std::string::npos ? lo_s : part.substr(dash + 1);
    auto lo = ParseUint(lo_s);
    auto hi = ParseUint(hi_s);
    if (!lo || !hi) {
      return InvalidArgument("bad range '" + part + "' in host list '" + std::string(expr) + "'");
    }
    if (*hi < *lo) {
      return InvalidArgument("range '" + part + "' goes backwards in host list '" +
                             std::string(expr) + "'");
    }
    size_t width = (lo_s.size() > 1 && lo_s[0] == '0') || (hi_s.size() > 1 && hi_s[0] == '0')
                       ? std::max(lo_s.size(), hi_s.size())
                       : 0;
    out.push_back({*lo, *hi, width});
  }
  return out;
}

std::string Pad(uint64_t v, size_t width) {
  std::string s = std::to_string(v);
  if (s.size() < width) s.insert(0, width - s.size(), '0');
  return s;
}

// Expands one comma-free item that may hold several bracket groups: rack[1-2]-n[01-02].
Status ExpandItem(std::string_view item, std::string_view expr, size_t max_names,
                  std::vector<std::string>* out) {
  std::vector<std::string> partial{""};
  size_t i = 0;
  while (i < item.size()) {
    size_t open = item.find('[', i);
    std::string_view literal =
        item.substr(i, open == std::string_view::npos ? item.npos : open - i);
    if (literal.find(']') != std::string_view::npos) {
      return InvalidArgument("unbalanced ']' in host list '" + std::string(expr) + "'");
    }
    for (auto& p : partial) p.append(literal);
    if (open == std::string_view::npos) break;
    size_t close = item.find(']', open);
    if (close == std::string_view::npos) {
      return InvalidArgument("missing ']' in host list '" + std::string(expr) + "'");
    }
    MUSTER_ASSIGN_OR_RETURN(auto ranges,
                            ParseRanges(item.substr(open + 1, close - open - 1), expr));
    std::vector<std::string> next;
    for (const auto& p : partial) {
      for (const Range& r : ranges) {
        if (r.hi - r.lo >= max_names || next.size() + (r.hi - r.lo) >= max_names) {
          return ResourceExhausted("host list '" + std::string(expr) + "' names more than " +
                                   std::to_string(max_names) + " hosts");
        }
        for (uint64_t v = r.lo; v <= r.hi; ++v) next.push_back(p + Pad(v, r.width));
      }
    }
    partial = std::move(next);
    i = close + 1;
  }
  for (auto& p : partial) {
    if (p.empty())
      return InvalidArgument("empty host name in host list '" + std::string(expr) + "'");
    out->push_back(std::move(p));
  }
  if (out->size() > max_names) {
    return ResourceExhausted("host list '" + std::string(expr) + "' names more than " +
                             std::to_string(max_names) + " hosts");
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> ExpandHostlist(std::string_view expr, size_t max_names) {
  std::vector<std::string> out;
  std::string_view s = Trim(expr);
  if (s.empty()) return out;
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return InvalidArgument("host list has a control character (byte " +
                             std::to_string(static_cast<unsigned char>(c)) + ")");
    }
  }
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    char c = i < s.size() ? s[i] : ',';
    if (c == '[') {
      if (++depth > 1)
        return InvalidArgument("nested '[' in host list '" + std::string(expr) + "'");
    } else if (c == ']') {
      if (--depth < 0)
        return InvalidArgument("unbalanced ']' in host list '" + std::string(expr) + "'");
    } else if (c == ',' && depth == 0) {
      std::string_view item = Trim(s.substr(start, i - start));
      if (item.empty())
        return InvalidArgument("empty item in host list '" + std::string(expr) + "'");
      MUSTER_RETURN_IF_ERROR(ExpandItem(item, expr, max_names, &out));
      start = i + 1;
    } else if (c == ' ' || c == '\t') {
      // Slurm accepts whitespace-free lists only; be strict so typos show up.
      if (depth > 0)
        return InvalidArgument("space inside brackets in host list '" + std::string(expr) + "'");
    }
  }
  if (depth != 0) return InvalidArgument("missing ']' in host list '" + std::string(expr) + "'");
  return out;
}

std::string CompressHostlist(const std::vector<std::string>& names) {
  // Group key: prefix + padding width (0 = unpadded). Names without a trailing number stand alone.
  struct Group {
    std::string prefix;
    size_t width;
    std::vector<uint64_t> nums;
  };
  std::vector<Group> groups;
  std::vector<std::pair<int, std::string>> order;  // (group index or -1, plain name)
  std::map<std::pair<std::string, size_t>, size_t> index;
  auto split = [](const std::string& n) {
    size_t d = n.size();
    while (d > 0 && n[d - 1] >= '0' && n[d - 1] <= '9') --d;
    return d;
  };
  // Padded widths seen per prefix: "gpu099" and "gpu100" both belong to the width-3 group.
  std::map<std::string, std::set<size_t>> padded;
  for (const std::string& n : names) {
    size_t d = split(n);
    if (n.size() - d > 1 && n[d] == '0') padded[n.substr(0, d)].insert(n.size() - d);
  }
  for (const std::string& n : names) {
    size_t d = split(n);
    std::string digits = n.substr(d);
    if (digits.empty() || digits.size() > 18) {
      order.emplace_back(-1, n);
      continue;
    }
    size_t width = digits.size() > 1 && digits[0] == '0' ? digits.size() : 0;
    if (width == 0 && padded[n.substr(0, d)].count(digits.size())) width = digits.size();
    auto key = std::make_pair(n.substr(0, d), width);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, groups.size()).first;
      groups.push_back({key.first, width, {}});
      order.emplace_back(static_cast<int>(it->second), "");
    }
    groups[it->second].nums.push_back(*ParseUint(digits));
  }
  std::vector<std::string> parts;
  for (const auto& [gi, plain] : order) {
    if (gi < 0) {
      parts.push_back(plain);
      continue;
    }
    Group& g = groups[static_cast<size_t>(gi)];
    std::sort(g.nums.begin(), g.nums.end());
    g.nums.erase(std::unique(g.nums.begin(), g.nums.end()), g.nums.end());
    if (g.nums.size() == 1) {
      parts.push_back(g.prefix + Pad(g.nums[0], g.width));
      continue;
    }
    std::string body;
    for (size_t i = 0; i < g.nums.size();) {
      size_t j = i;
      while (j + 1 < g.nums.size() && g.nums[j + 1] == g.nums[j] + 1) ++j;
      if (!body.empty()) body += ',';
      body += Pad(g.nums[i], g.width);
      if (j > i) body += "-" + Pad(g.nums[j], g.width);
      i = j + 1;
    }
    parts.push_back(g.prefix + "[" + body + "]");
  }
  return Join(parts, ",");
}

std::string CompressCounts(const std::vector<uint32_t>& counts) {
  std::string out;
  for (size_t i = 0; i < counts.size();) {
    size_t j = i;
    while (j + 1 < counts.size() && counts[j + 1] == counts[i]) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(counts[i]);
    if (j > i) out += "(x" + std::to_string(j - i + 1) + ")";
    i = j + 1;
  }
  return out;
}

}  // namespace muster
