// Fair-share: each association's (account, user) usage in billing units, charged while its jobs
// run ([billing]: per GPU by type, per CPU, per GB) and halved every fairshare_half_life_ms; and
// the factors a pending job's priority takes, from the core's Fair Tree over the account tree.
// Usage is written to the store about once a minute, buffered: a crash costs at most that much
// usage, never a job.
//
// Strand-confined.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "account_manager.h"
#include "engine_context.h"
#include "job_manager.h"
#include "muster/core/fairshare.h"

namespace muster::controller {

class FairShare {
 public:
  FairShare(EngineContext& ctx, const JobManager& jobs, const AccountManager& accounts)
      : ctx_(ctx), jobs_(jobs), accounts_(accounts) {}

  void Restore(const std::vector<v1::UsageRecord>& usage);
  // A QoS's usage factor (1 when unset).
  void SetUsageFactor(std::function<double(const std::string& qos)> fn) {
    usage_factor_of_ = std::move(fn);
  }
  // Charges running jobs for the time since they were last charged, and jobs that ended since
  // then for the rest of their run; flushes changed usage to the store every minute (or now).
  void Accrue(TimeMs now, bool flush_now = false);
  // The factors again from the usage as of `now` (the account tree is small: cheap).
  void Recompute(TimeMs now) { result_ = ComputeAt(now); }
  // The tree with each line's numbers as of `now` (sshare), without changing the factors.
  core::FairShareResult ComputeAt(TimeMs now) const;
  // 0..1; 0 without accounts.
  double FactorOf(const v1::JobSpec& spec) const;
  // Billing units per second of a running job.
  double BillingRate(const v1::JobRecord& r) const;
  double UsageOf(const std::string& account, const std::string& user, TimeMs now) const;

 private:
  struct Usage {
    double units = 0;
    TimeMs updated_ms = 0;
    bool dirty = false;
  };
  double Decayed(const Usage& u, TimeMs now) const;
  // fairshare_algorithm = "drf": the factors from what running jobs hold now.
  core::FairShareResult ComputeDrfNow(const std::vector<core::FairShareAccount>& tree) const;
  void Charge(const v1::JobSpec& spec, double units, TimeMs now);

  EngineContext& ctx_;
  const JobManager& jobs_;
  const AccountManager& accounts_;
  std::map<std::pair<std::string, std::string>, Usage> usage_;
  std::map<uint64_t, TimeMs> charged_until_;  // jobs charged up to this time
  // Until when each association was charged before a restart (its last flush): a job that ran
  // across the restart is charged from there, not again from its start.
  std::map<std::pair<std::string, std::string>, TimeMs> restored_until_;
  core::FairShareResult result_;
  TimeMs last_flush_ms_ = 0;
  TimeMs last_accrual_ms_ = 0;
  std::function<double(const std::string&)> usage_factor_of_;
};

}  // namespace muster::controller
