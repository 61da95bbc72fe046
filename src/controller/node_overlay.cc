#include "node_overlay.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "muster/common/hostlist.h"
#include "muster/common/strings.h"

namespace muster::controller {
namespace {

constexpr size_t kMaxFeatures = 64;
constexpr size_t kMaxNameLength = 64;
constexpr uint64_t kMaxWeight = 4'294'967'280;  // Slurm's largest

bool IsWordChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
}

bool IsWord(const std::string& s) {
  return !s.empty() && s.size() <= kMaxNameLength && std::all_of(s.begin(), s.end(), IsWordChar);
}

// A feature must read back as one term of --constraint ("a&b|c", "[x*2]").
Status CheckFeatures(const v1::NodeSettings::Features& f) {
  if (static_cast<size_t>(f.names_size()) > kMaxFeatures) {
    return InvalidArgument("at most " + std::to_string(kMaxFeatures) + " features a node");
  }
  std::set<std::string> seen;
  for (const std::string& name : f.names()) {
    if (!IsWord(name)) {
      return InvalidArgument("feature '" + name.substr(0, kMaxNameLength) +
                             "' is not valid (letters, digits, '.', '_' and '-', at most 64)");
    }
    if (!seen.insert(name).second) return InvalidArgument("feature '" + name + "' given twice");
  }
  return Status::Ok();
}

std::string SettingsText(const v1::NodeSettings& s) {
  std::string out;
  auto add = [&](const std::string& t) { out += (out.empty() ? "" : "; ") + t; };
  if (s.has_features()) {
    add("features " +
        (s.features().names().empty()
             ? std::string("(none)")
             : Join({s.features().names().begin(), s.features().names().end()}, ",")));
  }
  if (s.has_weight()) add("weight " + std::to_string(s.weight()));
  if (s.has_gres()) add("gres " + (s.gres().empty() ? std::string("(none)") : s.gres()));
  return out;
}

Result<std::vector<std::string>> NamedNodes(const std::string& hostlist, const Config& config) {
  if (hostlist == "ALL") {
    std::vector<std::string> all;
    for (const NodeConfig& n : config.nodes) all.push_back(n.name);
    return all;
  }
  MUSTER_ASSIGN_OR_RETURN(std::vector<std::string> names, ExpandHostlist(hostlist));
  if (names.empty()) return InvalidArgument("no node names given");
  for (const std::string& n : names) {
    if (!config.FindNode(n)) return NotFound("no node named '" + n.substr(0, 64) + "'");
  }
  return names;
}

}  // namespace

Status ApplyLiveGres(const std::string& text, NodeConfig& node) {
  // MIG slices (GRES "gpu" with a profile) and shards per GPU stay the file's.
  std::vector<NodeConfig::Gres> mig;
  for (const NodeConfig::Gres& g : node.gres) {
    if (g.name == "gpu") mig.push_back(g);
  }
  uint32_t gpus = 0;
  std::string gpu_type;
  bool gpus_given = false;
  std::vector<NodeConfig::Gres> others;
  std::set<std::pair<std::string, std::string>> seen;
  const std::string trimmed(Trim(text));
  if (!trimmed.empty() && trimmed != "(null)") {
    for (const std::string& item : Split(trimmed, ',')) {
      std::vector<std::string> f = Split(item, ':');
      const std::string shown = "'" + item.substr(0, 64) + "'";
      if (f.empty() || f.size() > 3) {
        return InvalidArgument("GRES " + shown + ": expected NAME[:TYPE][:COUNT]");
      }
      for (std::string& part : f) part = std::string(Trim(part));
      uint64_t count = 1;
      std::string type;
      if (f.size() >= 2) {
        if (auto n = ParseUint(f.back())) {
          count = *n;
          f.pop_back();
        }
      }
      if (f.size() == 2) type = f[1];
      if (f.size() > 2 || !IsWord(f[0]) || (!type.empty() && !IsWord(type))) {
        return InvalidArgument("GRES " + shown + ": expected NAME[:TYPE][:COUNT]");
      }
      // As the file's: names and other GRES types in lower case, a GPU type as written (the
      // file's own spelling when it is the same type).
      const std::string name = ToLower(f[0]);
      if (name != "gpu") type = ToLower(type);
      if (name == "gpu" && ToLower(type) == ToLower(node.gpu_type)) type = node.gpu_type;
      if (name == "shard" || name == "mps") {
        return InvalidArgument("GRES " + shown +
                               ": shards are set in the config file (shards_per_gpu: they follow "
                               "the node's GPUs), not live");
      }
      if (!seen.insert({name, type}).second) {
        return InvalidArgument("GRES " + shown + " given twice");
      }
      if (name == "gpu") {
        if (gpus_given) {
          return InvalidArgument("GRES " + shown + ": one GPU type a node (gpu[:TYPE]:COUNT)");
        }
        if (count > 1024) return InvalidArgument("GRES " + shown + ": at most 1024 GPUs");
        gpus_given = true;
        gpus = static_cast<uint32_t>(count);
        gpu_type = type;
        continue;
      }
      if (count > 100'000) return InvalidArgument("GRES " + shown + ": at most 100000");
      if (count == 0) continue;
      others.push_back({name, type, static_cast<uint32_t>(count)});
    }
  }
  node.gpus = gpus;
  if (!gpu_type.empty()) node.gpu_type = gpu_type;
  if (node.gpus > 0 && node.gpu_type.empty()) node.gpu_type = "gpu";
  node.gres = std::move(mig);
  node.gres.insert(node.gres.end(), others.begin(), others.end());
  return Status::Ok();
}

void OverlayNodeSettings(Config& config, const NodeSettingsMap& settings,
                         std::vector<std::string>* problems) {
  for (NodeConfig& node : config.nodes) {
    auto it = settings.find(node.name);
    if (it == settings.end()) continue;
    const v1::NodeSettings& s = it->second;
    if (s.has_features()) {
      node.features.assign(s.features().names().begin(), s.features().names().end());
    }
    if (s.has_weight()) node.weight = s.weight();
    if (s.has_gres()) {
      NodeConfig next = node;
      if (Status st = ApplyLiveGres(s.gres(), next); st.ok()) {
        node = std::move(next);
      } else if (problems) {
        problems->push_back("the live GRES of node " + node.name + " no longer apply (" +
                            st.message() + "); the file's are used until it is reset");
      }
    }
  }
}

Result<NodeSettingsChange> PlanNodeSettingsChange(const v1::UpdateNodeRequest& req,
                                                  const Config& config,
                                                  const NodeSettingsMap& current,
                                                  const std::string& user, TimeMs now) {
  NodeSettingsChange change;
  MUSTER_ASSIGN_OR_RETURN(change.nodes, NamedNodes(req.nodes(), config));
  change.next = current;
  const std::string who = CompressHostlist(change.nodes);
  if (req.action() == v1::UpdateNodeRequest::SET) {
    const v1::NodeSettings& s = req.settings();
    if (!s.has_features() && !s.has_weight() && !s.has_gres()) {
      return InvalidArgument("nothing to set: give features, a weight or GRES");
    }
    if (s.has_features()) MUSTER_RETURN_IF_ERROR(CheckFeatures(s.features()));
    if (s.has_weight() && s.weight() > kMaxWeight) {
      return InvalidArgument("weight " + std::to_string(s.weight()) + " is above " +
                             std::to_string(kMaxWeight));
    }
    if (s.has_gres()) {
      if (s.gres().size() > 4096) return InvalidArgument("GRES text too long");
      for (char c : s.gres()) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          return InvalidArgument("GRES text has a control character");
        }
      }
      if (Split(s.gres(), ',').size() > 64) return InvalidArgument("at most 64 GRES a node");
    }
    for (const std::string& n : change.nodes) {
      if (s.has_gres()) {
        NodeConfig probe = *config.FindNode(n);
        MUSTER_RETURN_IF_ERROR(ApplyLiveGres(s.gres(), probe));
      }
      v1::NodeSettings& next = change.next[n];
      if (s.has_features()) *next.mutable_features() = s.features();
      if (s.has_weight()) next.set_weight(s.weight());
      if (s.has_gres()) next.set_gres(std::string(Trim(s.gres())));
      next.set_user(user);
      next.set_updated_ms(now);
    }
    change.summary = "node " + who + ": " + SettingsText(s);
    return change;
  }
  if (req.action() != v1::UpdateNodeRequest::RESET) {
    return InvalidArgument("not a change of node settings");
  }
  std::set<std::string> fields(req.reset().begin(), req.reset().end());
  for (const std::string& f : fields) {
    if (f != "features" && f != "weight" && f != "gres") {
      return InvalidArgument("cannot reset '" + f.substr(0, 64) +
                             "' (features, weight or gres; none: all three)");
    }
  }
  const bool all = fields.empty();
  bool any = false;
  for (const std::string& n : change.nodes) {
    auto it = change.next.find(n);
    if (it == change.next.end()) continue;
    v1::NodeSettings& s = it->second;
    if ((all || fields.count("features")) && s.has_features()) {
      s.clear_features();
      any = true;
    }
    if ((all || fields.count("weight")) && s.has_weight()) {
      s.clear_weight();
      any = true;
    }
    if ((all || fields.count("gres")) && s.has_gres()) {
      s.clear_gres();
      any = true;
    }
    if (!HasLiveSettings(s)) {
      change.next.erase(it);
    } else {
      s.set_user(user);
      s.set_updated_ms(now);
    }
  }
  const std::string what =
      all ? "features, weight and GRES" : Join({fields.begin(), fields.end()}, ", ");
  if (!any) return InvalidArgument("nothing to reset: " + who + " has no " + what + " set live");
  change.summary = "node " + who + ": " + what + " back to the config file's";
  return change;
}

std::string NodeSettingsRequestText(const v1::UpdateNodeRequest& req) {
  std::string text;
  if (req.action() == v1::UpdateNodeRequest::RESET) {
    text = "reset " + (req.reset().empty() ? std::string("all")
                                           : Join({req.reset().begin(), req.reset().end()}, ","));
  } else {
    text = SettingsText(req.settings());
  }
  return Printable(text.substr(0, 1024));
}

std::vector<std::string> LiveSettingNames(const v1::NodeSettings& s) {
  std::vector<std::string> out;
  if (s.has_features()) out.push_back("features");
  if (s.has_weight()) out.push_back("weight");
  if (s.has_gres()) out.push_back("gres");
  return out;
}

bool HasLiveSettings(const v1::NodeSettings& s) {
  return s.has_features() || s.has_weight() || s.has_gres();
}

}  // namespace muster::controller
