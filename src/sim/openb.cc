#include "muster/sim/openb.h"

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <set>
#include <vector>

#include "muster/common/hostlist.h"
#include "muster/common/strings.h"
#include "muster/sim/trace_file.h"
#include "table_text.h"

namespace muster::sim {
namespace {

// The digits that end a pod's name ("openb-pod-0042" -> 42).
std::optional<int64_t> TrailingNumber(std::string_view name) {
  size_t start = name.size();
  while (start > 0 && name[start - 1] >= '0' && name[start - 1] <= '9') --start;
  if (start == name.size() || name.size() - start > 18) return std::nullopt;
  return table::Integer(name.substr(start));
}

std::string Missing(const table::Header& h, std::initializer_list<const char*> names) {
  std::string missing;
  for (const char* n : names) {
    if (!h.Find(n)) missing += (missing.empty() ? "" : ", ") + std::string(n);
  }
  return missing;
}

// A GPU model as a gpu_type: lowercased; only what a TOML string and a GRES type can hold.
bool IsPlainName(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  });
}

}  // namespace

Result<Trace> ReadOpenbPods(std::string_view text) {
  Trace t;
  t.format = "openb";
  table::Skips skips;
  std::optional<table::Header> header;
  Status error;
  size_t c_name = 0, c_cpu = 0, c_mem = 0, c_gpus = 0, c_milli = 0, c_created = 0, c_deleted = 0,
         c_scheduled = 0;
  std::optional<size_t> c_spec, c_qos, c_phase;
  std::vector<std::string_view> f;
  // Pods kept, with what the notes need once the trace's end is known.
  struct Kept {
    int64_t deletion = 0;
    bool running = false;
  };
  std::vector<Kept> kept;
  int64_t last_deletion = 0;
  uint64_t read = 0, rows = 0, shared = 0, cpu_rounded = 0;
  table::ForEachLine(text, [&](uint64_t number, std::string_view line) {
    if (table::IsBlank(line)) return true;
    if (!header) {
      auto h = table::ReadHeader(line, ',', "the openb pod list");
      if (!h.ok()) {
        error = h.status();
        return false;
      }
      header = std::move(*h);
      const std::string missing =
          Missing(*header, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli",
                            "creation_time", "deletion_time", "scheduled_time"});
      if (!missing.empty()) {
        error = InvalidArgument("not an openb pod list with times: its header (line " +
                                std::to_string(number) + ") has no " + missing);
        return false;
      }
      c_name = *header->Find("name");
      c_cpu = *header->Find("cpu_milli");
      c_mem = *header->Find("memory_mib");
      c_gpus = *header->Find("num_gpu");
      c_milli = *header->Find("gpu_milli");
      c_created = *header->Find("creation_time");
      c_deleted = *header->Find("deletion_time");
      c_scheduled = *header->Find("scheduled_time");
      c_spec = header->Find("gpu_spec");
      c_qos = header->Find("qos");
      c_phase = header->Find("pod_phase");
      return true;
    }
    const uint64_t row = rows++;
    table::SplitFields(line, ',', f);
    if (f.size() != header->columns) {
      skips.Add(number, "malformed: skipped",
                std::to_string(header->columns) + " columns expected, " + std::to_string(f.size()) +
                    " found");
      return true;
    }
    // Numbers every pod has; the times scheduled and deleted may be empty.
    int64_t v[5] = {};
    const size_t cols[5] = {c_cpu, c_mem, c_gpus, c_milli, c_created};
    for (size_t k = 0; k < 5; ++k) {
      auto n = table::Integer(f[cols[k]]);
      if (!n || *n < 0) {
        skips.Add(number, "malformed: skipped",
                  header->names[cols[k]] + " is not a non-negative integer: '" +
                      table::Shown(f[cols[k]]) + "'");
        return true;
      }
      v[k] = *n;
    }
    std::optional<int64_t> times[2];  // scheduled, deleted
    const size_t time_cols[2] = {c_scheduled, c_deleted};
    for (size_t k = 0; k < 2; ++k) {
      if (f[time_cols[k]].empty()) continue;
      times[k] = table::Integer(f[time_cols[k]]);
      if (!times[k] || *times[k] < 0) {
        skips.Add(number, "malformed: skipped",
                  header->names[time_cols[k]] + " is not a non-negative integer: '" +
                      table::Shown(f[time_cols[k]]) + "'");
        return true;
      }
    }
    ++read;
    const int64_t cpu_milli = v[0], mem = v[1], gpus = v[2], gpu_milli = v[3], created = v[4];
    const std::optional<int64_t> scheduled = times[0], deleted = times[1];
    // Past these, rounding the CPUs up and the replay's milliseconds would overflow.
    const std::pair<size_t, std::optional<int64_t>> stamps[3] = {
        {c_created, created}, {c_scheduled, scheduled}, {c_deleted, deleted}};
    for (const auto& [col, stamp] : stamps) {
      if (stamp && !table::InTimeRange(*stamp)) {
        skips.Add(number, table::kOutOfRange, table::TimeOutOfRange(header->names[col], *stamp));
        return true;
      }
    }
    if (cpu_milli > int64_t{kMaxTraceProcs} * 1000) {
      skips.Add(number, table::kOutOfRange,
                table::CountOutOfRange("cpu_milli", cpu_milli, uint64_t{kMaxTraceProcs} * 1000));
      return true;
    }
    if (gpus > kMaxTraceGpus) {
      skips.Add(number, table::kOutOfRange, table::CountOutOfRange("num_gpu", gpus, kMaxTraceGpus));
      return true;
    }
    if (static_cast<uint64_t>(mem) > kMaxTraceMemMb) {
      skips.Add(number, table::kOutOfRange,
                table::CountOutOfRange("memory_mib", mem, kMaxTraceMemMb));
      return true;
    }
    if (deleted) last_deletion = std::max(last_deletion, *deleted);
    if (!scheduled) {
      skips.Add(number, "never scheduled (no scheduled_time): dropped",
                c_phase ? "pod_phase " + table::Shown(f[*c_phase]) : "");
      return true;
    }
    if (!deleted) {
      skips.Add(number, "no deletion_time: dropped");
      return true;
    }
    const int64_t run = *deleted - *scheduled;
    if (run <= 0) {
      skips.Add(number, "run (deletion_time - scheduled_time) <= 0: dropped",
                "run " + std::to_string(run));
      return true;
    }
    SimJob j;
    j.trace_id = TrailingNumber(f[c_name]).value_or(static_cast<int64_t>(row));
    j.submit_s = created;
    j.run_s = run;
    j.req_time_s = run;
    j.procs = static_cast<uint32_t>(std::max<int64_t>((cpu_milli + 999) / 1000, 1));
    if (cpu_milli % 1000 != 0) ++cpu_rounded;
    j.mem_mb = static_cast<uint64_t>(mem);
    j.gpus = static_cast<uint32_t>(gpus);
    if (gpu_milli > 0 && gpu_milli < 1000) {
      ++shared;
      j.gpus = std::max<uint32_t>(j.gpus, 1);
    }
    j.nodes = 1;
    if (c_spec) {
      std::vector<std::string_view> models;
      table::SplitFields(f[*c_spec], '|', models);
      for (std::string_view m : models) {
        if (m.empty()) continue;
        std::string type = ToLower(m);
        if (std::find(j.gpu_types.begin(), j.gpu_types.end(), type) == j.gpu_types.end()) {
          j.gpu_types.push_back(std::move(type));
        }
      }
    }
    j.user = "openb";
    if (c_qos) j.account = std::string(f[*c_qos]);
    j.traced_wait_s = *scheduled >= created ? *scheduled - created : -1;
    kept.push_back({*deleted, c_phase && EqualsIgnoreCase(f[*c_phase], "Running")});
    t.jobs.push_back(std::move(j));
    return true;
  });
  if (!error.ok()) return error;
  if (!header) return InvalidArgument("the openb pod list is empty (no header line)");
  if (read == 0 && skips.total() > 0) {
    return InvalidArgument("not an openb pod list: no line could be read (" + skips.First() + ")");
  }
  uint64_t cut = 0;
  for (const Kept& k : kept) cut += k.running && k.deletion == last_deletion;
  t.skipped = skips.total();
  skips.AppendNotes(t.notes);
  t.notes.push_back(
      "the openb trace has no requested times: each pod's run time is its time limit (perfect "
      "estimates)");
  t.notes.push_back("every pod is user 'openb'; its qos (LS, BE, ...) is its account");
  if (shared > 0) {
    t.notes.push_back(std::to_string(shared) +
                      " pods share a GPU (0 < gpu_milli < 1000): each is replayed on a whole GPU");
  }
  if (cpu_rounded > 0) {
    t.notes.push_back(std::to_string(cpu_rounded) +
                      " pods ask for a fraction of a CPU (cpu_milli): rounded up to whole CPUs");
  }
  if (cut > 0) {
    t.notes.push_back(
        std::to_string(cut) + " pods were still Running at the trace's end (deletion_time " +
        std::to_string(last_deletion) + ", the trace's last): kept, their run cut there");
  }
  table::SortAndRebase(t);
  return t;
}

Result<std::string> OpenbNodesToToml(std::string_view text) {
  std::optional<table::Header> header;
  Status error;
  size_t c_name = 0, c_cpu = 0, c_mem = 0, c_gpus = 0;
  std::optional<size_t> c_model;
  std::vector<std::string_view> f;
  struct Node {
    std::string name, type;
    int64_t cpus = 0, mem = 0, gpus = 0;
  };
  std::vector<Node> nodes;
  table::ForEachLine(text, [&](uint64_t number, std::string_view line) {
    if (table::IsBlank(line)) return true;
    const std::string where = "the openb node list, line " + std::to_string(number);
    if (!header) {
      auto h = table::ReadHeader(line, ',', "the openb node list");
      if (!h.ok()) {
        error = h.status();
        return false;
      }
      header = std::move(*h);
      const std::string missing = Missing(*header, {"sn", "cpu_milli", "memory_mib", "gpu"});
      if (!missing.empty()) {
        error =
            InvalidArgument("not an openb node list (sn,cpu_milli,memory_mib,gpu,model): " + where +
                            " has no " + missing);
        return false;
      }
      c_name = *header->Find("sn");
      c_cpu = *header->Find("cpu_milli");
      c_mem = *header->Find("memory_mib");
      c_gpus = *header->Find("gpu");
      c_model = header->Find("model");
      return true;
    }
    table::SplitFields(line, ',', f);
    if (f.size() != header->columns) {
      error = InvalidArgument(where + ": " + std::to_string(header->columns) +
                              " columns expected, " + std::to_string(f.size()) + " found");
      return false;
    }
    Node n;
    n.name = std::string(f[c_name]);
    const size_t cols[3] = {c_cpu, c_mem, c_gpus};
    int64_t* const out[3] = {&n.cpus, &n.mem, &n.gpus};
    for (size_t k = 0; k < 3; ++k) {
      auto v = table::Integer(f[cols[k]]);
      if (!v || *v < 0) {
        error =
            InvalidArgument(where + ": " + header->names[cols[k]] +
                            " is not a non-negative integer: '" + table::Shown(f[cols[k]]) + "'");
        return false;
      }
      *out[k] = *v;
    }
    n.cpus /= 1000;
    if (n.cpus < 1 || n.mem < 1) {
      error = InvalidArgument(where +
                              ": a node needs at least one CPU (1000 cpu_milli) and some "
                              "memory");
      return false;
    }
    // The controller keeps a slot for each CPU and GPU of a node: no more than it takes.
    if (n.cpus > kMaxOpenbNodeCpus) {
      error = InvalidArgument(where + ": more than " + std::to_string(kMaxOpenbNodeCpus) +
                              " CPUs (cpu_milli " + table::Shown(f[c_cpu]) + ")");
      return false;
    }
    if (static_cast<uint64_t>(n.mem) > kMaxTraceMemMb) {
      error = InvalidArgument(where + ": more than 1 PiB of memory (memory_mib " +
                              table::Shown(f[c_mem]) + ", at most " +
                              std::to_string(kMaxTraceMemMb) + ")");
      return false;
    }
    if (n.gpus > kMaxOpenbNodeGpus) {
      error = InvalidArgument(where + ": more than " + std::to_string(kMaxOpenbNodeGpus) +
                              " GPUs (gpu " + table::Shown(f[c_gpus]) + ")");
      return false;
    }
    if (n.gpus > 0 && c_model && !f[*c_model].empty()) {
      n.type = ToLower(f[*c_model]);
      if (!IsPlainName(n.type)) {
        error = InvalidArgument(where + ": GPU model '" + table::Shown(f[*c_model]) +
                                "' is not a plain name (letters, digits, '.', '_', '-')");
        return false;
      }
    }
    nodes.push_back(std::move(n));
    return true;
  });
  if (!error.ok()) return error;
  if (nodes.empty()) return InvalidArgument("the openb node list has no node");
  // The trace's names where the config takes them all; else node<row>, the same for every node
  // (a partial renaming would be harder to follow).
  std::set<std::string> seen;
  bool keep_names = true;
  for (const Node& n : nodes)
    keep_names = keep_names && IsValidNodeName(n.name) && seen.insert(n.name).second;
  std::string toml = "# muster-sim: the cluster of an openb node list (" +
                     std::to_string(nodes.size()) + " nodes)\n";
  if (!keep_names) {
    toml += "# its node names are not all valid, distinct node names: the nodes are renamed\n";
    const size_t width = std::to_string(nodes.size() - 1).size();
    for (size_t i = 0; i < nodes.size(); ++i) {
      std::string digits = std::to_string(i);
      nodes[i].name = "node" + std::string(width - digits.size(), '0') + digits;
    }
  }
  toml += "cluster_name = \"openb\"\n";
  std::vector<std::string> names;
  names.reserve(nodes.size());
  for (const Node& n : nodes) {
    toml += "[[nodes]]\nnames = \"" + n.name + "\"\ncpus = " + std::to_string(n.cpus) +
            "\nmemory_mb = " + std::to_string(n.mem) + "\n";
    if (n.gpus > 0) {
      toml += "gpus = " + std::to_string(n.gpus) + "\n";
      if (!n.type.empty()) toml += "gpu_type = \"" + n.type + "\"\n";
    }
    names.push_back(n.name);
  }
  toml += "[[partition]]\nname = \"sim\"\nnodes = \"" + CompressHostlist(names) +
          "\"\ndefault = true\n";
  return toml;
}

Result<Config> ReadOpenbNodes(std::string_view text) {
  MUSTER_ASSIGN_OR_RETURN(std::string toml, OpenbNodesToToml(text));
  return ParseConfig(toml, "the openb node list");
}

Result<Config> ReadOpenbNodesFile(const std::string& path) {
  MUSTER_ASSIGN_OR_RETURN(std::string text, ReadMaybeCompressed(path));
  auto toml = OpenbNodesToToml(text);
  if (!toml.ok()) return toml.status().Prepend(path);
  return ParseConfig(*toml, path);
}

}  // namespace muster::sim
