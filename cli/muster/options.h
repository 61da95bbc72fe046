// How commands read their dash options: getopt_long with the words kept in order, so that an
// option may stand before, between or after them, and an error names the whole word it is in.
#pragma once

#include <getopt.h>

#include <functional>
#include <optional>
#include <string>

namespace muster::cli {

// getopt_long over words[1..count): words[0] is the command's name, or the word before a
// subcommand's options. "-:" leads the short options, so a word comes back in its place rather
// than moved to the end, and an option without its value as ':' rather than '?'.
class OptionReader {
 public:
  static constexpr int kWord = 1;  // getopt_long's return for a word under "-"

  OptionReader(int count, char** words, const char* shorts, const struct option* longs);

  // The next option's letter (its value in optarg); kWord for a word; '?' for a dash word that
  // is no option here (not in the tables, "-" alone, "--" and a dash word after it); ':' for an
  // option without its value; -1 after the last word. getopt stops at "--", so the words from
  // there on come back one by one, each as what it looks like.
  int Next();
  // The whole word Next() read: "-xh" for its x, "--reason" that lacks its value.
  std::string Word() const { return words_[at_]; }
  // True the first time it is asked of a word only: a cluster like -xy comes back once per
  // letter, and a command that keeps the dash words it does not know keeps that one once.
  bool Once();

 private:
  const int count_;
  char** const words_;
  const std::string shorts_;
  const struct option* const longs_;
  int at_ = 0;            // the word Next() read last
  int next_ = 1;          // the word getopt reads next (its optind after the last read)
  int kept_ = 0;          // the word Once() last said true of
  bool stopped_ = false;  // getopt is done: the words left are read here
};

// The options of a command whose only ones are --json and -h/--help, which prints `help` and
// ends the command (kExitOk). Each word goes to `word`, in order, which may end the command with
// an exit code; without `word` a word is refused, as is any dash word that is no option:
// Usage(cmd, refusal + " '" + the whole word + "'"). std::nullopt when the command goes on.
std::optional<int> ReadJsonOption(
    const std::string& cmd, const std::string& refusal, int argc, char** argv, const char* help,
    bool* json, const std::function<std::optional<int>(const std::string&)>& word = nullptr);

}  // namespace muster::cli
