// GPU quotas per account and GPU type, lent and reclaimed within cohorts (the arithmetic is the
// core's, muster/core/quota.h). A job counts against the quota of the nearest account up its
// tree that holds one for the GPU type it runs on. This class gives a pass its quota views and
// each pending job its ways to run (the GPU types it accepts, in order), marks started jobs
// that run on borrowed GPUs, and tells the preemptor which running jobs an owner may take back.
//
// Strand-confined.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine_context.h"
#include "muster/core/types.h"
#include "muster/v1/controller.pb.h"

namespace muster::controller {

class AccountManager;
class JobManager;
class LimitTracker;
struct JobEntry;

class QuotaBook {
 public:
  QuotaBook(const EngineContext& ctx, const AccountManager& accounts, const JobManager& jobs,
            const LimitTracker& limits)
      : ctx_(ctx), accounts_(accounts), jobs_(jobs), limits_(limits) {}

  // Whether any account holds a quota (without, nothing here costs anything).
  bool any() const;

  // The account whose quota of `type` a job of `account` counts against ("" when none does).
  std::string Holder(const std::string& account, const std::string& type) const;
  // Whether some account holds a quota of `type`.
  bool TypeHasQuotas(const std::string& type) const;

  // The GPU types a pending GPU job tries, in order: those it named (--gpus-per-node=h100:8|
  // a100:8), or for a job that names none whose account holds quotas, its quota types (the
  // nearest account's first, each in name order). One "" entry: the request as it is.
  std::vector<std::string> ChoiceTypes(const JobEntry& job) const;

  // The pass's quotas and cohorts, with what running jobs hold; then QuotaIndex maps a
  // (account, type) to its quota in them.
  void Fill(core::ClusterView* view);
  int32_t QuotaIndex(const std::string& account, const std::string& type) const;

  // Whether a started job runs on borrowed GPUs: the pass says it went beyond its quota, or it
  // has no quota of its own for a type others hold quotas for.
  bool Borrowed(const core::JobStart& start, const v1::JobRecord& rec) const;

  // The GPU type a running job holds ("" for none or unknown).
  std::string RunningType(const v1::JobRecord& rec) const;
  // The running jobs counted against the quota (holder, type), with their GPUs.
  std::vector<std::pair<uint64_t, uint64_t>> JobsOf(const std::string& holder,
                                                    const std::string& type) const;
  // The quota (holder, type) as the core sees it (effective max and lending limit; cohort
  // unset); nullopt when there is none.
  std::optional<core::QuotaView> ViewOf(const std::string& holder, const std::string& type) const;
  // GPUs of each quota (holder, type) held by running jobs now.
  std::map<std::pair<std::string, std::string>, uint64_t> Usage() const;
  // Whether a job of `account` may take back borrowed `type` GPUs for `gpus` more: its quota's
  // guaranteed part has room for them (given `usage`, from Usage()).
  bool MayReclaim(const std::string& account, const std::string& type, uint64_t gpus,
                  const std::map<std::pair<std::string, std::string>, uint64_t>& usage) const;
  // Whether running job `rec` (on `type` GPUs) is borrowed capacity an owner may take back: it
  // was marked borrowed and its quota is still beyond its guaranteed part (or it has none).
  bool Reclaimable(const v1::JobRecord& rec, const std::string& type,
                   const std::map<std::pair<std::string, std::string>, uint64_t>& usage) const;

 private:
  const v1::GpuQuota* QuotaOf(const std::string& holder, const std::string& type) const;

  const EngineContext& ctx_;
  const AccountManager& accounts_;
  const JobManager& jobs_;
  const LimitTracker& limits_;
  std::map<std::string, int32_t> index_;  // holder + '\n' + type -> index in the pass's view
};

}  // namespace muster::controller
