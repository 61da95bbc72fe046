// srun --multi-prog: a configuration file that gives each task rank its own command, as in
// Slurm's MULTIPLE PROGRAM CONFIGURATION. srun reads it (the file is the user's, read with the
// user's rights), checks it and sends each node the command of each of its tasks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "muster/common/status.h"

namespace muster::client {

struct MultiProgConfig {
  // One line's word: text, with %t (the task's rank) and %o (its offset within the line's ranks)
  // to fill in outside single quotes.
  struct Piece {
    std::string text;
    char fill = 0;  // 't' or 'o': this piece is that value, not text
  };
  using Word = std::vector<Piece>;
  struct Line {
    int number = 0;                                    // in the file, from 1
    bool rest = false;                                 // "*": every rank no other line names
    std::vector<std::pair<uint32_t, uint32_t>> ranks;  // inclusive ranges, as written
    std::vector<Word> words;                           // the program, then its arguments
  };
  std::string file;  // for messages
  std::vector<Line> lines;
};

// A file larger than this is refused (srun reads it whole).
inline constexpr size_t kMaxMultiProgBytes = 1u << 20;

// Parses the file's text: lines "RANKS PROGRAM [ARGS...]", fields separated by white space,
// RANKS a comma-separated list of N and N-M (lowest first) or "*" (on the last line), words in
// single quotes taken as they are, double quotes grouping words, lines whose first character is
// '#' and blank lines skipped. INVALID_ARGUMENT naming the file and line for anything else.
Result<MultiProgConfig> ParseMultiProg(const std::string& text, const std::string& file);

// Reads and parses `path` (at most kMaxMultiProgBytes, a regular file).
Result<MultiProgConfig> ReadMultiProg(const std::string& path);

// The command line of each of a step's `ntasks` ranks, in rank order: its line's words with %t
// and %o filled in, then `extra_args` (what followed the file on srun's command line). Every rank
// must be named exactly once, and none from ntasks on: INVALID_ARGUMENT naming the line (or the
// rank no line names) otherwise. The commands may hold 2 MiB at most in all.
Result<std::vector<std::vector<std::string>>> MultiProgCommands(
    const MultiProgConfig& config, uint32_t ntasks, const std::vector<std::string>& extra_args);

}  // namespace muster::client
