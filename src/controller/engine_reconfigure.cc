// Engine: what a new configuration may not take away from the jobs the controller holds, and
// what a replacement engine carries over from the one it replaces (ControllerRunner::Reconfigure
// builds the new engine from the store, as a restart would).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "account_manager.h"
#include "audit_log.h"
#include "fair_share.h"
#include "job_entry.h"
#include "job_manager.h"
#include "muster/controller/engine.h"
#include "preemptor.h"
#include "reservation_manager.h"
#include "scheduler_loop.h"

namespace muster::controller {
namespace {

// "jobs 3, 7, 12", at most five ids named.
std::string SomeJobs(const std::set<uint64_t>& ids) {
  std::string s = ids.size() == 1 ? "job " : "jobs ";
  size_t named = 0;
  for (uint64_t id : ids) {
    if (named == 5) {
      s += " and " + std::to_string(ids.size() - named) + " more";
      break;
    }
    s += (named++ ? ", " : "") + std::to_string(id);
  }
  return s;
}

// Why a node's new definition cannot hold what a job holds there; empty when it can.
std::string ShrinksBelow(const NodeConfig& old_node, const NodeConfig& next,
                         const v1::NodeAllocation& held) {
  for (uint32_t cpu : held.cpu_ids()) {
    if (cpu >= next.cpus)
      return "cpus " + std::to_string(next.cpus) + " < CPU " + std::to_string(cpu) + " it holds";
  }
  if (held.mem_mb() > next.memory_mb)
    return "memory_mb below the " + std::to_string(held.mem_mb()) + " MB it holds";
  if (held.gpu_indices_size() > 0) {
    if (next.gpu_type != old_node.gpu_type) return "gpu_type, while it holds GPUs";
    for (uint32_t g : held.gpu_indices()) {
      if (g >= next.gpus)
        return "gpus " + std::to_string(next.gpus) + " < GPU " + std::to_string(g) + " it holds";
    }
  }
  if (held.gres_size() > 0 &&
      (!(next.gres == old_node.gres) || next.shards_per_gpu != old_node.shards_per_gpu)) {
    return "gres or shards_per_gpu, while it holds some";
  }
  return "";
}

}  // namespace

Status Engine::CheckReconfiguration(const Config& next) const {
  const Config& running = ctx_->config();
  std::map<std::string, const NodeConfig*> next_nodes;
  for (const NodeConfig& n : next.nodes) next_nodes[n.name] = &n;
  std::set<std::string> next_partitions, next_accounts, next_qos;
  for (const PartitionConfig& p : next.partitions) next_partitions.insert(p.name);
  for (const AccountConfig& a : next.accounts) next_accounts.insert(a.name);
  for (const QosConfig& q : next.qos) next_qos.insert(q.name);
  std::set<std::string> dropped_accounts, dropped_qos;
  // (user, account) pairs the running file associates and the new one does not.
  std::set<std::pair<std::string, std::string>> dropped_users;
  std::map<std::string, std::set<std::string>> next_users;  // account -> its users
  for (const AccountConfig& a : next.accounts)
    next_users[a.name].insert(a.users.begin(), a.users.end());
  for (const AccountConfig& a : running.accounts) {
    if (!next_accounts.count(a.name)) dropped_accounts.insert(a.name);
    for (const std::string& u : a.users) {
      if (!next_users[a.name].count(u)) dropped_users.insert({u, a.name});
    }
  }
  for (const QosConfig& q : running.qos) {
    if (!next_qos.count(q.name)) dropped_qos.insert(q.name);
  }

  // Problem -> the jobs that have it, so that a thousand jobs make one line.
  std::map<std::string, std::set<uint64_t>> problems;
  for (const auto& [id, job] : jobs_->jobs()) {
    const v1::JobRecord& r = job.rec();
    if (!IsActive(r)) continue;
    for (const std::string& p : r.spec().partitions()) {
      if (!next_partitions.count(p)) problems["partition " + p + " is removed"].insert(id);
    }
    if (dropped_accounts.count(r.spec().account())) {
      problems["account " + r.spec().account() + " is removed"].insert(id);
    }
    if (dropped_qos.count(r.spec().qos())) {
      problems["qos " + r.spec().qos() + " is removed"].insert(id);
    }
    if (dropped_users.count({r.spec().user(), r.spec().account()})) {
      problems["user " + r.spec().user() + " leaves account " + r.spec().account()].insert(id);
    }
    // A node it asks for by name (--nodelist), or one its previous run may still be on.
    for (const std::string& n : r.spec().required_nodes()) {
      if (!next_nodes.count(n)) problems["node " + n + " is removed"].insert(id);
    }
    for (const std::string& n : r.unconfirmed_nodes()) {
      if (!next_nodes.count(n)) problems["node " + n + " is removed"].insert(id);
    }
    for (const auto& [license, count] : r.spec().licenses()) {
      if (!next.licenses.count(license)) problems["license " + license + " is removed"].insert(id);
    }
    for (const v1::NodeAllocation& held : r.allocation().nodes()) {
      auto it = next_nodes.find(held.node());
      if (it == next_nodes.end()) {
        problems["node " + held.node() + " is removed"].insert(id);
        continue;
      }
      const NodeConfig* old_node = running.FindNode(held.node());
      if (!old_node) continue;
      if (std::string why = ShrinksBelow(*old_node, *it->second, held); !why.empty()) {
        problems["node " + held.node() + " changes " + why].insert(id);
      }
    }
  }
  std::vector<std::string> lines;
  for (const auto& [what, ids] : problems) {
    lines.push_back(what + " but " + SomeJobs(ids) + (ids.size() == 1 ? " needs" : " need") +
                    " it");
  }
  // A reservation holding a node the file no longer has would lose it without a word.
  for (const auto& [name, res] : reservations_->all()) {
    for (const std::string& n : res.nodes()) {
      if (!next_nodes.count(n)) {
        lines.push_back("node " + n + " is removed but reservation " + name + " holds it");
      }
    }
  }
  // An account sacctmgr made under one the file no longer has would lose its parent.
  for (const auto& [name, a] : accounts_->accounts()) {
    if (!a.from_config() && dropped_accounts.count(a.parent())) {
      lines.push_back("account " + a.parent() + " is removed but account " + name +
                      " (made with sacctmgr) is under it");
    }
  }
  if (lines.empty()) return Status::Ok();
  std::string msg = "the new configuration is refused, the running one kept: ";
  constexpr size_t kNamed = 20;  // a reply (and an audit entry) of bounded size
  for (size_t i = 0; i < lines.size() && i < kNamed; ++i) msg += (i ? "; " : "") + lines[i];
  if (lines.size() > kNamed) {
    msg += "; and " + std::to_string(lines.size() - kNamed) + " more conflicts";
  }
  msg +=
      ". Wait for those jobs to end (or cancel, move or requeue them), drain what is to go, "
      "and reconfigure again";
  return FailedPrecondition(msg);
}

void Engine::AuditReconfiguration(const Caller& caller, const std::string& source,
                                  const std::string& detail, const Status& result, TimeMs now) {
  audit_->Record(caller, "reconfigure", source, detail.substr(0, 4096),
                 result.code() != StatusCode::kPermissionDenied, result, now);
}

void Engine::PrepareHandOver(TimeMs now) {
  // Usage accrued since the last flush, so that the next engine reads it from the store.
  fair_share_->Accrue(now, /*flush_now=*/true);
}

void Engine::ContinueFrom(const Engine& previous) {
  nodes_->ContinueLiveness(*previous.nodes_);
  jobs_->ContinueOrphanTimes(*previous.jobs_);
  scheduler_->ContinueTotals(previous.scheduler_->totals());
  preemptor_->ContinueCount(previous.preemptor_->preempted());
  preemptor_->ContinueWaiting(*previous.preemptor_);
  // The orders that age jobs from the controller's start (F1's origin) keep theirs.
  start_time_ms_ = previous.start_time_ms_;
}

}  // namespace muster::controller
