// sinfo's output grammar over partitions and nodes: the fields of -o (%P %N %t ...) and -O
// (Partition, NodeList, StateLong, ...), sinfo's own layouts, the -S/--sort keys, what makes
// nodes share a row, and the rows' headers and values.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "format_spec.h"
#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/v1/controller.pb.h"

namespace muster::cli {

// A node's CPU layout as sinfo and scontrol show it, from its agent's hwloc totals (1 socket and
// 1 thread per core, and every CPU a core, where it reported none).
uint32_t Sockets(const v1::NodeInfo& n);
uint32_t CoresPerSocket(const v1::NodeInfo& n);
uint32_t ThreadsPerCore(const v1::NodeInfo& n);

// -o/--format, with sinfo's "%all" (every field, '|' between them).
Result<std::vector<FormatItem>> ParseSinfoFormat(std::string format);
// -O/--Format: "Name[:[.][WIDTH][SUFFIX]],..." (names in any case, default width 20 as sinfo's).
Result<std::vector<FormatItem>> ParseSinfoLongFormat(const std::string& format);
// -S/--sort: "[+|-][#]LETTER,..."; each key comes back as its sign, '#' when given, and the
// letter ("+P", "-t", "+#P").
Result<std::vector<std::string>> ParseSinfoSort(const std::string& spec);

// The view the command line asks for, which picks sinfo's own layout.
struct SinfoView {
  bool reasons = false;    // -R
  bool summarize = false;  // -s
  bool node_view = false;  // -N
  bool long_form = false;  // -l
};
// The -o sinfo uses when given neither -o nor -O. "#P" and "#N" stand for the width of the
// widest partition name and node list, which only the rows tell: SinfoFitWidths sets them.
std::string SinfoDefaultFormat(const SinfoView& view);

// One output line: a group of nodes of one partition (one node with -N). Without a partition
// (-R): drained and down nodes, whatever their partitions.
struct SinfoRow {
  const PartitionConfig* part = nullptr;
  std::vector<const v1::NodeInfo*> nodes;
  std::string features;  // of its nodes, from the configuration ("" when none)
};

// `format` with "#P" and "#N" made as wide as the widest partition name and node list of
// `rows`, nine at least.
std::string SinfoFitWidths(const std::string& format, const std::vector<SinfoRow>& rows);

// sinfo's long (%T) state name: "drained", "mixed", ... (-t reads "drained" and "draining" so).
std::string SinfoLongState(const v1::NodeInfo& n);
// A node that answers (Slurm's "responding", -r/--responding): registered and heard from.
bool SinfoNodeResponding(const v1::NodeInfo& n);

// What makes nodes of a partition share a row: what the row prints of them (`shown`: the
// letters of the format). As sinfo: the state when a state is shown, features, GRES and the
// reason when shown; sizes only with -e (`exact`).
std::string SinfoGroupKey(const v1::NodeInfo& n, const std::string& features,
                          const std::set<char>& shown, bool exact);
// ...and drained and down nodes under -R: the reason, who set it and when, and the state when
// shown.
std::string SinfoReasonGroupKey(const v1::NodeInfo& n, const std::set<char>& shown);

// Orders `rows` by -S keys (as ParseSinfoSort gives them); rows equal in every key keep their
// order. Partitions' configuration order ("#P") is their place in `config`.
void SortSinfoRows(std::vector<SinfoRow>& rows, const std::vector<std::string>& keys,
                   const Config& config);

// The header line (when `header`) and a line per row, appended to `out`; `cluster` is %V.
void RenderSinfo(const std::vector<FormatItem>& items, const std::vector<SinfoRow>& rows,
                 bool header, const std::string& cluster, std::string& out);

}  // namespace muster::cli
