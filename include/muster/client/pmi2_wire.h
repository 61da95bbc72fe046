// PMI-2's wire format, as MPICH's and MVAPICH's PMI-2 clients and Slurm's mpi/pmi2 write it: a
// message is its length in 6 characters (decimal, padded with spaces), then that many bytes of
// "cmd=NAME;key=value;key=value;". Values hold no ';' (PMI-2 has no escape that both MPICH and
// Slurm agree on). Used by PmiServer; pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace muster::client::pmi2 {

inline constexpr size_t kLengthChars = 6;
// More fields than any command but spawn (not served) has, by far.
inline constexpr size_t kMaxFields = 512;

struct Command {
  std::string cmd;
  std::vector<std::pair<std::string, std::string>> fields;  // in order, after cmd
  // The first value of `key`, or null.
  const std::string* Find(std::string_view key) const;
};

// The length a 6-character prefix announces ("    42", "42    "); nullopt when it is not one.
std::optional<size_t> ParseLength(std::string_view prefix);
// "cmd=kvs-put;key=a;value=b;" (the last ';' optional, empty fields skipped, a field without
// '=' an empty value); nullopt when it does not start with cmd=NAME, a field has an empty key,
// or there are more than kMaxFields fields.
std::optional<Command> ParseCommand(std::string_view body);
// The message on the wire: Slurm's form, the length left-aligned ("42    cmd=...").
std::string Frame(std::string_view body);

}  // namespace muster::client::pmi2
