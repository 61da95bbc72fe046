// Account and QoS limits (Slurm's Grp* and Max*): their records, the checks at submission, and
// the counters a scheduling pass charges as it starts jobs (core::LimitCounter), so that a job
// over a limit waits with a reason that names the limit and the numbers.
//
// Strand-confined (LimitTracker).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine_context.h"
#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/core/types.h"
#include "muster/v1/controller.pb.h"

namespace muster::controller {

class AccountManager;
class JobManager;
class QosManager;
struct JobEntry;

// A limit value that, in an update's patch, clears the limit.
inline constexpr uint32_t kUnlimited = 0xFFFFFFFFu;

v1::UsageLimits ToLimitsRecord(const LimitsConfig& c);
// Applies an update's patch: fields set there replace, kUnlimited clears. INVALID_ARGUMENT for a
// bad GPU type name.
Status PatchLimits(const v1::UsageLimits& patch, v1::UsageLimits* limits);
// Slurm's words for the set limits: "GrpJobs=4,GrpTRES=gres/gpu:h100=16,MaxWall=1-00:00:00".
std::string FormatLimits(const v1::UsageLimits& l);
bool AnyLimit(const v1::UsageLimits& l);

// What one job uses against limits while it runs.
struct JobUse {
  uint32_t nodes = 0;
  uint32_t gpus = 0;
  std::string gpu_type;  // of its GPUs ("" when unknown)
};

class LimitTracker {
 public:
  LimitTracker(const EngineContext& ctx, const AccountManager& accounts, const QosManager& qos,
               const JobManager& jobs)
      : ctx_(ctx), accounts_(accounts), qos_(qos), jobs_(jobs) {}

  // At submission, limits that refuse rather than hold: the submit-job counts (GrpSubmitJobs,
  // MaxSubmitJobs, of the account tree and of the QoS) and, under DenyOnLimit, per-job limits
  // the job is over. `count` jobs (an array's tasks) are being added. RESOURCE_EXHAUSTED or
  // INVALID_ARGUMENT naming the limit.
  // `moving_from`: not a submission but a pending job moving to `spec`'s account or QoS
  // (scontrol update) from this spec: it is already counted where it was, so only the accounts
  // and QoS it newly enters are checked.
  Status CheckSubmit(const v1::JobSpec& spec, int64_t time_limit_ms, const JobUse& use,
                     uint64_t count, const v1::JobSpec* moving_from = nullptr) const;

  // At submission, the stored-bytes limits: a job storing `bytes` of script, environment and
  // arguments past its QoS's or account tree's grp_stored_mb, past the user's bytes there
  // (max_stored_mb_per_user), or past all the user's bytes (the site's
  // scheduling.max_stored_mb_per_user, raised by a larger per-user limit of the job's QoS or
  // account; root is exempt). RESOURCE_EXHAUSTED naming the limit and the numbers.
  // `moving_from` as for CheckSubmit: only the accounts and QoS the bytes newly enter are
  // checked (the user's total does not change).
  Status CheckStored(const v1::JobSpec& spec, uint64_t bytes,
                     const v1::JobSpec* moving_from = nullptr) const;

  // The smallest MaxWall of the job's QoS and account tree (0: none): a job without a time limit
  // gets it, as in Slurm.
  int64_t WallLimit(const v1::JobSpec& spec) const;

  // Per-job limits (MaxWall, MaxTRES per job) a pending job is over: its reason and the words,
  // or kNone.
  core::JobReason PerJobLimit(const v1::JobSpec& spec, int64_t time_limit_ms, const JobUse& use,
                              std::string* detail) const;

  // The counters of one pass: every limit that is set, with what running jobs use now. Then
  // ChargesOf says which counters a pending job would add to.
  void BeginPass(std::vector<core::LimitCounter>* counters);
  std::vector<core::LimitCharge> ChargesOf(const v1::JobSpec& spec, const JobUse& use);
  // What a running job holds (its GPUs' type from its nodes when it asked for any type).
  JobUse RunningUse(const v1::JobRecord& rec) const;

  // For explanations, outside a pass: the counted limits a pending job with `use` is over now,
  // each with the running jobs counted against it and their share.
  struct Holding {
    core::LimitCounter counter;  // what, used now, max
    uint64_t need = 0;
    std::vector<std::pair<uint64_t, uint64_t>> jobs;  // (running job, its share)
  };
  std::vector<Holding> HoldingLimits(const v1::JobSpec& spec, const JobUse& use);

 private:
  // The largest MaxStoredMBPerUser of the job's QoS and account tree (0: none).
  uint64_t PerUserCapMb(const v1::JobSpec& spec) const;
  // A counter for (scope, limit), made on first use.
  uint32_t Counter(const std::string& key, core::JobReason reason, std::string what, uint64_t max);
  void AddCharges(const std::string& scope, const std::string& scope_words,
                  const v1::UsageLimits& l, bool per_user, const v1::JobSpec& spec,
                  const JobUse& use, bool assoc, std::vector<core::LimitCharge>* out);

  const EngineContext& ctx_;
  const AccountManager& accounts_;
  const QosManager& qos_;
  const JobManager& jobs_;
  std::vector<core::LimitCounter>* counters_ = nullptr;
  std::map<std::string, uint32_t> index_;  // counter key -> index, for this pass
  std::vector<std::string> keys_;          // index -> counter key
  // What running jobs use, by counter key, for this pass.
  std::map<std::string, uint64_t> used_;
};

}  // namespace muster::controller
