#include "format_spec.h"

#include <algorithm>

#include "muster/common/strings.h"

namespace muster::cli {

Result<std::vector<FormatItem>> ParseFormatSpec(const std::string& fmt, std::string_view letters) {
  std::vector<FormatItem> items;
  auto literal = [&](char c) {
    if (items.empty() || items.back().letter) items.emplace_back();
    items.back().literal += c;
  };
  for (size_t i = 0; i < fmt.size();) {
    if (fmt[i] != '%') {
      literal(fmt[i++]);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '%') {
      literal('%');
      i += 2;
      continue;
    }
    FormatItem f;
    ++i;
    if (i < fmt.size() && fmt[i] == '.') {
      f.right = true;
      ++i;
    }
    while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') {
      f.width = f.width * 10 + static_cast<size_t>(fmt[i++] - '0');
      if (f.width > 100'000) return InvalidArgument("format '" + fmt + "': field too wide");
    }
    if (i >= fmt.size()) return InvalidArgument("format '" + fmt + "' ends inside a field");
    f.letter = fmt[i++];
    if (letters.find(f.letter) == std::string_view::npos) {
      std::string known;
      for (char c : letters) known += std::string(known.empty() ? "" : " ") + "%" + c;
      return InvalidArgument(std::string("format field %") + f.letter +
                             " is not supported (supported: " + known + ")");
    }
    items.push_back(f);
  }
  return items;
}

void AppendColumn(std::string& out, std::string_view v, size_t width, bool right) {
  // Another user's job name, path or reason is shown, never obeyed by the terminal.
  std::string escaped;
  if (std::any_of(v.begin(), v.end(), [](char c) {
        const auto b = static_cast<unsigned char>(c);
        return b < 0x20 || b >= 0x7f;
      })) {
    escaped = Printable(v);
    v = escaped;
  }
  if (width == 0) {
    out.append(v);
    return;
  }
  if (v.size() > width) v = v.substr(0, width);
  if (right) out.append(width - v.size(), ' ');
  out.append(v);
  if (!right) out.append(width - v.size(), ' ');
}

void RenderLine(const std::vector<FormatItem>& items, const std::function<std::string(char)>& value,
                bool trim, std::string& out) {
  const size_t start = out.size();
  for (const FormatItem& f : items) {
    if (!f.letter) {
      out += f.literal;
      continue;
    }
    AppendColumn(out, value(f.letter), f.width, f.right);
  }
  if (trim) {
    while (out.size() > start && out.back() == ' ') out.pop_back();
  }
  out += '\n';
}

Result<std::vector<NamedField>> ParseNamedFields(
    const std::string& spec, const std::function<std::optional<size_t>(const std::string&)>& find,
    const std::string& supported) {
  std::vector<NamedField> out;
  for (std::string item : Split(spec, ',', true)) {
    NamedField f;
    if (const size_t pct = item.find('%'); pct != std::string::npos) {
      auto w = ParseUint(item.substr(pct + 1));
      if (!w || *w == 0 || *w > 1000) return InvalidArgument("bad width in format field " + item);
      f.width = static_cast<size_t>(*w);
      item.resize(pct);
    }
    auto index = find(item);
    if (!index) {
      return InvalidArgument("unknown format field '" + item + "' (supported: " + supported + ")");
    }
    f.index = *index;
    out.push_back(f);
  }
  if (out.empty()) return InvalidArgument("the format lists no fields");
  return out;
}

}  // namespace muster::cli
