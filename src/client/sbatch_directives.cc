// A batch script's #SBATCH lines: the words of each, quoted as a shell would split them, up to
// the first command (as Slurm stops reading there).
#include <string>
#include <string_view>
#include <vector>

#include "muster/client/submit_options.h"
#include "muster/common/strings.h"

namespace muster::client {

Result<std::vector<std::string>> SplitWords(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < line.size()) {
        cur += line[++i];
      } else {
        cur += c;
      }
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < line.size()) {
      cur += line[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) out.push_back(cur);
      cur.clear();
      in_word = false;
    } else if (c == '#' && !in_word) {
      break;  // a comment after the directive
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (quote) return InvalidArgument("unterminated quote");
  if (in_word) out.push_back(cur);
  return out;
}

Result<std::vector<Directive>> ParseDirectives(const std::string& script) {
  std::vector<Directive> out;
  std::vector<std::string> lines = Split(script, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view l = Trim(lines[i]);
    if (i == 0 && StartsWith(l, "#!")) continue;
    if (l.empty()) continue;
    if (l[0] != '#') break;  // Slurm stops reading directives at the first command
    if (!StartsWith(l, "#SBATCH")) continue;
    std::string rest(l.substr(7));
    if (!rest.empty() && rest[0] != ' ' && rest[0] != '\t') continue;  // e.g. #SBATCHX
    auto words = SplitWords(rest);
    if (!words.ok()) {
      return InvalidArgument("script line " + std::to_string(i + 1) + ": " +
                             words.status().message());
    }
    out.push_back({static_cast<int>(i + 1), std::move(*words)});
  }
  return out;
}

}  // namespace muster::client
