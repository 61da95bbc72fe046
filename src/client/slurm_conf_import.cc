#include "muster/client/slurm_conf_import.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>

#include "muster/common/config.h"
#include "muster/common/duration.h"
#include "muster/common/hostlist.h"
#include "muster/common/strings.h"
#include "slurm_conf_reasons.h"
#include "slurm_conf_syntax.h"

namespace muster::client {
namespace {

// TOML's basic strings take JSON's escapes (and DEL, which TOML wants escaped too).
std::string Quote(const std::string& s) {
  std::string q = JsonQuote(s);
  for (size_t at; (at = q.find('\x7f')) != std::string::npos;) q.replace(at, 1, "\\u007f");
  return q;
}

// Text for a '#' comment: control characters (a newline would end the comment and let what
// follows be read as keys) become '?'.
std::string CommentText(std::string s) {
  for (char& ch : s) {
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
  }
  return s;
}

std::string QuotedList(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + Quote(items[i]);
  return out + "]";
}

// ---------------------------------------------------------------------------------------------
// What is known of each node, then written as [[nodes]] entries.

struct NodeDef {
  std::string name;
  uint32_t cpus = 1;
  std::optional<uint64_t> memory_mb;
  uint32_t gpus = 0;
  std::string gpu_type;
  std::vector<std::string> mig;   // "1g.10gb:7"
  std::vector<std::string> gres;  // "nvme:fast:2"
  uint32_t shards_per_gpu = 0;
  std::vector<std::string> features;
  uint64_t tmp_disk_mb = 0;
  uint32_t weight = 1;
  std::string topology;
  int line = 0;  // the NodeName line that defined it (one [[nodes]] entry per line and path)

  // The same entry for consecutive nodes of one NodeName line.
  bool SameEntryAs(const NodeDef& o) const {
    return line == o.line && topology == o.topology && cpus == o.cpus && memory_mb == o.memory_mb &&
           gpus == o.gpus && gpu_type == o.gpu_type && mig == o.mig && gres == o.gres &&
           shards_per_gpu == o.shards_per_gpu && features == o.features &&
           tmp_disk_mb == o.tmp_disk_mb && weight == o.weight;
  }
};

struct PartitionDef {
  std::string name;
  std::vector<std::string> nodes;
  bool is_default = false;
  std::string max_time, default_time;  // Slurm's forms, which muster.toml takes as they are
  std::optional<uint32_t> priority_tier;
  std::string preempt_mode;  // lowercased; empty: the global one
  std::optional<int64_t> grace_s;
};

// A MIG profile's name: "1g.10gb", "3g.40gb", "1g.10gb+me".
bool IsMigProfile(std::string_view type) {
  auto digits = [&](size_t& i) {
    const size_t from = i;
    while (i < type.size() && type[i] >= '0' && type[i] <= '9') ++i;
    return i > from;
  };
  size_t i = 0;
  if (!digits(i) || type.substr(i, 2) != "g.") return false;
  i += 2;
  if (!digits(i) || type.substr(i, 2) != "gb") return false;
  i += 2;
  return i == type.size() || type.substr(i) == "+me";
}

class Importer {
 public:
  explicit Importer(const SlurmConfFiles& files) : files_(files) {}

  Result<SlurmConfImport> Run() {
    MUSTER_ASSIGN_OR_RETURN(std::vector<ConfLine> conf,
                            ParseConf(files_.slurm_conf, files_.slurm_conf_name));
    if (!files_.gres_conf.empty()) {
      MUSTER_ASSIGN_OR_RETURN(gres_lines_, ParseConf(files_.gres_conf, files_.gres_conf_name));
    }
    if (!files_.topology_conf.empty()) {
      MUSTER_ASSIGN_OR_RETURN(std::vector<ConfLine> topo,
                              ParseConf(files_.topology_conf, files_.topology_conf_name));
      MUSTER_RETURN_IF_ERROR(ReadTopology(topo));
    }
    MUSTER_RETURN_IF_ERROR(ReadGresTypes());
    for (const ConfLine& line : conf) {
      const std::string& head = line.settings.front().lower;
      if (head == "nodename") {
        MUSTER_RETURN_IF_ERROR(ReadNode(line));
      } else if (head == "partitionname") {
        MUSTER_RETURN_IF_ERROR(ReadPartition(line));
      } else if (head == "nodeset") {
        MUSTER_RETURN_IF_ERROR(ReadNodeSet(line));
      } else if (head == "include") {
        Left(line, line.settings.front(),
             "not followed: the importer reads the files it is given; append the included "
             "file's lines to slurm.conf (or import it as its own file) and run it again");
      } else if (head == "downnodes" || head == "frontendname" || head == "switchname") {
        Left(line, line.settings.front(),
             "not carried: Muster has no " + line.settings.front().key + " lines");
      } else {
        for (const Setting& s : line.settings) MUSTER_RETURN_IF_ERROR(ReadGlobal(line, s));
      }
    }
    if (topology_plugin_tree_ && files_.topology_conf.empty()) {
      not_carried_.push_back(files_.slurm_conf_name +
                             ": TopologyPlugin=topology/tree: no topology.conf was given, so the "
                             "nodes have no topology (give it as the third file)");
    }
    for (const auto& [name, path] : switch_of_node_) {
      if (!known_nodes_.count(name)) {
        not_carried_.push_back(files_.topology_conf_name + ": node " + name +
                               " is under a switch but slurm.conf does not define it");
      }
    }
    MUSTER_RETURN_IF_ERROR(ApplyGlobalPreemptMode());
    SlurmConfImport out;
    out.toml = Write();
    out.not_carried = not_carried_;
    auto check = ParseConfig(out.toml, "imported muster.toml");
    if (!check.ok()) {
      return Internal("the muster.toml made from " + files_.slurm_conf_name +
                      " does not load (please report it): " + check.status().message());
    }
    return out;
  }

 private:
  void Left(const ConfLine& line, const Setting& s, const std::string& why) {
    not_carried_.push_back(line.Where() + ": " + s.key + "=" + s.value + ": " + why);
  }

  Result<uint64_t> Number(const ConfLine& line, const Setting& s, uint64_t max) {
    auto v = ParseUint(s.value);
    if (!v || *v > max) {
      return InvalidArgument(line.Where() + ": " + s.key + ": expected a number up to " +
                             std::to_string(max) + ", got '" + s.value + "'");
    }
    return *v;
  }

  Result<int64_t> Time(const ConfLine& line, const Setting& s) {
    auto v = ParseTimeLimit(s.value);
    if (!v.ok()) return InvalidArgument(line.Where() + ": " + s.key + ": " + v.status().message());
    return *v;
  }

  Result<std::vector<std::string>> Hosts(const ConfLine& line, const Setting& s) {
    auto v = ExpandHostlist(s.value);
    if (!v.ok()) return InvalidArgument(line.Where() + ": " + s.key + ": " + v.status().message());
    return *v;
  }

  // ---- topology.conf: SwitchName=leaf1 Nodes=gpu[01-16]; SwitchName=spine Switches=leaf[1-4].
  Status ReadTopology(const std::vector<ConfLine>& lines) {
    std::map<std::string, std::string> parent;   // switch -> the switch above it
    std::map<std::string, std::string> leaf_of;  // node -> its switch
    for (const ConfLine& line : lines) {
      const Setting& head = line.settings.front();
      if (head.lower != "switchname") {
        not_carried_.push_back(line.Where() + ": " + head.key + "=" + head.value +
                               ": not a SwitchName line; ignored");
        continue;
      }
      for (const Setting& s : line.settings) {
        if (&s == &head) continue;
        if (s.lower == "nodes") {
          MUSTER_ASSIGN_OR_RETURN(auto nodes, Hosts(line, s));
          for (const std::string& n : nodes) leaf_of[n] = head.value;
        } else if (s.lower == "switches") {
          MUSTER_ASSIGN_OR_RETURN(auto below, Hosts(line, s));
          for (const std::string& b : below) parent[b] = head.value;
        } else {
          Left(line, s, "not carried: Muster's placement weighs the tree's shape, not link speeds");
        }
      }
    }
    // Each leaf switch's path from the top, once (a fabric has far fewer switches than nodes).
    constexpr size_t kMaxDepth = 64;
    std::map<std::string, std::string> path_of_leaf;
    for (const auto& [node, leaf] : leaf_of) {
      auto known = path_of_leaf.find(leaf);
      if (known == path_of_leaf.end()) {
        std::vector<std::string> chain{leaf};
        for (auto it = parent.find(leaf); it != parent.end(); it = parent.find(it->second)) {
          if (std::find(chain.begin(), chain.end(), it->second) != chain.end()) {
            return InvalidArgument(files_.topology_conf_name + ": switch " + it->second +
                                   " is above itself");
          }
          if (chain.size() == kMaxDepth) {
            return InvalidArgument(files_.topology_conf_name + ": switch " + leaf +
                                   " is more than " + std::to_string(kMaxDepth) + " levels deep");
          }
          chain.push_back(it->second);
        }
        std::reverse(chain.begin(), chain.end());
        known = path_of_leaf.emplace(leaf, Join(chain, "/")).first;
      }
      switch_of_node_[node] = known->second;
    }
    return Status::Ok();
  }

  // ---- gres.conf: the GPU type of nodes whose slurm.conf Gres= gives none.
  Status ReadGresTypes() {
    for (const ConfLine& line : gres_lines_) {
      const Setting* name = line.Find("name");
      const Setting* type = line.Find("type");
      const Setting* nodes = line.Find("nodename");
      for (const Setting& s : line.settings) {
        if (s.lower == "autodetect") {
          if (!EqualsIgnoreCase(s.value, "nvml")) {
            Left(line, s, "not needed: musterd finds the GPUs itself (NVML)");
          }
        } else if (s.lower == "file" || s.lower == "multiplefiles" || s.lower == "cores" ||
                   s.lower == "links" || s.lower == "count") {
          // What musterd discovers for itself: the device files, their CPUs and NVLinks.
        } else if (s.lower != "name" && s.lower != "type" && s.lower != "nodename") {
          Left(line, s, "not carried");
        }
      }
      if (!name || !EqualsIgnoreCase(name->value, "gpu") || !type) continue;
      std::vector<std::string> on;
      if (nodes) {
        MUSTER_ASSIGN_OR_RETURN(on, Hosts(line, *nodes));
      } else {
        on.push_back("");  // every node
      }
      for (const std::string& n : on) gres_conf_gpu_type_[n] = ToLower(type->value);
    }
    return Status::Ok();
  }

  std::string GresConfGpuType(const std::string& node) const {
    auto it = gres_conf_gpu_type_.find(node);
    if (it == gres_conf_gpu_type_.end()) it = gres_conf_gpu_type_.find("");
    return it == gres_conf_gpu_type_.end() ? "" : it->second;
  }

  // ---- NodeName lines.
  Status ReadNode(const ConfLine& line) {
    const Setting& head = line.settings.front();
    std::map<std::string, const Setting*> own;
    for (const Setting& s : line.settings) own[s.lower] = &s;
    if (EqualsIgnoreCase(head.value, "DEFAULT")) {
      for (const Setting& s : line.settings) {
        if (&s != &head) node_defaults_[s.lower] = {s, line};
      }
      return Status::Ok();
    }
    MUSTER_ASSIGN_OR_RETURN(std::vector<std::string> names, Hosts(line, head));
    // The defaults first, then the line's own words.
    std::vector<std::pair<Setting, ConfLine>> merged;
    for (const auto& [key, def] : node_defaults_) {
      if (!own.count(key)) merged.push_back(def);
    }
    for (const Setting& s : line.settings) {
      if (&s != &head) merged.push_back({s, line});
    }
    NodeDef proto;
    proto.line = line.number;
    uint64_t sockets = 1, cores = 1, threads = 1, boards = 1;
    std::optional<uint64_t> cpus;
    std::vector<std::pair<std::string, uint64_t>> gpu_types;  // whole GPUs by type
    uint64_t untyped_gpus = 0, shards = 0;
    for (const auto& [s, where] : merged) {
      const std::string& k = s.lower;
      if (k == "cpus" || k == "procs") {
        MUSTER_ASSIGN_OR_RETURN(cpus, Number(where, s, 1'000'000));
      } else if (k == "sockets" || k == "socketsperboard") {
        MUSTER_ASSIGN_OR_RETURN(sockets, Number(where, s, 4096));
      } else if (k == "corespersocket") {
        MUSTER_ASSIGN_OR_RETURN(cores, Number(where, s, 4096));
      } else if (k == "threadspercore") {
        MUSTER_ASSIGN_OR_RETURN(threads, Number(where, s, 64));
      } else if (k == "boards") {
        MUSTER_ASSIGN_OR_RETURN(boards, Number(where, s, 64));
      } else if (k == "realmemory") {
        MUSTER_ASSIGN_OR_RETURN(proto.memory_mb, Number(where, s, 1ULL << 40));
      } else if (k == "tmpdisk") {
        MUSTER_ASSIGN_OR_RETURN(proto.tmp_disk_mb, Number(where, s, 1ULL << 40));
      } else if (k == "feature" || k == "features" || k == "availablefeatures") {
        proto.features = Split(s.value, ',', true);
      } else if (k == "activefeatures") {
        // Changeable features (KNL modes) are not Muster's; the available ones are kept.
      } else if (k == "gres") {
        for (const std::string& item : Split(s.value, ',', true)) {
          // name[:type][:count], the count possibly with a K/M/G suffix, a "(S:0-1)" after it.
          std::string text = item.substr(0, item.find('('));
          std::vector<std::string> f = Split(text, ':');
          if (std::erase(f, "no_consume") > 0) {
            Left(where, s, "not carried: " + item + ": a GRES that is not consumed");
            continue;
          }
          uint64_t count = 1;
          if (f.size() >= 2) {
            std::string c = f.back();
            uint64_t scale = 1;
            if (!c.empty() && (c.back() == 'K' || c.back() == 'k')) scale = 1024;
            if (!c.empty() && (c.back() == 'M' || c.back() == 'm')) scale = 1024 * 1024;
            if (!c.empty() && (c.back() == 'G' || c.back() == 'g')) scale = 1024ULL * 1024 * 1024;
            if (scale > 1) c.pop_back();
            if (auto n = ParseUint(c)) {
              if (*n > (uint64_t{1} << 34)) {
                return InvalidArgument(where.Where() + ": Gres: count too large in '" + item + "'");
              }
              count = *n * scale;
              f.pop_back();
            }
          }
          const std::string name = ToLower(f[0]);
          const std::string type = f.size() >= 2 ? ToLower(f[1]) : "";
          if (name == "gpu" && IsMigProfile(type)) {
            proto.mig.push_back(type + ":" + std::to_string(count));
          } else if (name == "gpu" && type.empty()) {
            untyped_gpus += count;
          } else if (name == "gpu") {
            gpu_types.emplace_back(type, count);
          } else if (name == "shard") {
            shards += count;
          } else if (name == "mps") {
            Left(where, s,
                 "not carried: " + item +
                     ": MPS shares are not Muster's; GPU shards are "
                     "(shards_per_gpu)");
          } else if (count > 100'000) {
            Left(where, s,
                 "not carried: " + item +
                     ": a count GRES this large (bytes?) is not "
                     "a Muster GRES");
          } else {
            proto.gres.push_back(name + (type.empty() ? "" : ":" + type) + ":" +
                                 std::to_string(count));
          }
        }
      } else if (k == "nodeaddr" || k == "nodehostname" || k == "port") {
        Left(where, s,
             "not carried: agents reach the controller themselves; a node's name is its host's "
             "name (musterd --node)");
      } else if (k == "state") {
        const std::string st = ToUpper(s.value);
        if (st != "UNKNOWN" && st != "IDLE") {
          Left(where, s,
               "not carried: nodes start as their agents register; drain with `muster "
               "node drain` (FUTURE/CLOUD nodes: leave them out until they exist)");
        }
      } else if (k == "weight") {
        MUSTER_ASSIGN_OR_RETURN(uint64_t w, Number(where, s, 4'294'967'280ULL));
        proto.weight = static_cast<uint32_t>(w);
      } else if (k == "reason") {
      } else {
        Left(where, s, "not carried");
      }
    }
    const uint64_t cpu_count = cpus.value_or(boards * sockets * cores * threads);
    if (cpu_count == 0 || cpu_count > 1'000'000) {
      return InvalidArgument(line.Where() + ": " + std::to_string(cpu_count) +
                             " CPUs per node: expected 1 to 1,000,000");
    }
    proto.cpus = static_cast<uint32_t>(cpu_count);
    uint64_t gpu_total = untyped_gpus;
    for (const auto& [type, count] : gpu_types) gpu_total += count;
    if (gpu_total > 1024 || shards > 1024ULL * 1024) {
      return InvalidArgument(line.Where() + ": more than 1024 GPUs (or their shards) per node");
    }
    if (!gpu_types.empty()) {
      proto.gpu_type = gpu_types.front().first;
      for (const auto& [type, count] : gpu_types) {
        if (type == proto.gpu_type) {
          proto.gpus += static_cast<uint32_t>(count);
        } else {
          Left(line, head,
               "not carried: GPUs of type " + type + " beside " + proto.gpu_type +
                   ": a Muster node has one GPU type (split the node's GPUs, or "
                   "describe it by its main type)");
        }
      }
      if (untyped_gpus > 0) {
        Left(line, head,
             "not carried: " + std::to_string(untyped_gpus) +
                 " GPUs without a type beside typed ones");
      }
    } else {
      proto.gpus = static_cast<uint32_t>(untyped_gpus);
    }
    if (shards > 0) {
      if (proto.gpus > 0 && shards % proto.gpus == 0) {
        proto.shards_per_gpu = static_cast<uint32_t>(shards / proto.gpus);
      } else {
        Left(line, head,
             "not carried: " + std::to_string(shards) + " shards that do not divide evenly over " +
                 std::to_string(proto.gpus) + " whole GPUs");
      }
    }
    if (known_nodes_.size() + names.size() > 1'000'000) {
      return InvalidArgument(line.Where() + ": more than a million nodes");
    }
    for (const std::string& n : names) {
      if (!known_nodes_.insert(n).second) {
        return InvalidArgument(line.Where() + ": node " + n + " is defined twice");
      }
      NodeDef d = proto;
      d.name = n;
      if (d.gpus > 0 && d.gpu_type.empty()) d.gpu_type = GresConfGpuType(n);
      auto topo = switch_of_node_.find(n);
      if (topo != switch_of_node_.end()) d.topology = topo->second;
      nodes_.push_back(std::move(d));
    }
    return Status::Ok();
  }

  // ---- NodeSet lines: a name for a hostlist (Feature= sets are resolved too).
  Status ReadNodeSet(const ConfLine& line) {
    const Setting& head = line.settings.front();
    std::vector<std::string> members;
    for (const Setting& s : line.settings) {
      if (s.lower == "nodes") {
        MUSTER_ASSIGN_OR_RETURN(members, Hosts(line, s));
      } else if (s.lower == "feature") {
        for (const NodeDef& n : nodes_) {
          if (std::find(n.features.begin(), n.features.end(), s.value) != n.features.end()) {
            members.push_back(n.name);
          }
        }
      } else if (&s != &head) {
        Left(line, s, "not carried");
      }
    }
    node_sets_[head.value] = members;
    return Status::Ok();
  }

  // ---- PartitionName lines.
  Status ReadPartition(const ConfLine& line) {
    const Setting& head = line.settings.front();
    std::map<std::string, const Setting*> own;
    for (const Setting& s : line.settings) own[s.lower] = &s;
    if (EqualsIgnoreCase(head.value, "DEFAULT")) {
      for (const Setting& s : line.settings) {
        if (&s != &head) partition_defaults_[s.lower] = {s, line};
      }
      return Status::Ok();
    }
    std::vector<std::pair<Setting, ConfLine>> merged;
    for (const auto& [key, def] : partition_defaults_) {
      if (!own.count(key)) merged.push_back(def);
    }
    for (const Setting& s : line.settings) {
      if (&s != &head) merged.push_back({s, line});
    }
    PartitionDef p;
    p.name = head.value;
    for (const auto& [s, where] : merged) {
      const std::string& k = s.lower;
      if (k == "nodes") {
        p.nodes.clear();
        for (const std::string& part : SplitOutsideBrackets(s.value)) {
          if (EqualsIgnoreCase(part, "ALL")) {
            for (const NodeDef& n : nodes_) p.nodes.push_back(n.name);
            continue;
          }
          if (auto set = node_sets_.find(part); set != node_sets_.end()) {
            p.nodes.insert(p.nodes.end(), set->second.begin(), set->second.end());
            continue;
          }
          MUSTER_ASSIGN_OR_RETURN(auto hosts, Hosts(where, Setting{s.key, s.lower, part}));
          p.nodes.insert(p.nodes.end(), hosts.begin(), hosts.end());
        }
      } else if (k == "default") {
        p.is_default = EqualsIgnoreCase(s.value, "YES");
      } else if (k == "maxtime" || k == "defaulttime") {
        MUSTER_ASSIGN_OR_RETURN(int64_t ms, Time(where, s));
        (k == "maxtime" ? p.max_time : p.default_time) = ms == 0 ? "" : s.value;
      } else if (k == "prioritytier") {
        MUSTER_ASSIGN_OR_RETURN(uint64_t tier, Number(where, s, 65'535));
        p.priority_tier = static_cast<uint32_t>(tier);
      } else if (k == "preemptmode") {
        MUSTER_ASSIGN_OR_RETURN(p.preempt_mode, PreemptMode(where, s));
      } else if (k == "gracetime") {
        MUSTER_ASSIGN_OR_RETURN(uint64_t g, Number(where, s, 365ULL * 86'400));
        p.grace_s = static_cast<int64_t>(g);
      } else if (k == "state") {
        if (!EqualsIgnoreCase(s.value, "UP")) {
          Left(where, s,
               "not carried: a Muster partition is always up; drain its nodes or "
               "hold its jobs instead");
        }
      } else if (k == "allowgroups" || k == "allowaccounts" || k == "allowqos") {
        if (!EqualsIgnoreCase(s.value, "ALL")) {
          Left(where, s,
               "not carried: a Muster partition admits users by name or uid "
               "(allowed_uids, denied_uids), not by group, account or QoS");
        }
      } else if (k == "priorityjobfactor") {
        Left(where, s,
             "not carried: the partition factor of Muster's priority is its "
             "priority_tier");
      } else {
        Left(where, s, "not carried");
      }
    }
    std::set<std::string> seen;
    for (const std::string& n : p.nodes) {
      if (!known_nodes_.count(n)) {
        return InvalidArgument(line.Where() + ": partition " + p.name + ": unknown node " + n);
      }
      if (!seen.insert(n).second) {
        return InvalidArgument(line.Where() + ": partition " + p.name + " names node " + n +
                               " twice");
      }
    }
    if (p.nodes.empty()) {
      not_carried_.push_back(line.Where() + ": PartitionName=" + p.name +
                             ": not carried: it has no nodes");
      return Status::Ok();
    }
    partitions_.push_back(std::move(p));
    return Status::Ok();
  }

  Result<std::string> PreemptMode(const ConfLine& line, const Setting& s) {
    std::string mode;
    for (const std::string& w : Split(ToLower(s.value), ',', true)) {
      if (w == "gang" || w == "within") {
        Left(line, s, "not carried: " + ToUpper(w) + " (no time slicing in Muster)");
      } else if (w == "off" || w == "requeue" || w == "cancel" || w == "suspend") {
        mode = w;
      } else {
        return InvalidArgument(line.Where() + ": " + s.key + ": unknown mode '" + w + "'");
      }
    }
    return mode;
  }

  // Partitions' preempt modes count under preempt/partition_prio only, as in Slurm.
  Status ApplyGlobalPreemptMode() {
    for (PartitionDef& p : partitions_) {
      if (p.preempt_mode.empty() && partition_prio_) p.preempt_mode = global_preempt_mode_;
      if (!partition_prio_ && !p.preempt_mode.empty() && p.preempt_mode != "off") {
        not_carried_.push_back(files_.slurm_conf_name + ": PartitionName=" + p.name +
                               " PreemptMode=" + p.preempt_mode +
                               ": not carried: PreemptType is not preempt/partition_prio");
      }
      if (!partition_prio_) p.preempt_mode.clear();
    }
    return Status::Ok();
  }

  // ---- Everything else: one KEY=VALUE of the cluster.
  Status ReadGlobal(const ConfLine& line, const Setting& s) {
    const std::string& k = s.lower;
    // Seconds as a [scheduling] key in milliseconds, within what muster.toml takes: 0 (Slurm's
    // "never") where `zero_means` says what Muster does instead, out of range clamped; both
    // named.
    auto seconds_as_ms = [&](const char* key, uint64_t min_s, uint64_t max_s,
                             const char* zero_means) -> Status {
      MUSTER_ASSIGN_OR_RETURN(uint64_t v, Number(line, s, 86'400ULL * 365));
      if (v == 0 && zero_means) {
        Left(line, s, std::string("not carried: ") + zero_means);
        return Status::Ok();
      }
      const uint64_t kept = std::clamp(v, min_s, max_s);
      if (kept != v) {
        Left(line, s,
             "not carried as it is: " + std::string(key) + " takes " + std::to_string(min_s) +
                 " to " + std::to_string(max_s) + " s; " + std::to_string(kept) + " s is used");
      }
      scheduling_[key] = std::to_string(kept * 1000);
      return Status::Ok();
    };
    auto time_as_ms = [&](const char* key) -> Status {
      MUSTER_ASSIGN_OR_RETURN(int64_t ms, Time(line, s));
      scheduling_[key] = std::to_string(ms);
      return Status::Ok();
    };
    auto weight = [&](const char* key) -> Status {
      MUSTER_ASSIGN_OR_RETURN(uint64_t v, Number(line, s, 1'000'000'000));
      scheduling_[key] = std::to_string(v);
      return Status::Ok();
    };
    if (k == "clustername") {
      cluster_name_ = s.value;
    } else if (k == "slurmctldhost" || k == "controlmachine" || k == "backupcontroller") {
      const std::string host = s.value.substr(0, s.value.find('('));
      if (controller_host_.empty() && k != "backupcontroller") {
        controller_host_ = host;
      } else {
        Left(line, s,
             "not carried: a second controller is a hot standby elected through etcd "
             "([[controllers]], controller.etcd_endpoints; docs/admin-guide.md)");
      }
    } else if (k == "slurmctldport") {
      const std::string port = s.value.substr(0, s.value.find('-'));
      if (!ParseUint(port)) return InvalidArgument(line.Where() + ": SlurmctldPort: not a port");
      agent_port_ = port;
    } else if (k == "killwait") {
      return seconds_as_ms("kill_grace_ms", 0, 3600, nullptr);
    } else if (k == "minjobage") {
      return seconds_as_ms("finished_job_retention_ms", 1, 86'400,
                           "finished jobs stay in the queue's view at most a day "
                           "(finished_job_retention_ms); sacct keeps them for "
                           "accounting_retention_days");
    } else if (k == "slurmdtimeout") {
      return seconds_as_ms("node_down_ms", 30, 86'400,
                           "a silent node is declared down after node_down_ms (at most a day)");
    } else if (k == "maxjobcount") {
      MUSTER_ASSIGN_OR_RETURN(uint64_t v, Number(line, s, 100'000'000));
      scheduling_["max_job_count"] = std::to_string(v);
    } else if (k == "maxarraysize") {
      MUSTER_ASSIGN_OR_RETURN(uint64_t v, Number(line, s, 4'000'001));
      scheduling_["max_array_size"] = std::to_string(v);
    } else if (k == "priorityweightage") {
      return weight("priority_weight_age");
    } else if (k == "priorityweightfairshare") {
      return weight("priority_weight_fairshare");
    } else if (k == "priorityweightjobsize") {
      return weight("priority_weight_size");
    } else if (k == "priorityweightpartition") {
      return weight("priority_weight_partition");
    } else if (k == "priorityweightqos") {
      return weight("priority_weight_qos");
    } else if (k == "prioritymaxage") {
      return time_as_ms("priority_max_age_ms");
    } else if (k == "prioritydecayhalflife") {
      MUSTER_ASSIGN_OR_RETURN(int64_t ms, Time(line, s));
      if (ms == 0) {
        Left(line, s,
             "not carried: usage that never decays (Muster's half-life is at most ten "
             "years)");
      } else {
        scheduling_["fairshare_half_life_ms"] = std::to_string(std::max<int64_t>(ms, 60'000));
      }
    } else if (k == "prioritytype") {
      if (EqualsIgnoreCase(s.value, "priority/basic")) {
        scheduling_["order"] = Quote("fcfs");
      } else if (!EqualsIgnoreCase(s.value, "priority/multifactor")) {
        Left(line, s, "not carried");
      }
    } else if (k == "priorityflags") {
      for (const std::string& f : Split(s.value, ',', true)) {
        if (!EqualsIgnoreCase(f, "FAIR_TREE")) {
          Left(line, Setting{s.key, s.lower, f},
               "not carried: Muster's fair share is Fair Tree (or DRF: fairshare_algorithm)");
        }
      }
    } else if (k == "schedulertype") {
      if (EqualsIgnoreCase(s.value, "sched/builtin")) {
        scheduling_["backfill_depth"] = "0";
      } else if (!EqualsIgnoreCase(s.value, "sched/backfill")) {
        Left(line, s, "not carried");
      }
    } else if (k == "schedulerparameters") {
      for (const std::string& item : Split(s.value, ',', true)) {
        const std::string key = ToLower(item.substr(0, item.find('=')));
        const std::string val =
            item.find('=') == std::string::npos ? "" : item.substr(item.find('=') + 1);
        const Setting one{s.key, s.lower, item};
        if (key == "kill_invalid_depend") {
          scheduling_["kill_invalid_depend"] = "true";
        } else if (key == "enable_user_top") {
          scheduling_["enable_user_top"] = "true";
        } else if (key == "max_switch_wait" && ParseUint(val)) {
          scheduling_["max_switch_wait_ms"] = std::to_string(*ParseUint(val) * 1000);
        } else if (StartsWith(key, "bf_") || key == "default_queue_depth" ||
                   key == "sched_interval" || key == "sched_min_interval") {
          Left(line, one,
               "not carried: Muster's pass looks at the whole queue every time, with "
               "backfill_depth reservations (scheduling.backfill_depth)");
        } else {
          Left(line, one, "not carried");
        }
      }
    } else if (k == "preempttype") {
      if (EqualsIgnoreCase(s.value, "preempt/partition_prio")) {
        partition_prio_ = true;
      } else if (EqualsIgnoreCase(s.value, "preempt/qos")) {
        Left(line, s,
             "not carried here: QoS preemption comes from the QoS' own preempt lists "
             "([[qos]] preempt = [...]; sacctmgr's QoS are not in slurm.conf)");
      } else if (!EqualsIgnoreCase(s.value, "preempt/none")) {
        Left(line, s, "not carried");
      }
    } else if (k == "preemptmode") {
      MUSTER_ASSIGN_OR_RETURN(global_preempt_mode_, PreemptMode(line, s));
    } else if (k == "preemptexempttime") {
      MUSTER_ASSIGN_OR_RETURN(int64_t ms, Time(line, s));
      scheduling_["preempt_min_runtime_ms"] = std::to_string(ms);
    } else if (k == "topologyplugin") {
      if (EqualsIgnoreCase(s.value, "topology/tree")) {
        topology_plugin_tree_ = true;
      } else if (!EqualsIgnoreCase(s.value, "topology/none")) {
        Left(line, s, "not carried: Muster's topology is a tree (topology.conf's)");
      }
    } else if (k == "prolog" || k == "epilog") {
      agent_[k] = Quote(s.value);
    } else if (k == "prologepilogtimeout") {
      MUSTER_ASSIGN_OR_RETURN(uint64_t v, Number(line, s, 86'400));
      agent_["prolog_timeout_s"] = agent_["epilog_timeout_s"] = std::to_string(v);
    } else if (k == "healthcheckprogram") {
      agent_["health_check_program"] = Quote(s.value);
    } else if (k == "rebootprogram") {
      if (s.value.empty() || s.value[0] != '/') {
        Left(line, s, "not carried: [agent] reboot_program needs an absolute path");
      } else {
        agent_["reboot_program"] = Quote(s.value);
      }
    } else if (k == "resumetimeout") {
      MUSTER_ASSIGN_OR_RETURN(uint64_t v, Number(line, s, 86'400));
      if (v > 0) scheduling_["reboot_timeout_s"] = std::to_string(v);
    } else if (k == "healthcheckinterval") {
      MUSTER_ASSIGN_OR_RETURN(uint64_t v, Number(line, s, 86'400 * 7));
      if (v > 0) agent_["health_check_interval_s"] = std::to_string(v);
    } else if (k == "mailprog") {
      if (s.value.empty() || s.value[0] != '/') {
        Left(line, s, "not carried: controller.mail_prog needs an absolute path");
      } else {
        controller_["mail_prog"] = Quote(s.value);
      }
    } else if (k == "propagateresourcelimits") {
      scheduling_["propagate_resource_limits"] = Quote(s.value);
    } else if (k == "propagateresourcelimitsexcept") {
      scheduling_["propagate_resource_limits_except"] = Quote(s.value);
    } else if (k == "privatedata") {
      for (const std::string& w : Split(ToLower(s.value), ',', true)) {
        if (w == "jobs" || w == "usage" || w == "accounts" || w == "users") {
          private_data_.push_back(w);
        } else {
          Left(line, Setting{s.key, s.lower, w},
               "not carried: Muster hides jobs, usage, "
               "accounts and users");
        }
      }
    } else if (k == "licenses") {
      for (const std::string& item : Split(s.value, ',', true)) {
        const size_t colon = item.find_first_of(":*");
        const std::string name = item.substr(0, colon);
        uint64_t count = 1;
        if (colon != std::string::npos) {
          auto n = ParseUint(item.substr(colon + 1));
          if (!n) return InvalidArgument(line.Where() + ": Licenses: bad count in '" + item + "'");
          count = *n;
        }
        licenses_[name] = count;
      }
    } else if (k == "grestypes") {
      // Which GRES exist follows from the nodes' Gres=.
    } else if (NotNeeded(k)) {
      Left(line, s, std::string("not needed: ") + NotNeeded(k));
    } else {
      Left(line, s, NotCarried(k));
    }
    return Status::Ok();
  }

  // ---- The muster.toml.
  std::string Write() const {
    std::ostringstream o;
    o << "# muster.toml made by `muster import-slurm-conf` from "
      << CommentText(files_.slurm_conf_name);
    if (!files_.gres_conf.empty()) o << ", " << CommentText(files_.gres_conf_name);
    if (!files_.topology_conf.empty()) o << ", " << CommentText(files_.topology_conf_name);
    o << ".\n# Every key: docs/config.md.";
    if (!not_carried_.empty()) {
      o << " Settings not carried over (" << not_carried_.size() << "):\n";
      for (const std::string& n : not_carried_) o << "#   " << CommentText(n) << "\n";
    } else {
      o << "\n";
    }
    o << "\ncluster_name = " << Quote(cluster_name_.empty() ? "muster" : cluster_name_) << "\n";
    if (!private_data_.empty()) o << "private_data = " << QuotedList(private_data_) << "\n";
    o << "\n[controller]\n";
    if (!controller_host_.empty()) {
      o << "agent_address = " << Quote(controller_host_ + ":" + agent_port_) << "\n"
        << "# Login and compute nodes reach the user API here, with MUNGE.\n"
        << "api_address = " << Quote(controller_host_ + ":6819") << "\n";
    }
    for (const auto& [k, v] : controller_) o << k << " = " << v << "\n";
    // The agents' channel is mutual TLS beyond loopback (the certificates `muster certs` makes
    // there), node keys on a one-host cluster.
    if (controller_host_.empty()) {
      o << "\n# Agents prove which node they are with a key of their own (`muster certs "
           "--node-keys`).\n[node_auth]\nkey_file = \"/etc/muster/node-keys/%n.key\"\n";
    } else {
      o << "\n# Mutual TLS between the controller and the agents: `muster certs` makes these.\n"
        << "[tls]\nca_file = \"/etc/muster/tls/ca.crt\"\n"
        << "controller_cert_file = \"/etc/muster/tls/controller.crt\"\n"
        << "controller_key_file = \"/etc/muster/tls/controller.key\"\n"
        << "node_cert_file = \"/etc/muster/tls/%n.crt\"\n"
        << "node_key_file = \"/etc/muster/tls/%n.key\"\n";
    }
    if (!scheduling_.empty()) {
      o << "\n[scheduling]\n";
      for (const auto& [k, v] : scheduling_) o << k << " = " << v << "\n";
    }
    if (!agent_.empty()) {
      o << "\n[agent]\n";
      for (const auto& [k, v] : agent_) o << k << " = " << v << "\n";
    }
    if (!licenses_.empty()) {
      o << "\n[licenses]\n";
      for (const auto& [k, v] : licenses_) o << Quote(k) << " = " << v << "\n";
    }
    for (size_t i = 0; i < nodes_.size();) {
      size_t j = i + 1;
      while (j < nodes_.size() && nodes_[j].SameEntryAs(nodes_[i])) ++j;
      std::vector<std::string> names;
      for (size_t k = i; k < j; ++k) names.push_back(nodes_[k].name);
      const NodeDef& n = nodes_[i];
      o << "\n[[nodes]]\nnames = " << Quote(CompressHostlist(names)) << "\ncpus = " << n.cpus
        << "\n";
      if (n.memory_mb) o << "memory_mb = " << *n.memory_mb << "\n";
      if (n.gpus > 0) {
        o << "gpus = " << n.gpus << "\n";
        if (!n.gpu_type.empty()) o << "gpu_type = " << Quote(n.gpu_type) << "\n";
      }
      if (!n.mig.empty()) o << "mig = " << QuotedList(n.mig) << "\n";
      if (n.shards_per_gpu > 0) o << "shards_per_gpu = " << n.shards_per_gpu << "\n";
      if (!n.gres.empty()) o << "gres = " << QuotedList(n.gres) << "\n";
      if (!n.features.empty()) o << "features = " << QuotedList(n.features) << "\n";
      if (n.tmp_disk_mb > 0) o << "tmp_disk_mb = " << n.tmp_disk_mb << "\n";
      if (n.weight != 1) o << "weight = " << n.weight << "\n";
      if (!n.topology.empty()) o << "topology = " << Quote(n.topology) << "\n";
      i = j;
    }
    for (const PartitionDef& p : partitions_) {
      o << "\n[[partition]]\nname = " << Quote(p.name)
        << "\nnodes = " << Quote(CompressHostlist(p.nodes)) << "\n";
      if (p.is_default) o << "default = true\n";
      if (!p.max_time.empty()) o << "max_time = " << Quote(p.max_time) << "\n";
      if (!p.default_time.empty()) o << "default_time = " << Quote(p.default_time) << "\n";
      if (p.priority_tier) o << "priority_tier = " << *p.priority_tier << "\n";
      if (!p.preempt_mode.empty() && p.preempt_mode != "off") {
        o << "preempt_mode = " << Quote(p.preempt_mode) << "\n";
      }
      if (p.grace_s) o << "grace_time = " << *p.grace_s << "\n";
    }
    return o.str();
  }

  const SlurmConfFiles& files_;
  std::vector<ConfLine> gres_lines_;
  std::map<std::string, std::string> switch_of_node_;      // node -> "spine/leaf"
  std::map<std::string, std::string> gres_conf_gpu_type_;  // node ("" any) -> type
  std::map<std::string, std::pair<Setting, ConfLine>> node_defaults_, partition_defaults_;
  std::map<std::string, std::vector<std::string>> node_sets_;
  std::set<std::string> known_nodes_;
  std::vector<NodeDef> nodes_;
  std::vector<PartitionDef> partitions_;
  std::string cluster_name_, controller_host_, agent_port_ = "6817";
  std::map<std::string, std::string> controller_, scheduling_, agent_;  // key -> TOML value
  std::map<std::string, uint64_t> licenses_;
  std::vector<std::string> private_data_;
  bool partition_prio_ = false, topology_plugin_tree_ = false;
  std::string global_preempt_mode_ = "off";
  std::vector<std::string> not_carried_;
};

}  // namespace

Result<SlurmConfImport> ImportSlurmConf(const SlurmConfFiles& files) {
  return Importer(files).Run();
}

}  // namespace muster::client
