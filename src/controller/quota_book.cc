#include "quota_book.h"

#include <set>

#include "account_manager.h"
#include "job_manager.h"
#include "limit_tracker.h"

namespace muster::controller {
namespace {

constexpr uint64_t kNoCeiling = 0xFFFFFFFFu;

core::QuotaView MakeView(const std::string& name, const v1::AccountRecord& a,
                         const std::string& type, const v1::GpuQuota& q) {
  core::QuotaView v;
  v.what = "account " + name + ": " + type + " GPUs";
  v.guaranteed = q.guaranteed();
  const bool in_cohort = !a.cohort().empty();
  v.max = q.has_max() ? q.max() : in_cohort ? kNoCeiling : q.guaranteed();
  v.lending_limit = !in_cohort ? 0 : q.has_lending_limit() ? q.lending_limit() : q.guaranteed();
  return v;
}

std::string Key(const std::string& holder, const std::string& type) { return holder + '\n' + type; }

}  // namespace

bool QuotaBook::any() const {
  for (const auto& [name, a] : accounts_.accounts()) {
    if (a.quotas_size() > 0) return true;
  }
  return false;
}

std::string QuotaBook::Holder(const std::string& account, const std::string& type) const {
  if (type.empty()) return "";
  std::string at = account;
  const auto& all = accounts_.accounts();
  for (size_t hops = 0; hops <= all.size(); ++hops) {
    auto it = all.find(at);
    if (it == all.end()) return "";
    if (it->second.quotas().count(type)) return at;
    at = it->second.parent();
  }
  return "";
}

const v1::GpuQuota* QuotaBook::QuotaOf(const std::string& holder, const std::string& type) const {
  auto it = accounts_.accounts().find(holder);
  if (it == accounts_.accounts().end()) return nullptr;
  auto q = it->second.quotas().find(type);
  return q == it->second.quotas().end() ? nullptr : &q->second;
}

bool QuotaBook::TypeHasQuotas(const std::string& type) const {
  for (const auto& [name, a] : accounts_.accounts()) {
    if (a.quotas().count(type)) return true;
  }
  return false;
}

std::vector<std::string> QuotaBook::ChoiceTypes(const JobEntry& job) const {
  const v1::JobSpec& spec = job.rec().spec();
  if (spec.gpu_types_size() > 0) return {spec.gpu_types().begin(), spec.gpu_types().end()};
  if (!job.request.gpu_type.empty() || job.request.gpus_per_node == 0) {
    return {job.request.gpu_type};
  }
  // Any type: where its account holds quotas, the types it holds them for.
  std::vector<std::string> types;
  std::set<std::string> seen;
  std::string at = spec.account();
  const auto& all = accounts_.accounts();
  for (size_t hops = 0; hops <= all.size(); ++hops) {
    auto it = all.find(at);
    if (it == all.end()) break;
    std::map<std::string, v1::GpuQuota> sorted(it->second.quotas().begin(),
                                               it->second.quotas().end());
    for (const auto& [type, q] : sorted) {
      if (seen.insert(type).second) types.push_back(type);
    }
    at = it->second.parent();
  }
  if (types.empty()) types.push_back("");
  return types;
}

std::optional<core::QuotaView> QuotaBook::ViewOf(const std::string& holder,
                                                 const std::string& type) const {
  auto a = accounts_.accounts().find(holder);
  if (a == accounts_.accounts().end()) return std::nullopt;
  auto q = a->second.quotas().find(type);
  if (q == a->second.quotas().end()) return std::nullopt;
  return MakeView(holder, a->second, type, q->second);
}

std::vector<std::pair<uint64_t, uint64_t>> QuotaBook::JobsOf(const std::string& holder,
                                                             const std::string& type) const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const auto& [id, job] : jobs_.jobs()) {
    if (job.rec().state() != v1::RUNNING) continue;
    const JobUse use = limits_.RunningUse(job.rec());
    if (use.gpus > 0 && use.gpu_type == type && Holder(job.rec().spec().account(), type) == holder)
      out.push_back({id, use.gpus});
  }
  return out;
}

void QuotaBook::Fill(core::ClusterView* view) {
  index_.clear();
  std::map<std::string, int32_t> cohorts;  // cohort + '\n' + type -> index
  for (const auto& [name, a] : accounts_.accounts()) {
    std::map<std::string, v1::GpuQuota> sorted(a.quotas().begin(), a.quotas().end());
    for (const auto& [type, q] : sorted) {
      core::QuotaView v = MakeView(name, a, type, q);
      const bool in_cohort = !a.cohort().empty();
      const auto index = static_cast<int32_t>(view->quotas.size());
      if (in_cohort) {
        auto [it, added] =
            cohorts.try_emplace(Key(a.cohort(), type), static_cast<int32_t>(view->cohorts.size()));
        if (added) view->cohorts.push_back({a.cohort() + " (" + type + ")", {}});
        v.cohort = it->second;
        view->cohorts[static_cast<size_t>(it->second)].members.push_back(
            static_cast<uint32_t>(index));
      }
      index_[Key(name, type)] = index;
      view->quotas.push_back(std::move(v));
    }
  }
  if (view->quotas.empty()) return;
  for (const auto& [key, used] : Usage()) {
    auto it = index_.find(Key(key.first, key.second));
    if (it != index_.end()) view->quotas[static_cast<size_t>(it->second)].used = used;
  }
}

int32_t QuotaBook::QuotaIndex(const std::string& account, const std::string& type) const {
  const std::string holder = Holder(account, type);
  if (holder.empty()) return -1;
  auto it = index_.find(Key(holder, type));
  return it == index_.end() ? -1 : it->second;
}

std::string QuotaBook::RunningType(const v1::JobRecord& rec) const {
  return limits_.RunningUse(rec).gpu_type;
}

std::map<std::pair<std::string, std::string>, uint64_t> QuotaBook::Usage() const {
  std::map<std::pair<std::string, std::string>, uint64_t> out;
  for (const auto& [id, job] : jobs_.jobs()) {
    const v1::JobRecord& r = job.rec();
    if (r.state() != v1::RUNNING) continue;
    const JobUse use = limits_.RunningUse(r);
    if (use.gpus == 0) continue;
    const std::string holder = Holder(r.spec().account(), use.gpu_type);
    if (!holder.empty()) out[{holder, use.gpu_type}] += use.gpus;
  }
  return out;
}

bool QuotaBook::Borrowed(const core::JobStart& start, const v1::JobRecord& rec) const {
  if (start.borrowed) return true;
  if (start.placement.nodes.empty() || start.placement.nodes.front().gpus.empty()) return false;
  const auto& nodes = ctx_.config().nodes;
  const core::NodeIndex n = start.placement.nodes.front().node;
  if (n >= nodes.size()) return false;
  const std::string& type = nodes[n].gpu_type;
  return Holder(rec.spec().account(), type).empty() && TypeHasQuotas(type);
}

bool QuotaBook::MayReclaim(
    const std::string& account, const std::string& type, uint64_t gpus,
    const std::map<std::pair<std::string, std::string>, uint64_t>& usage) const {
  const std::string holder = Holder(account, type);
  const v1::GpuQuota* q = holder.empty() ? nullptr : QuotaOf(holder, type);
  if (!q) return false;
  auto it = usage.find({holder, type});
  const uint64_t used = it == usage.end() ? 0 : it->second;
  return used + gpus <= q->guaranteed();
}

bool QuotaBook::Reclaimable(
    const v1::JobRecord& rec, const std::string& type,
    const std::map<std::pair<std::string, std::string>, uint64_t>& usage) const {
  if (!rec.borrowed()) return false;
  const std::string holder = Holder(rec.spec().account(), type);
  if (holder.empty()) return true;  // on GPUs others are guaranteed, with no quota of its own
  const v1::GpuQuota* q = QuotaOf(holder, type);
  auto it = usage.find({holder, type});
  return q && it != usage.end() && it->second > q->guaranteed();
}

}  // namespace muster::controller
