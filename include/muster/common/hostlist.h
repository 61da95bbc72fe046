// Slurm-style host list expressions: "gpu[001-004,010],login1" <-> a list of names.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "muster/common/status.h"

namespace muster {

// Expands an expression into names, in order. Ranges keep their zero padding ("gpu[01-03]" ->
// gpu01 gpu02 gpu03). Returns INVALID_ARGUMENT naming the problem for a malformed expression, and
// RESOURCE_EXHAUSTED beyond max_names (a guard against "n[0-999999999]").
Result<std::vector<std::string>> ExpandHostlist(std::string_view expr,
                                                size_t max_names = 1'000'000);

// The shortest Slurm form of a list of names: node1,node2,node3,node5 -> node[1-3,5]. Names are
// grouped by prefix and zero-padding width; the order of first appearance of each group is kept.
std::string CompressHostlist(const std::vector<std::string>& names);

// Slurm's repeated-count form: {2,2,2,1} -> "2(x3),1".
std::string CompressCounts(const std::vector<uint32_t>& counts);

}  // namespace muster
