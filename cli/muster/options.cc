#include "options.h"

#include <cstdio>

#include "cli.h"

namespace muster::cli {

OptionReader::OptionReader(int count, char** words, const char* shorts, const struct option* longs)
    : count_(count), words_(words), shorts_(std::string("-:") + shorts), longs_(longs) {
  optind = 0;  // getopt starts afresh: a test runs many commands in one process
  opterr = 0;  // the command words its own errors
}

int OptionReader::Next() {
  at_ = next_;
  if (!stopped_) {
    const int c = getopt_long(count_, words_, shorts_.c_str(), longs_, nullptr);
    if (c != -1) {
      next_ = optind;
      // Under "-", "-" alone comes back as a word: it is a dash word all the same.
      return c == kWord && optarg[0] == '-' ? '?' : c;
    }
    stopped_ = true;  // at the end, or at "--", which getopt skips: at_ is still on it
  }
  if (at_ >= count_) return -1;
  next_ = at_ + 1;
  return words_[at_][0] == '-' ? '?' : kWord;
}

bool OptionReader::Once() {
  if (at_ == kept_) return false;
  kept_ = at_;
  return true;
}

std::optional<int> ReadJsonOption(
    const std::string& cmd, const std::string& refusal, int argc, char** argv, const char* help,
    bool* json, const std::function<std::optional<int>(const std::string&)>& word) {
  const struct option opts[] = {{"json", no_argument, nullptr, 'j'},
                                {"help", no_argument, nullptr, 'h'},
                                {nullptr, 0, nullptr, 0}};
  OptionReader in(argc, argv, "h", opts);
  for (int c; (c = in.Next()) != -1;) {
    if (c == 'j') {
      *json = true;
    } else if (c == 'h') {
      std::fputs(help, stdout);
      return kExitOk;
    } else if (c != OptionReader::kWord || !word) {
      return Usage(cmd, refusal + " '" + in.Word() + "'");
    } else if (std::optional<int> rc = word(in.Word())) {
      return rc;
    }
  }
  return std::nullopt;
}

}  // namespace muster::cli
