#include "partition_overlay.h"

#include <algorithm>
#include <set>

#include "muster/common/hostlist.h"
#include "muster/common/strings.h"

namespace muster::controller {
namespace {

PartitionConfig FromRecord(const v1::PartitionRecord& r) {
  PartitionConfig p;
  p.name = r.name();
  p.nodes_expr = r.nodes();
  p.is_default = r.is_default();
  p.max_time_ms = r.max_time_ms();
  p.default_time_ms = r.default_time_ms();
  p.priority_tier = r.priority_tier();
  p.preempt_mode = r.preempt_mode().empty() ? "off" : r.preempt_mode();
  p.grace_time_ms = r.grace_time_ms();
  p.allowed_uids.assign(r.allowed_uids().begin(), r.allowed_uids().end());
  p.denied_uids.assign(r.denied_uids().begin(), r.denied_uids().end());
  return p;
}

v1::PartitionRecord ToRecord(const PartitionConfig& p) {
  v1::PartitionRecord r;
  r.set_name(p.name);
  r.set_nodes(p.nodes_expr.empty() ? CompressHostlist(p.nodes) : p.nodes_expr);
  r.set_is_default(p.is_default);
  r.set_max_time_ms(p.max_time_ms);
  r.set_default_time_ms(p.default_time_ms);
  r.set_priority_tier(p.priority_tier);
  r.set_preempt_mode(p.preempt_mode);
  r.set_grace_time_ms(p.grace_time_ms);
  for (const auto& u : p.allowed_uids) r.add_allowed_uids(u);
  for (const auto& u : p.denied_uids) r.add_denied_uids(u);
  return r;
}

// A partition as a file's would be checked: a valid name, nodes the config defines, times and
// preemption that make sense. Fills p.nodes from its expression.
Status CheckPartition(PartitionConfig& p, const Config& c) {
  if (!IsValidNodeName(p.name)) {
    return InvalidArgument("partition name '" + p.name.substr(0, 64) +
                           "' is not valid (letters, digits, '.', '_' and '-', at most 64)");
  }
  MUSTER_ASSIGN_OR_RETURN(p.nodes, ExpandHostlist(p.nodes_expr));
  if (p.nodes.empty()) return InvalidArgument("partition '" + p.name + "' needs nodes");
  for (const auto& n : p.nodes) {
    if (!c.FindNode(n)) {
      return InvalidArgument("partition '" + p.name + "' names node '" + n +
                             "', which no [[nodes]] entry defines");
    }
  }
  // As a file's times are bounded (100,000 days): end times stay far from overflow.
  constexpr int64_t kMaxMs = 100'000LL * 86'400'000;
  if (p.max_time_ms < 0 || p.default_time_ms < 0 || p.max_time_ms > kMaxMs ||
      p.default_time_ms > kMaxMs || p.grace_time_ms > static_cast<uint64_t>(kMaxMs)) {
    return InvalidArgument("partition '" + p.name +
                           "': a time limit is negative or longer than 100,000 days");
  }
  if (p.max_time_ms && p.default_time_ms > p.max_time_ms) {
    return InvalidArgument("partition '" + p.name + "': the default time is longer than max time");
  }
  if (p.preempt_mode != "off" && p.preempt_mode != "requeue" && p.preempt_mode != "cancel" &&
      p.preempt_mode != "suspend") {
    return InvalidArgument("partition '" + p.name + "': preempt mode '" +
                           p.preempt_mode.substr(0, 32) +
                           "' is not off, requeue, cancel or suspend");
  }
  if (p.priority_tier > 65'535) {
    return InvalidArgument("partition '" + p.name + "': priority tier above 65535");
  }
  return Status::Ok();
}

// Puts `p` in place of the partition of its name (or after the others), the only default when
// it is one; a config left without a default takes its first partition, as a file's does.
void Place(Config& c, PartitionConfig p) {
  if (p.is_default) {
    for (auto& other : c.partitions) other.is_default = false;
  }
  auto it = std::find_if(c.partitions.begin(), c.partitions.end(),
                         [&](const PartitionConfig& q) { return q.name == p.name; });
  if (it != c.partitions.end()) {
    *it = std::move(p);
  } else {
    c.partitions.push_back(std::move(p));
  }
}

void KeepADefault(Config& c) {
  const bool any = std::any_of(c.partitions.begin(), c.partitions.end(),
                               [](const PartitionConfig& p) { return p.is_default; });
  if (!any && !c.partitions.empty()) c.partitions.front().is_default = true;
}

std::vector<std::string> UidList(const std::string& s) {
  std::vector<std::string> out;
  for (const auto& u : Split(s, ',', true)) {
    const std::string t(Trim(u));
    if (!t.empty()) out.push_back(t);
  }
  return out;
}

}  // namespace

Overlaid OverlayPartitions(const Config& file, const std::vector<v1::PartitionRecord>& stored) {
  Overlaid out{file, {}};
  // In the order they were made (the store keeps them by name): the newest default wins.
  std::vector<v1::PartitionRecord> records = stored;
  std::stable_sort(records.begin(), records.end(),
                   [](const v1::PartitionRecord& a, const v1::PartitionRecord& b) {
                     return a.updated_ms() < b.updated_ms();
                   });
  for (const v1::PartitionRecord& r : records) {
    if (r.removed()) {
      auto& parts = out.config.partitions;
      parts.erase(std::remove_if(parts.begin(), parts.end(),
                                 [&](const PartitionConfig& p) { return p.name == r.name(); }),
                  parts.end());
      continue;
    }
    PartitionConfig p = FromRecord(r);
    if (Status st = CheckPartition(p, out.config); !st.ok()) {
      // Never the file's definition in its place (it may let in whom the live one kept out):
      // the partition on the nodes of its that are left, or not at all.
      std::vector<std::string> left;
      if (auto named = ExpandHostlist(p.nodes_expr); named.ok()) {
        for (const auto& n : *named) {
          if (out.config.FindNode(n)) left.push_back(n);
        }
      }
      PartitionConfig kept = p;
      kept.nodes_expr = CompressHostlist(left);
      const bool keeps = !left.empty() && CheckPartition(kept, out.config).ok();
      out.problems.push_back("the live definition of partition '" + r.name() +
                             "' no longer holds (" + st.message() +
                             "): " + (keeps ? "kept on " + kept.nodes_expr + " only" : "left out") +
                             "; update, reset or delete it");
      if (keeps) {
        Place(out.config, std::move(kept));
      } else {
        auto& parts = out.config.partitions;
        parts.erase(std::remove_if(parts.begin(), parts.end(),
                                   [&](const PartitionConfig& q) { return q.name == r.name(); }),
                    parts.end());
      }
      continue;
    }
    Place(out.config, std::move(p));
  }
  KeepADefault(out.config);
  return out;
}

Result<PartitionChange> PlanPartitionChange(const v1::UpdatePartitionRequest& req,
                                            const Config& file, const Config& current,
                                            const std::vector<v1::PartitionRecord>& records,
                                            const std::string& user, TimeMs now) {
  const std::string& name = req.name();
  if (name.empty()) return InvalidArgument("a partition name is required");
  const PartitionConfig* existing = current.FindPartition(name);
  const PartitionConfig* in_file = file.FindPartition(name);
  const bool stored = std::any_of(records.begin(), records.end(),
                                  [&](const v1::PartitionRecord& r) { return r.name() == name; });
  PartitionChange change;
  change.name = name;
  switch (req.action()) {
    case v1::UpdatePartitionRequest::DELETE: {
      // A live definition left out (its nodes gone) may still be deleted.
      if (!existing && !stored) return NotFound("no partition '" + name.substr(0, 64) + "'");
      if (existing && existing->is_default) {
        return FailedPrecondition("partition '" + name +
                                  "' is the default: make another one the default first");
      }
      if (existing && current.partitions.size() == 1) {
        return FailedPrecondition("partition '" + name + "' is the cluster's last");
      }
      if (in_file) {
        v1::PartitionRecord r;
        r.set_name(name);
        r.set_removed(true);
        r.set_user(user);
        r.set_updated_ms(now);
        change.record = std::move(r);
      }
      change.summary = "partition " + name + " deleted";
      return change;
    }
    case v1::UpdatePartitionRequest::RESET:
      if (!in_file) {
        return NotFound("partition '" + name.substr(0, 64) +
                        "' is not in the config file: delete it instead");
      }
      change.summary = "partition " + name + " reset to the config file's";
      return change;
    case v1::UpdatePartitionRequest::CREATE:
      if (existing) return AlreadyExists("partition '" + name.substr(0, 64) + "' exists");
      break;
    case v1::UpdatePartitionRequest::UPDATE:
      if (!existing) return NotFound("no partition '" + name.substr(0, 64) + "'");
      break;
    default:
      return InvalidArgument("unknown partition action");
  }
  PartitionConfig p = existing ? *existing : PartitionConfig{};
  p.name = name;
  if (req.has_nodes()) p.nodes_expr = req.nodes();
  if (p.nodes_expr.empty()) p.nodes_expr = CompressHostlist(p.nodes);
  if (req.has_is_default()) p.is_default = req.is_default();
  if (req.has_max_time_ms()) p.max_time_ms = req.max_time_ms();
  if (req.has_default_time_ms()) p.default_time_ms = req.default_time_ms();
  if (req.has_priority_tier()) p.priority_tier = req.priority_tier();
  if (req.has_preempt_mode()) p.preempt_mode = ToLower(req.preempt_mode());
  if (req.has_grace_time_ms()) p.grace_time_ms = req.grace_time_ms();
  if (req.has_allowed_uids()) p.allowed_uids = UidList(req.allowed_uids());
  if (req.has_denied_uids()) p.denied_uids = UidList(req.denied_uids());
  if (existing && existing->is_default && req.has_is_default() && !req.is_default()) {
    return InvalidArgument("partition '" + name +
                           "' is the default: make another one the default instead");
  }
  MUSTER_RETURN_IF_ERROR(CheckPartition(p, current));
  v1::PartitionRecord r = ToRecord(p);
  r.set_user(user);
  r.set_updated_ms(now);
  change.record = std::move(r);
  change.summary = "partition " + name + (existing ? " updated" : " created");
  return change;
}

std::string PartitionOrigin(const std::string& name, const Config& file,
                            const std::vector<v1::PartitionRecord>& records) {
  const bool live = std::any_of(records.begin(), records.end(),
                                [&](const v1::PartitionRecord& r) { return r.name() == name; });
  if (!file.FindPartition(name)) return "live";
  return live ? "file, changed live" : "file";
}

}  // namespace muster::controller
