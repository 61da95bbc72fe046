// Slurm's config syntax (slurm.conf, gres.conf, topology.conf): KEY=VALUE words separated by
// blanks, '#' to the end of a line, a trailing '\' joining the next line, values optionally in
// double quotes, keys in any case, and "Include FILE" lines. What the words mean is
// slurm_conf_import.cc's business.
#pragma once

#include <string>
#include <vector>

#include "muster/common/status.h"

namespace muster::client {

struct Setting {
  std::string key;    // as written
  std::string lower;  // lowercased, for lookups
  std::string value;
};

// One line (continuations joined), numbered by where it starts.
struct ConfLine {
  std::string file;
  int number = 0;
  std::vector<Setting> settings;  // never empty

  std::string Where() const { return file + ":" + std::to_string(number); }
  const Setting* Find(const std::string& lower) const;
};

// INVALID_ARGUMENT with file and line for a word that is not KEY=VALUE or an unclosed quote.
// An "Include FILE" line comes back as one setting with key "Include".
Result<std::vector<ConfLine>> ParseConf(const std::string& text, const std::string& file);

// "a[1-3,5],b,set1" -> "a[1-3,5]", "b", "set1": commas inside brackets belong to a hostlist.
std::vector<std::string> SplitOutsideBrackets(const std::string& s);

}  // namespace muster::client
