#include "license_book.h"

#include "job_manager.h"
#include "muster/common/strings.h"

namespace muster::controller {

Status CheckLicenses(const v1::JobSpec& spec, const Config& config) {
  for (const auto& [name, count] : spec.licenses()) {
    auto have = config.licenses.find(name);
    if (have == config.licenses.end()) {
      std::vector<std::string> names;
      for (const auto& [n, c] : config.licenses) names.push_back(n);
      return InvalidArgument(
          "Invalid license specification: the cluster has no license '" + name.substr(0, 64) + "'" +
          (names.empty() ? std::string(" (it has none)") : " (it has " + Join(names, ", ") + ")"));
    }
    if (count == 0 || count > have->second) {
      return InvalidArgument("Invalid license specification: " + name + ":" +
                             std::to_string(count) + " (the cluster has " +
                             std::to_string(have->second) + ")");
    }
  }
  return Status::Ok();
}

std::string FormatLicenses(const v1::JobSpec& spec) {
  const std::map<std::string, uint32_t> sorted(spec.licenses().begin(), spec.licenses().end());
  std::vector<std::string> out;
  for (const auto& [name, count] : sorted) out.push_back(name + ":" + std::to_string(count));
  return Join(out, ",");
}

std::map<std::string, uint64_t> LicenseBook::InUse() const {
  std::map<std::string, uint64_t> used;
  const auto& configured = ctx_.config().licenses;
  if (configured.empty()) return used;
  for (const auto& [name, total] : configured) used[name] = 0;
  for (const auto& [id, job] : jobs_.jobs()) {
    const v1::JobRecord& r = job.rec();
    if (r.state() != v1::RUNNING && r.state() != v1::SUSPENDED) continue;
    for (const auto& [name, count] : r.spec().licenses()) {
      if (auto it = used.find(name); it != used.end()) it->second += count;
    }
  }
  return used;
}

void LicenseBook::BeginPass(std::vector<core::LimitCounter>* counters) {
  index_.clear();
  for (const auto& [name, used] : InUse()) {
    core::LimitCounter c;
    c.reason = core::JobReason::kLicenses;
    c.what = "license " + name;
    c.used = used;
    c.max = ctx_.config().licenses.at(name);
    index_[name] = static_cast<uint32_t>(counters->size());
    counters->push_back(std::move(c));
  }
}

core::JobReason LicenseBook::Admit(const v1::JobSpec& spec, std::string* detail) const {
  if (spec.licenses().empty()) return core::JobReason::kNone;
  Status st = CheckLicenses(spec, ctx_.config());
  if (st.ok()) return core::JobReason::kNone;
  *detail = st.message();
  return core::JobReason::kLicenses;
}

void LicenseBook::AddCharges(const v1::JobSpec& spec, std::vector<core::LimitCharge>* out) const {
  for (const auto& [name, count] : spec.licenses()) {
    auto it = index_.find(name);
    if (it == index_.end()) continue;  // not configured: Admit holds the job
    out->push_back({it->second, count});
  }
}

}  // namespace muster::controller
