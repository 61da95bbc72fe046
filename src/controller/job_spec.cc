#include "job_spec.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>

#include "muster/common/strings.h"

namespace muster::controller {

PartitionLimitMap ComputePartitionLimits(const Config& config) {
  std::map<std::string, const NodeConfig*> nodes;
  for (const NodeConfig& n : config.nodes) nodes[n.name] = &n;
  PartitionLimitMap out;
  for (const PartitionConfig& p : config.partitions) {
    PartitionLimits& l = out[p.name];
    for (const std::string& name : p.nodes) {
      auto it = nodes.find(name);
      if (it == nodes.end()) continue;
      const NodeConfig& nc = *it->second;
      l.max_cpus = std::max(l.max_cpus, nc.cpus);
      l.max_gpus = std::max(l.max_gpus, nc.gpus);
      uint32_t& typed = l.max_gpus_type[ToLower(nc.gpu_type)];
      typed = std::max(typed, nc.gpus);
      for (const auto& g : nc.gres) {
        if (g.name == "gpu") l.mig_types.insert(g.type);
      }
    }
  }
  return out;
}

Result<std::vector<std::vector<std::string>>> ParseConstraint(const std::string& expr) {
  std::vector<std::vector<std::string>> alternatives;
  if (expr.empty()) return alternatives;
  for (char c : expr) {
    if (c == '[' || c == ']' || c == '(' || c == ')' || c == '*') {
      return Unimplemented("--constraint '" + expr +
                           "': brackets, parentheses and counts are not supported; use & and |");
    }
  }
  for (const std::string& alt : Split(expr, '|')) {
    std::vector<std::string> all;
    // Slurm reads ',' as AND too.
    for (const std::string& and_part : Split(alt, '&')) {
      for (const std::string& f : Split(and_part, ',')) {
        std::string name(Trim(f));
        bool ok = !name.empty();
        for (char c : name) {
          if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.' &&
              c != ':') {
            ok = false;
          }
        }
        if (!ok) {
          return InvalidArgument("--constraint '" + expr + "': '" + name +
                                 "' is not a feature name (letters, digits, _ - . :)");
        }
        if (std::find(all.begin(), all.end(), name) == all.end()) all.push_back(name);
      }
    }
    alternatives.push_back(std::move(all));
  }
  return alternatives;
}

namespace {

// What a GPU type names over the job's partitions: nodes with whole GPUs of that type, and
// nodes with MIG slices of that profile.
std::pair<bool, bool> KindOf(const v1::JobSpec& spec, const PartitionLimitMap& limits,
                             const std::string& type) {
  bool whole = false, mig = false;
  for (const std::string& name : spec.partitions()) {
    auto l = limits.find(name);
    if (l == limits.end()) continue;
    auto t = l->second.max_gpus_type.find(type);
    whole = whole || (t != l->second.max_gpus_type.end() && t->second > 0);
    mig = mig || l->second.mig_types.count(type) > 0;
  }
  return {whole, mig};
}

// Removes repeated names, keeping the first of each, in O(n log n).
void Dedupe(google::protobuf::RepeatedPtrField<std::string>* names) {
  std::set<std::string_view> seen;
  std::vector<std::string> kept;
  kept.reserve(static_cast<size_t>(names->size()));
  for (const std::string& n : *names) {
    if (seen.insert(n).second) kept.push_back(n);
  }
  names->Clear();
  for (std::string& n : kept) names->Add(std::move(n));
}

// Node constraints and topology limits: checked here, applied by the core.
Status NormalizeConstraints(v1::JobSpec& spec) {
  MUSTER_RETURN_IF_ERROR(ParseConstraint(spec.constraint()).status());
  Dedupe(spec.mutable_required_nodes());
  Dedupe(spec.mutable_excluded_nodes());
  const std::set<std::string_view> excluded(spec.excluded_nodes().begin(),
                                            spec.excluded_nodes().end());
  for (const std::string& n : spec.required_nodes()) {
    if (excluded.count(n)) {
      return InvalidArgument("node " + n + " is both in --nodelist and in --exclude");
    }
  }
  const std::string& t = spec.topology();
  if (!t.empty() && t != "any" && t != "leaf" && t != "block" && t != "nvlink") {
    return InvalidArgument("--topology=" + t + ": expected nvlink, leaf, block or any");
  }
  if (spec.max_switches() > 100'000) return InvalidArgument("--switches count is too large");
  if (spec.switches_wait_ms() < 0) return InvalidArgument("--switches wait must not be negative");
  return Status::Ok();
}

// The CPU shape (-B, --ntasks-per-core, --hint, ...): checked here, applied by the core.
Status CheckCpuShape(const v1::CpuShape& c) {
  for (uint32_t v : {c.sockets_per_node(), c.cores_per_socket(), c.threads_per_core(),
                     c.ntasks_per_core(), c.ntasks_per_socket()}) {
    if (v > 65'535) {
      return InvalidArgument(
          "sockets, cores, threads and tasks per core or socket are at most 65535");
    }
  }
  const std::string& h = c.hint();
  if (!h.empty() && h != "compute_bound" && h != "memory_bound" && h != "multithread" &&
      h != "nomultithread") {
    return InvalidArgument("--hint=" + h.substr(0, 64) +
                           ": expected compute_bound, memory_bound, multithread or nomultithread");
  }
  if (!h.empty() && (c.ntasks_per_core() > 0 || c.threads_per_core() > 0)) {
    return InvalidArgument(
        "--hint cannot be used with --ntasks-per-core, --threads-per-core or -B");
  }
  return Status::Ok();
}

// -S/--core-spec, --thread-spec: one of them, and the job holds its nodes whole (as Slurm's
// implied --exclusive): the set-aside cores are its own, charged to it, used by nobody.
Status NormalizeCoreSpec(v1::JobSpec& spec) {
  if (spec.core_spec() > 0 && spec.thread_spec() > 0) {
    return InvalidArgument("--core-spec and --thread-spec cannot be used together");
  }
  if (spec.core_spec() > 0 || spec.thread_spec() > 0) spec.set_exclusive(true);
  return Status::Ok();
}

// GRES items: names lower-case, repeats merged; a GPU type that is a MIG profile (and no
// node's whole-GPU type) becomes a request for that many slices.
Status NormalizeGres(v1::JobSpec& spec, const PartitionLimitMap& limits) {
  std::vector<v1::GresSpec> items;
  for (v1::GresSpec g : spec.gres()) {
    g.set_name(ToLower(g.name()));
    g.set_type(ToLower(g.type()));
    if (g.name().empty() || g.count() == 0 || g.count() > 1'000'000) {
      return InvalidArgument("--gres item '" + g.name() +
                             "' needs a name and a count from 1 to 1000000");
    }
    if (g.name() == "gpu" && g.type().empty()) {
      return InvalidArgument("whole GPUs are asked for with --gpus-per-node or --gres=gpu:N");
    }
    auto same = std::find_if(items.begin(), items.end(), [&](const v1::GresSpec& o) {
      return o.name() == g.name() && o.type() == g.type();
    });
    if (same != items.end()) {
      same->set_count(std::min<uint32_t>(same->count() + g.count(), 10'000'000));
    } else {
      items.push_back(std::move(g));
    }
  }
  const std::string& type = spec.gpu_type();
  if (!type.empty() && spec.gpus_per_node() > 0) {
    const auto [whole, mig] = KindOf(spec, limits, type);
    if (mig && !whole) {
      v1::GresSpec slices;
      slices.set_name("gpu");
      slices.set_type(type);
      slices.set_count(spec.gpus_per_node());
      items.push_back(std::move(slices));
      spec.set_gpus_per_node(0);
      spec.clear_gpu_type();
    }
  }
  spec.clear_gres();
  for (auto& g : items) *spec.add_gres() = std::move(g);
  return Status::Ok();
}

// --gpus-per-node=h100:8|a100:8: whole-GPU types (not MIG profiles), each one some partition
// of the job has, named once; the job's gpu_type stays empty (any) and the scheduler tries them
// in order.
Status NormalizeGpuTypes(v1::JobSpec& spec, const PartitionLimitMap& limits) {
  if (spec.gpu_types_size() == 0) return Status::Ok();
  if (spec.gpu_types_size() == 1) {
    spec.set_gpu_type(spec.gpu_types(0));
    spec.clear_gpu_types();
    return Status::Ok();
  }
  if (spec.gpu_types_size() > 8) return InvalidArgument("at most 8 GPU types per job");
  if (!spec.gpu_type().empty()) {
    return InvalidArgument("give one GPU type or a list of alternatives, not both");
  }
  std::set<std::string> seen;
  for (std::string& type : *spec.mutable_gpu_types()) {
    type = ToLower(type);
    if (!IsValidAccountName(type)) {
      return InvalidArgument("bad GPU type '" + type.substr(0, 64) + "'");
    }
    if (!seen.insert(type).second) return InvalidArgument("GPU type " + type + " is named twice");
    const auto [whole, mig] = KindOf(spec, limits, type);
    if (mig) {
      return InvalidArgument("GPU type " + type +
                             " is a MIG profile; alternatives are whole-GPU types only");
    }
    if (!whole) {
      return FailedPrecondition(
          "job can never run on GPU type " + type + ": no node of " +
          Join(std::vector<std::string>(spec.partitions().begin(), spec.partitions().end()), ",") +
          " has it");
    }
  }
  return Status::Ok();
}

// --gpus-per-socket=N: N GPUs from each of --sockets-per-node=S sockets of every node, so N x S
// per node. As Slurm: S is required, and a --gpus-per-node that is not N x S contradicts it;
// --gpus must be a whole number of such nodes (NormalizeJobSpec splits it). Whole GPUs only.
Status CheckGpusPerSocket(const v1::JobSpec& spec, const PartitionLimitMap& limits) {
  const uint32_t per = spec.gpus_per_socket();
  if (per == 0) return Status::Ok();
  const uint32_t sockets = spec.cpu_shape().sockets_per_node();
  const std::string opt = "--gpus-per-socket=" + std::to_string(per);
  if (sockets == 0) {
    return InvalidArgument(opt + " needs --sockets-per-node (or -B S): the number of sockets " +
                           "of each node to take the GPUs from");
  }
  if (spec.gpus_per_task() > 0) {
    return InvalidArgument("--gpus-per-socket and --gpus-per-task cannot be used together");
  }
  const uint64_t per_node = uint64_t{per} * sockets;
  if (per_node > 10'000'000) {
    return InvalidArgument(opt + " on " + std::to_string(sockets) +
                           " sockets is too many GPUs per node");
  }
  const std::string gives = opt + " on --sockets-per-node=" + std::to_string(sockets) + " (" +
                            std::to_string(per_node) + (per_node == 1 ? " GPU" : " GPUs") +
                            " per node)";
  if (spec.gpus_per_node() > 0 && spec.gpus_per_node() != per_node) {
    return InvalidArgument("--gpus-per-node (--gres=gpu:N) of " +
                           std::to_string(spec.gpus_per_node()) + " contradicts " + gives);
  }
  if (spec.gpus_total() > 0) {
    const uint64_t g = spec.gpus_total();
    if (g % per_node != 0 || (spec.nodes() > 0 && g != per_node * spec.nodes())) {
      return InvalidArgument("--gpus=" + std::to_string(g) + " is not " +
                             (spec.nodes() > 0 ? "-N " + std::to_string(spec.nodes()) + " times"
                                               : std::string("a multiple of")) +
                             " the GPUs per node of " + gives);
    }
  }
  if (!spec.gpu_type().empty()) {
    const auto [whole, mig] = KindOf(spec, limits, spec.gpu_type());
    if (mig && !whole) {
      return InvalidArgument(opt + " takes whole GPUs; GPU type " + spec.gpu_type() +
                             " is a MIG profile");
    }
  }
  return Status::Ok();
}

}  // namespace

Status NormalizeJobSpec(v1::JobSpec& spec, const Config& config, const PartitionLimitMap& limits,
                        int64_t* time_limit_ms) {
  MUSTER_RETURN_IF_ERROR(NormalizeConstraints(spec));
  MUSTER_RETURN_IF_ERROR(CheckCpuShape(spec.cpu_shape()));
  MUSTER_RETURN_IF_ERROR(NormalizeCoreSpec(spec));
  // Partitions: empty means the default partition.
  if (spec.partitions().empty()) {
    const PartitionConfig* def = config.DefaultPartition();
    if (!def)
      return FailedPrecondition("no partition given and the cluster has no default partition");
    spec.add_partitions(def->name);
  }
  uint32_t max_cpus = 0, max_gpus = 0;
  size_t most_nodes = 0;  // of the named partitions, the most nodes one has
  int64_t limit = -1;     // the most generous default/max time over the named partitions
  for (const std::string& name : spec.partitions()) {
    const PartitionConfig* p = config.FindPartition(name);
    if (!p) {
      std::vector<std::string> names;
      for (const auto& q : config.partitions) names.push_back(q.name);
      return NotFound("partition '" + name + "' does not exist (partitions: " + Join(names, ", ") +
                      ")");
    }
    most_nodes = std::max(most_nodes, p->nodes.size());
    auto lim = limits.find(name);
    if (lim != limits.end()) {
      max_cpus = std::max(max_cpus, lim->second.max_cpus);
      if (spec.gpu_type().empty()) {
        max_gpus = std::max(max_gpus, lim->second.max_gpus);
      } else if (auto t = lim->second.max_gpus_type.find(ToLower(spec.gpu_type()));
                 t != lim->second.max_gpus_type.end()) {
        max_gpus = std::max(max_gpus, t->second);
      }
    }
    int64_t part_default = p->default_time_ms ? p->default_time_ms : p->max_time_ms;
    if (limit != 0) limit = part_default == 0 ? 0 : std::max(limit, part_default);
  }
  if (spec.time_limit_ms() < 0) return InvalidArgument("time limit must not be negative");
  *time_limit_ms = spec.time_limit_ms() > 0 ? spec.time_limit_ms() : std::max<int64_t>(limit, 0);

  spec.set_gpu_type(ToLower(spec.gpu_type()));
  MUSTER_RETURN_IF_ERROR(NormalizeGpuTypes(spec, limits));
  if (spec.cpus_per_task() == 0) spec.set_cpus_per_task(1);
  const uint32_t cpt = spec.cpus_per_task();
  uint32_t nodes = spec.nodes(), ntasks = spec.ntasks(), tpn = spec.ntasks_per_node();
  const uint32_t gpt = spec.gpus_per_task();

  if (spec.gpus_total() > 0 && spec.gpus_per_node() > 0) {
    return InvalidArgument("give either --gpus or --gpus-per-node (--gres=gpu:N), not both");
  }
  if (gpt > 0 && (spec.gpus_total() > 0 || spec.gpus_per_node() > 0)) {
    return InvalidArgument(
        "give one of --gpus-per-task, --gpus and --gpus-per-node (--gres=gpu:N), not several");
  }
  MUSTER_RETURN_IF_ERROR(CheckGpusPerSocket(spec, limits));
  if (spec.gpus_per_socket() > 0) {
    const uint32_t per_node = spec.gpus_per_socket() * spec.cpu_shape().sockets_per_node();
    // With --gpus, as many nodes as it holds of them (as -N would say); the split below gives
    // each its share.
    if (spec.gpus_total() > 0 && nodes == 0) nodes = spec.gpus_total() / per_node;
    if (spec.gpus_total() == 0) spec.set_gpus_per_node(per_node);
  }
  const bool nodes_given = nodes > 0;
  if ((spec.mem_per_gpu_mb() > 0) + (spec.mem_per_node_mb() > 0) + (spec.mem_per_cpu_mb() > 0) >
      1) {
    return InvalidArgument("--mem, --mem-per-cpu and --mem-per-gpu are mutually exclusive");
  }
  if (spec.min_nodes() >= nodes) spec.set_min_nodes(0);  // "-N 4-4", or min above max
  if (spec.min_nodes() > 0) {
    // A range: every node gets the same slot, whatever the count turns out to be.
    if (ntasks > 0 && tpn == 0) {
      return Unimplemented("-N " + std::to_string(spec.min_nodes()) + "-" + std::to_string(nodes) +
                           " with --ntasks is not supported; give --ntasks-per-node instead");
    }
    if (spec.gpus_total() > 0) {
      return Unimplemented("-N min-max with --gpus is not supported; use --gpus-per-node");
    }
    if (static_cast<uint32_t>(spec.required_nodes_size()) > spec.min_nodes()) {
      return InvalidArgument("--nodelist names more nodes than the minimum of -N " +
                             std::to_string(spec.min_nodes()) + "-" + std::to_string(nodes));
    }
  }
  // Nodes needed for the tasks when -N was not given.
  if (!nodes_given) {
    if (tpn > 0) {
      nodes = ntasks > 0 ? (ntasks + tpn - 1) / tpn : 1;
    } else if (ntasks > 0 && max_cpus > 0) {
      // -O/--overcommit: the CPUs of one task per node (Slurm's "as if only one task per node").
      uint64_t cpus = spec.overcommit() ? cpt : static_cast<uint64_t>(ntasks) * cpt;
      nodes = static_cast<uint32_t>(std::max<uint64_t>(1, (cpus + max_cpus - 1) / max_cpus));
      if (gpt > 0 && max_gpus >= gpt) {
        // As many tasks per node as the largest node's GPUs allow.
        uint32_t by_gpus = max_gpus / gpt;
        nodes = std::max(nodes, (ntasks + by_gpus - 1) / by_gpus);
      }
      nodes = std::min(nodes, ntasks);
    } else {
      nodes = 1;
    }
    // --spread-job: a task on as many nodes as the partition has, up to one node per task.
    if (spec.spread_job() && tpn == 0 && ntasks > 0 && most_nodes > 0) {
      nodes = std::max<uint32_t>(nodes, std::min<uint32_t>(ntasks, most_nodes));
    }
    // As Slurm: every --nodelist node is in the job, so the count grows to hold them.
    nodes = std::max<uint32_t>(nodes, static_cast<uint32_t>(spec.required_nodes_size()));
  } else if (static_cast<uint32_t>(spec.required_nodes_size()) > nodes) {
    return InvalidArgument("-N " + std::to_string(nodes) + " is fewer than the " +
                           std::to_string(spec.required_nodes_size()) +
                           " nodes named by --nodelist");
  }
  // --gpus=G is a total: split evenly over the nodes.
  if (spec.gpus_total() > 0) {
    uint32_t g = spec.gpus_total();
    if (!nodes_given && max_gpus > 0 && g > max_gpus) {
      nodes = std::max(nodes, (g + max_gpus - 1) / max_gpus);
    }
    if (g % nodes != 0) {
      return Status(StatusCode::kUnimplemented,
                    "--gpus=" + std::to_string(g) + " cannot be split evenly over " +
                        std::to_string(nodes) + " nodes; uneven GPU counts per node are not " +
                        "supported yet: use -N with --gpus-per-node");
    }
    spec.set_gpus_per_node(g / nodes);
  }
  if (ntasks == 0) {
    ntasks = tpn > 0 ? nodes * tpn : nodes;
  }
  if (ntasks < nodes) {
    if (nodes_given && spec.ntasks() > 0) {
      return InvalidArgument("asks for " + std::to_string(ntasks) + " tasks on " +
                             std::to_string(nodes) + " nodes; every node needs at least one task");
    }
    if (!nodes_given) nodes = ntasks;
  }
  if (tpn > 0 && ntasks > static_cast<uint64_t>(nodes) * tpn) {
    return InvalidArgument("asks for " + std::to_string(ntasks) + " tasks but " +
                           std::to_string(nodes) + " nodes x " + std::to_string(tpn) +
                           " tasks per node hold only " + std::to_string(nodes * tpn));
  }
  if (nodes > 100'000 || ntasks > 10'000'000)
    return InvalidArgument("node or task count is too large");
  // -O: tasks may outnumber CPUs, but a node runs at most Slurm's MAX_TASKS_PER_NODE of a step.
  constexpr uint32_t kMaxTasksPerNode = 512;
  if (spec.overcommit() && ntasks > static_cast<uint64_t>(nodes) * kMaxTasksPerNode) {
    return InvalidArgument("-O/--overcommit: " + std::to_string(ntasks) + " tasks on " +
                           std::to_string(nodes) + " nodes is more than 512 per node; ask for " +
                           "more nodes (-N)");
  }
  spec.set_nodes(nodes);
  spec.set_ntasks(ntasks);
  spec.clear_tasks_per_node();
  uint32_t base = ntasks / nodes, extra = ntasks % nodes;
  for (uint32_t i = 0; i < nodes; ++i) spec.add_tasks_per_node(base + (i < extra ? 1 : 0));
  if (gpt > 0) {
    // Every node holds the same number of GPUs in this version, so the tasks must split evenly.
    if (extra != 0) {
      return Unimplemented("--gpus-per-task with " + std::to_string(ntasks) + " tasks on " +
                           std::to_string(nodes) +
                           " nodes gives nodes different GPU counts, which this version does "
                           "not support; make the tasks a multiple of the nodes");
    }
    spec.set_gpus_per_node(gpt * base);
  }
  if (spec.mem_per_gpu_mb() > 0) {
    if (spec.gpus_per_node() == 0) {
      return InvalidArgument("--mem-per-gpu needs GPUs (--gpus, --gpus-per-node or --gres=gpu)");
    }
    spec.set_mem_per_node_mb(spec.mem_per_gpu_mb() * spec.gpus_per_node());
  }
  if (spec.mem_per_cpu_mb() > 0) {
    // The CPUs of a node's slot: its tasks' (the fullest node's, as every node gets one slot
    // size) or --mincpus, whichever is more.
    const uint64_t slot_tasks = spec.overcommit() ? 1 : base + (extra > 0 ? 1 : 0);
    const uint64_t slot_cpus = std::max<uint64_t>(slot_tasks * cpt, spec.min_cpus_per_node());
    if (slot_cpus > (uint64_t{1} << 40) / spec.mem_per_cpu_mb()) {
      return InvalidArgument("--mem-per-cpu times " + std::to_string(slot_cpus) +
                             " CPUs per node is too large (at most 1024T per node)");
    }
    spec.set_mem_per_node_mb(spec.mem_per_cpu_mb() * slot_cpus);
  }
  // Products of bounded numbers may still be too large (or, unchecked, wrap).
  if (spec.mem_per_node_mb() > (uint64_t{1} << 40)) {
    return InvalidArgument("memory request is too large (at most 1024T per node)");
  }
  MUSTER_RETURN_IF_ERROR(NormalizeGres(spec, limits));
  if (spec.name().empty()) spec.set_name("job");
  return Status::Ok();
}

core::JobRequest ToCoreRequest(const v1::JobRecord& rec) {
  const v1::JobSpec& s = rec.spec();
  core::JobRequest r;
  r.partitions.assign(s.partitions().begin(), s.partitions().end());
  r.nodes = s.nodes();
  r.min_nodes = s.min_nodes();
  for (const v1::GresSpec& g : s.gres()) r.gres.push_back({g.name(), g.type(), g.count()});
  r.tasks_per_node.assign(s.tasks_per_node().begin(), s.tasks_per_node().end());
  r.cpus_per_task = std::max<uint32_t>(1, s.cpus_per_task());
  r.min_cpus_per_node = s.min_cpus_per_node();
  r.mem_per_node_mb = s.mem_per_node_mb();
  r.min_tmp_disk_mb = s.min_tmp_disk_mb();
  r.gpus_per_node = s.gpus_per_node();
  r.gpu_type = s.gpu_type();
  r.exclusive = s.exclusive();
  r.overcommit = s.overcommit();
  r.time_limit_ms = rec.time_limit_ms();
  // Validated at submission; a record from an older version without it parses to nothing.
  if (auto f = ParseConstraint(s.constraint()); f.ok()) r.features = std::move(*f);
  r.required_nodes.assign(s.required_nodes().begin(), s.required_nodes().end());
  r.excluded_nodes.assign(s.excluded_nodes().begin(), s.excluded_nodes().end());
  r.reservation = s.reservation();
  r.max_leaves = s.max_switches();
  if (s.topology() == "leaf") {
    r.scope = core::JobRequest::Scope::kLeaf;
  } else if (s.topology() == "block") {
    r.scope = core::JobRequest::Scope::kBlock;
  } else if (s.topology() == "nvlink") {
    r.scope = core::JobRequest::Scope::kNvlink;
  }
  const v1::CpuShape& c = s.cpu_shape();
  r.min_sockets = c.sockets_per_node();
  r.min_cores_per_socket = c.cores_per_socket();
  r.min_threads_per_core = c.threads_per_core();
  r.ntasks_per_core = c.ntasks_per_core();
  r.ntasks_per_socket = c.ntasks_per_socket();
  r.spec_cores = s.core_spec();
  r.spec_threads = s.thread_spec();
  r.gpus_per_socket = s.gpus_per_socket();
  // One thread of each core (nomultithread; compute_bound and memory_bound bind so too): one
  // task per core at most. multithread is what every job gets.
  if (c.hint() == "nomultithread" || c.hint() == "compute_bound" || c.hint() == "memory_bound") {
    r.ntasks_per_core = 1;
  }
  // -O: the slot is one task's, so the tasks per core or socket are not counted (as Slurm
  // ignores those options with --overcommit).
  if (s.overcommit()) r.ntasks_per_core = r.ntasks_per_socket = 0;
  return r;
}

Result<std::vector<uint32_t>> ParseArraySpec(const std::string& spec, uint32_t max_array_size,
                                             v1::ArrayTask* out) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("invalid job array specification '" + spec + "': " + why);
  };
  std::string ranges = spec;
  uint32_t max_running = 0;
  if (size_t pct = spec.find('%'); pct != std::string::npos) {
    auto n = ParseUint(spec.substr(pct + 1));
    if (!n || *n == 0 || *n > max_array_size) return bad("%N needs a number from 1");
    max_running = static_cast<uint32_t>(*n);
    ranges = spec.substr(0, pct);
  }
  std::vector<uint32_t> tasks;
  uint32_t step = 1;
  const auto parts = Split(ranges, ',', false);
  for (const std::string& part : parts) {
    std::string range = part;
    uint32_t by = 1;
    if (size_t colon = part.find(':'); colon != std::string::npos) {
      auto n = ParseUint(part.substr(colon + 1));
      if (!n || *n == 0 || *n >= max_array_size) return bad("a step needs a number from 1");
      by = static_cast<uint32_t>(*n);
      range = part.substr(0, colon);
    }
    const size_t dash = range.find('-');
    auto first = ParseUint(range.substr(0, dash));
    auto last = dash == std::string::npos ? first : ParseUint(range.substr(dash + 1));
    if (!first || !last || *last < *first) return bad("'" + part + "' is not N, N-M or N-M:S");
    if (*last >= max_array_size) {
      return bad("task ids must be below " + std::to_string(max_array_size) +
                 " (scheduling.max_array_size)");
    }
    for (uint64_t t = *first; t <= *last; t += by) tasks.push_back(static_cast<uint32_t>(t));
    if (tasks.size() > max_array_size) {
      // Overlapping parts ("0-999,0-999,..."): at most max_array_size distinct ids are kept.
      std::sort(tasks.begin(), tasks.end());
      tasks.erase(std::unique(tasks.begin(), tasks.end()), tasks.end());
    }
    if (parts.size() == 1) step = by;
  }
  if (tasks.empty()) return bad("no task ids");
  std::sort(tasks.begin(), tasks.end());
  tasks.erase(std::unique(tasks.begin(), tasks.end()), tasks.end());
  out->set_count(static_cast<uint32_t>(tasks.size()));
  out->set_min(tasks.front());
  out->set_max(tasks.back());
  out->set_step(step);
  out->set_max_running(max_running);
  out->set_spec(spec);
  return tasks;
}

}  // namespace muster::controller
