#include "default_pass_policy.h"

namespace muster::controller {

void DefaultPassPolicy::BeforePass(TimeMs now) {
  fair_share_.Recompute(now);
  // Before any pending job may take their CPUs.
  preemptor_.ResumeSuspended(now);
}

void DefaultPassPolicy::BeginPass(core::ClusterView* view) {
  limits_.BeginPass(&view->limits);
  licenses_.BeginPass(&view->limits);
  quotas_now_ = quotas_.any();
  if (quotas_now_) quotas_.Fill(view);
}

core::JobReason DefaultPassPolicy::Admit(const JobEntry& job, const JobUse& use,
                                         std::string* detail) {
  // Over a per-job limit, or naming licenses the cluster lacks, it could never start, whatever
  // the counters say.
  const core::JobReason licenses = licenses_.Admit(job.rec().spec(), detail);
  if (licenses != core::JobReason::kNone) return licenses;
  return limits_.PerJobLimit(job.rec().spec(), job.rec().time_limit_ms(), use, detail);
}

void DefaultPassPolicy::Order(const JobEntry& job, TimeMs, core::PendingJob* pj) const {
  const v1::JobSpec& spec = job.rec().spec();
  pj->priority.fairshare = fair_share_.FactorOf(spec);
  pj->priority.qos = qos_.PriorityFactor(spec.qos());
}

void DefaultPassPolicy::Charge(const JobEntry& job, const JobUse& use, core::PendingJob* pj) {
  const v1::JobSpec& spec = job.rec().spec();
  if (!quotas_now_ && pj->choices.empty()) {
    pj->limits = limits_.ChargesOf(spec, use);
    licenses_.AddCharges(spec, &pj->limits);
    return;
  }
  // Each GPU type it may run on is a choice with its own limit charges and quota.
  pj->choices.clear();
  for (std::string& type :
       quotas_now_ ? quotas_.ChoiceTypes(job)
                   : std::vector<std::string>(spec.gpu_types().begin(), spec.gpu_types().end())) {
    core::PendingJob::Choice c;
    JobUse typed = use;
    if (!type.empty()) typed.gpu_type = type;
    c.limits = limits_.ChargesOf(spec, typed);
    licenses_.AddCharges(spec, &c.limits);
    if (quotas_now_ && use.gpus > 0) c.quota = quotas_.QuotaIndex(spec.account(), type);
    c.gpu_type = std::move(type);
    pj->choices.push_back(std::move(c));
  }
}

void DefaultPassPolicy::Start(const core::JobStart& start, const v1::JobRecord& before, TimeMs now,
                              JobChange* change) const {
  change->borrowed = quotas_.Borrowed(start, before);
  if (before.spec().reservation().empty()) return;
  // A job of a reservation ends with it (as Slurm's ResvOverRun = 0).
  const TimeMs until = reservations_.EndOfRunIn(before.spec().reservation(), now);
  if (until == core::kNever) return;
  const int64_t asked =
      before.spec().time_limit_ms() > 0 ? before.spec().time_limit_ms() : before.time_limit_ms();
  change->time_limit_ms = asked > 0 && now + asked <= until ? asked : until - now;
}

void DefaultPassPolicy::AfterPass(const core::SchedulePass& pass, TimeMs now) {
  preemptor_.AfterPass(pass, now);
}

}  // namespace muster::controller
