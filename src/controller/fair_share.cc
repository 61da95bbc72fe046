#include "fair_share.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "muster/common/strings.h"

namespace muster::controller {
namespace {

constexpr TimeMs kFlushEveryMs = 60'000;
constexpr TimeMs kAccrueEveryMs = 1'000;

// A MIG slice's share of its GPU: "3g.40gb" is 3 of the GPU's 7 compute slices.
double MigFraction(const std::string& profile) {
  const size_t g = profile.find('g');
  if (g == 0 || g == std::string::npos) return 1.0;
  const auto slices = ParseUint(profile.substr(0, g));
  return slices && *slices > 0 && *slices <= 7 ? static_cast<double>(*slices) / 7.0 : 1.0;
}

}  // namespace

void FairShare::Restore(const std::vector<v1::UsageRecord>& usage) {
  for (const v1::UsageRecord& u : usage) {
    usage_[{u.account(), u.user()}] = {u.usage(), u.updated_ms(), false};
    restored_until_[{u.account(), u.user()}] = u.updated_ms();
  }
}

double FairShare::Decayed(const Usage& u, TimeMs now) const {
  const double half_life = static_cast<double>(ctx_.scheduling().fairshare_half_life_ms);
  if (now <= u.updated_ms || half_life <= 0) return u.units;
  return u.units * std::exp2(-static_cast<double>(now - u.updated_ms) / half_life);
}

double FairShare::UsageOf(const std::string& account, const std::string& user, TimeMs now) const {
  auto it = usage_.find({account, user});
  return it == usage_.end() ? 0 : Decayed(it->second, now);
}

double FairShare::BillingRate(const v1::JobRecord& r) const {
  const BillingConfig& b = ctx_.config().billing;
  double rate = 0;
  for (const v1::NodeAllocation& n : r.allocation().nodes()) {
    rate += b.cpu * n.cpu_ids_size() + b.mem_gb * static_cast<double>(n.mem_mb()) / 1024.0;
    // Every running job's every node, every pass: by index, not by a walk over 12,500 nodes
    // (which held the strand ~300 ms at a time under agent_load).
    const NodeConfig* nc = ctx_.NodeConfigOf(n.node());
    auto typed = b.gpu_types.find(nc ? nc->gpu_type : std::string());
    const double per_gpu = typed == b.gpu_types.end() ? b.gpu : typed->second;
    rate += per_gpu * n.gpu_indices_size();
    for (const v1::GresUnits& g : n.gres()) {
      if (g.name() == "gpu") {
        rate += per_gpu * MigFraction(g.type()) * g.units_size();  // MIG slices
      } else if (g.name() == "shard") {
        const double per = nc && nc->shards_per_gpu > 0 ? 1.0 / nc->shards_per_gpu : 1.0;
        rate += per_gpu * per * g.units_size();
      }
    }
  }
  // The QoS's UsageFactor: a scavenger QoS may cost less, a premium one more.
  if (usage_factor_of_) rate *= usage_factor_of_(r.spec().qos());
  return rate;
}

void FairShare::Charge(const v1::JobSpec& spec, double units, TimeMs now) {
  if (spec.account().empty() || units <= 0) return;
  Usage& u = usage_[{spec.account(), spec.user()}];
  u.units = Decayed(u, now) + units;
  u.updated_ms = now;
  u.dirty = true;
}

void FairShare::Accrue(TimeMs now, bool flush_now) {
  if (!flush_now && now - last_accrual_ms_ < kAccrueEveryMs) return;
  last_accrual_ms_ = now;
  // Jobs charged before that are no longer running: the rest of their run.
  for (auto it = charged_until_.begin(); it != charged_until_.end();) {
    const JobEntry* job = jobs_.Find(it->first);
    if (job && job->rec().state() == v1::RUNNING) {
      ++it;
      continue;
    }
    if (job && job->rec().end_time_ms() > it->second) {
      Charge(job->rec().spec(),
             BillingRate(job->rec()) * static_cast<double>(job->rec().end_time_ms() - it->second) /
                 1000.0,
             now);
    }
    it = charged_until_.erase(it);
  }
  for (const auto& [id, job] : jobs_.jobs()) {
    const v1::JobRecord& r = job.rec();
    if (r.state() != v1::RUNNING || r.start_time_ms() <= 0) continue;
    TimeMs from = r.start_time_ms();
    if (auto mark = restored_until_.find({r.spec().account(), r.spec().user()});
        mark != restored_until_.end()) {
      from = std::max(from, mark->second);
    }
    auto [it, fresh] = charged_until_.emplace(id, from);
    if (now <= it->second) continue;
    Charge(r.spec(), BillingRate(r) * static_cast<double>(now - it->second) / 1000.0, now);
    it->second = now;
  }
  if (!flush_now && now - last_flush_ms_ < kFlushEveryMs) return;
  last_flush_ms_ = now;
  store::Mutation m;
  std::vector<Usage*> written;
  for (auto& [key, u] : usage_) {
    if (!u.dirty) continue;
    v1::UsageRecord rec;
    rec.set_account(key.first);
    rec.set_user(key.second);
    rec.set_usage(u.units);
    rec.set_updated_ms(u.updated_ms);
    m.PutUsage(rec);
    written.push_back(&u);
  }
  if (m.empty()) return;
  // Usage is not worth stopping the controller for (a full disk): kept in memory, tried again.
  if (Status st = ctx_.Commit(m, store::Durability::kBuffered); !st.ok()) {
    spdlog::warn("fair-share: cannot write usage ({}); trying again in a minute", st.ToString());
    return;
  }
  for (Usage* u : written) u->dirty = false;
}

core::FairShareResult FairShare::ComputeAt(TimeMs now) const {
  if (!accounts_.enforced()) return {};
  std::vector<core::FairShareAccount> tree;
  for (const auto& [name, a] : accounts_.accounts()) {
    tree.push_back({a.name(), a.parent(), a.shares()});
  }
  if (ctx_.scheduling().fairshare_algorithm == "drf") return ComputeDrfNow(tree);
  std::vector<core::FairShareAssociation> associations;
  for (const auto& [name, u] : accounts_.users()) {
    for (const std::string& account : u.accounts()) {
      const v1::Association* as = accounts_.AssociationOf(name, account);
      associations.push_back(
          {account, name, UsageOf(account, name, now), as && as->has_shares() ? as->shares() : 1u});
    }
  }
  return core::ComputeFairTree(tree, associations);
}

core::FairShareResult FairShare::ComputeDrfNow(
    const std::vector<core::FairShareAccount>& tree) const {
  // The cluster's totals, and what each association's running jobs hold of them.
  std::map<std::string, double> capacity;
  for (const NodeConfig& n : ctx_.config().nodes) {
    capacity["cpu"] += n.cpus;
    capacity["mem"] += static_cast<double>(n.memory_mb);
    if (n.gpus > 0) capacity["gpu:" + n.gpu_type] += n.gpus;
  }
  std::map<std::pair<std::string, std::string>, std::map<std::string, double>> held;
  for (const auto& [id, job] : jobs_.jobs()) {
    const v1::JobRecord& r = job.rec();
    if (r.state() != v1::RUNNING) continue;
    auto& h = held[{r.spec().account(), r.spec().user()}];
    for (const v1::NodeAllocation& na : r.allocation().nodes()) {
      h["cpu"] += na.cpu_ids_size();
      h["mem"] += static_cast<double>(na.mem_mb());
      if (na.gpu_indices_size() == 0) continue;
      if (std::optional<size_t> i = ctx_.NodeIndex(na.node()))
        h["gpu:" + ctx_.config().nodes[*i].gpu_type] += na.gpu_indices_size();
    }
  }
  std::vector<core::DrfAssociation> associations;
  for (const auto& [name, u] : accounts_.users()) {
    for (const std::string& account : u.accounts()) {
      const v1::Association* own = accounts_.AssociationOf(name, account);
      core::DrfAssociation as{account, name, {}, own && own->has_shares() ? own->shares() : 1u};
      if (auto it = held.find({account, name}); it != held.end()) as.held = it->second;
      associations.push_back(std::move(as));
    }
  }
  return core::ComputeDrf(tree, associations, capacity);
}

double FairShare::FactorOf(const v1::JobSpec& spec) const {
  auto it = result_.factor.find({spec.account(), spec.user()});
  return it == result_.factor.end() ? 0 : it->second;
}

}  // namespace muster::controller
