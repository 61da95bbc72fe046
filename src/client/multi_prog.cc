#include "muster/client/multi_prog.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "muster/common/strings.h"

namespace muster::client {
namespace {

constexpr uint32_t kMaxRank = 1u << 24;
constexpr size_t kMaxCommandBytes = 2u << 20;

using Piece = MultiProgConfig::Piece;
using Word = MultiProgConfig::Word;

// A line split into words: white space separates them, single quotes keep what they enclose as
// it is (no %t or %o), double quotes only group. False for an unterminated quote.
bool SplitLine(const std::string& line, std::vector<Word>* words) {
  Word word;
  bool in_word = false;
  char quote = 0;
  auto text = [&](char c) {
    if (word.empty() || word.back().fill) word.push_back({});
    word.back().text += c;
  };
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (quote == '"' && c == '%' && i + 1 < line.size() &&
                 (line[i + 1] == 't' || line[i + 1] == 'o')) {
        word.push_back({"", line[++i]});
      } else {
        text(c);
      }
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      if (in_word) words->push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '%' && i + 1 < line.size() && (line[i + 1] == 't' || line[i + 1] == 'o')) {
      word.push_back({"", line[++i]});
    } else {
      text(c);
    }
  }
  if (quote) return false;
  if (in_word) words->push_back(std::move(word));
  return true;
}

std::string Flatten(const Word& w) {
  std::string s;
  for (const Piece& p : w) s += p.fill ? std::string("%") + p.fill : p.text;
  return s;
}

}  // namespace

Result<MultiProgConfig> ParseMultiProg(const std::string& text, const std::string& file) {
  MultiProgConfig c;
  c.file = file;
  const std::vector<std::string> lines = Split(text, '\n');
  bool saw_rest = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    const int number = static_cast<int>(i + 1);
    auto bad = [&](const std::string& why) {
      return InvalidArgument("--multi-prog " + file + " line " + std::to_string(number) + ": " +
                             why);
    };
    const std::string_view trimmed = Trim(lines[i]);
    if (trimmed.empty() || trimmed[0] == '#') continue;
    MultiProgConfig::Line line;
    line.number = number;
    if (!SplitLine(lines[i], &line.words)) return bad("a quote is not closed");
    if (saw_rest) return bad("'*' must be the last line (it stands for every rank not named)");
    const std::string ranks = Flatten(line.words.front());
    line.words.erase(line.words.begin());
    if (line.words.empty()) return bad("no program for ranks " + ranks);
    if (ranks == "*") {
      line.rest = saw_rest = true;
    } else {
      for (const std::string& item : Split(ranks, ',')) {
        const size_t dash = item.find('-');
        auto lo = ParseUint(item.substr(0, dash));
        auto hi = dash == std::string::npos ? lo : ParseUint(item.substr(dash + 1));
        if (!lo || !hi || *hi >= kMaxRank) {
          return bad("'" + ranks + "' is not a list of task ranks (such as 0-3,5) or '*'");
        }
        if (*lo > *hi)
          return bad("the range " + item + " goes down (write it " + std::to_string(*hi) + "-" +
                     std::to_string(*lo) + ")");
        line.ranks.push_back({static_cast<uint32_t>(*lo), static_cast<uint32_t>(*hi)});
      }
    }
    c.lines.push_back(std::move(line));
  }
  if (c.lines.empty()) return InvalidArgument("--multi-prog " + file + ": no line names a task");
  return c;
}

Result<MultiProgConfig> ReadMultiProg(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus("--multi-prog: cannot open " + path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument("--multi-prog: " + path + " is not a file");
  }
  std::string text;
  char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) {
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxMultiProgBytes) {
      ::close(fd);
      return InvalidArgument("--multi-prog: " + path + " is larger than 1 MiB");
    }
  }
  ::close(fd);
  return ParseMultiProg(text, path);
}

Result<std::vector<std::vector<std::string>>> MultiProgCommands(
    const MultiProgConfig& config, uint32_t ntasks, const std::vector<std::string>& extra_args) {
  const std::string& file = config.file;
  // Which line names each rank (-1: none yet), and each rank's offset within its line.
  std::vector<int> line_of(ntasks, -1);
  std::vector<uint32_t> offset(ntasks, 0);
  for (size_t l = 0; l < config.lines.size(); ++l) {
    const auto& line = config.lines[l];
    uint32_t next = 0;
    auto name = [&](uint32_t rank) -> Status {
      if (rank >= ntasks) {
        return InvalidArgument("--multi-prog " + file + " line " + std::to_string(line.number) +
                               " names task " + std::to_string(rank) + ", but the step has " +
                               std::to_string(ntasks) + " task(s) (0-" +
                               std::to_string(ntasks - 1) + ")");
      }
      if (line_of[rank] >= 0) {
        return InvalidArgument("--multi-prog " + file + " line " + std::to_string(line.number) +
                               " names task " + std::to_string(rank) + ", which line " +
                               std::to_string(config.lines[line_of[rank]].number) +
                               " names already");
      }
      line_of[rank] = static_cast<int>(l);
      offset[rank] = next++;
      return Status::Ok();
    };
    if (line.rest) {
      for (uint32_t r = 0; r < ntasks; ++r) {
        if (line_of[r] < 0) MUSTER_RETURN_IF_ERROR(name(r));
      }
      continue;
    }
    for (const auto& [lo, hi] : line.ranks) {
      if (hi >= ntasks) MUSTER_RETURN_IF_ERROR(name(hi));  // says which line goes too far
      for (uint32_t r = lo; r <= hi; ++r) MUSTER_RETURN_IF_ERROR(name(r));
    }
  }
  std::vector<std::vector<std::string>> commands(ntasks);
  size_t bytes = 0;
  for (uint32_t r = 0; r < ntasks; ++r) {
    if (line_of[r] < 0) {
      return InvalidArgument("--multi-prog " + file +
                             ": no executable program specified for task " + std::to_string(r) +
                             " (no line names it; '*' on the last line " +
                             "stands for every task not named)");
    }
    for (const Word& w : config.lines[line_of[r]].words) {
      std::string arg;
      for (const Piece& p : w) {
        arg += p.fill == 't'   ? std::to_string(r)
               : p.fill == 'o' ? std::to_string(offset[r])
                               : p.text;
      }
      bytes += arg.size() + 1;
      commands[r].push_back(std::move(arg));
    }
    for (const std::string& a : extra_args) {
      bytes += a.size() + 1;
      commands[r].push_back(a);
    }
    if (bytes > kMaxCommandBytes) {
      return InvalidArgument("--multi-prog " + file + ": the tasks' command lines come to more " +
                             "than 2 MiB");
    }
  }
  return commands;
}

}  // namespace muster::client
