// The queue's order and backfill's, around the default policy. scheduling.order: the published
// orders muster-sim compares Muster's with (FCFS, SJF, WFP3, UNICEP and F1, as the RLScheduler
// paper, Zhang et al., SC'20, states them; HRRN, the highest response ratio): the default policy
// in everything else (limits, quotas, reservations, preemption) but who goes first, a job's place
// computed afresh every pass from its wait, a reservation it held earning it nothing (as in the
// paper's simulator, the head of the queue is whoever the order puts there now); with
// scheduling.protect_after_ms, selective reservations for the jobs that have waited that long.
// scheduling.backfill_order: which of the jobs left after the reservations fill the gaps first.
//
// Strand-confined.
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include "pass_policy.h"

namespace muster::controller {

class OrderedPassPolicy final : public PassPolicy {
 public:
  enum class Kind { kFcfs, kSjf, kWfp3, kUnicep, kF1, kHrrn };
  // nullopt for "multifactor" (the default policy's own order) and unknown names.
  static std::optional<Kind> Parse(std::string_view name);

  // Which jobs fill backfill's gaps first (scheduling.backfill_order; kPriority: the queue's own
  // order, no rank).
  enum class BackfillOrder { kPriority, kShortest, kArea };
  static std::optional<BackfillOrder> ParseBackfillOrder(std::string_view name);

  // `kind`: the queue's order (nullopt: the base policy's). `origin`: what F1's submission time
  // counts from (the controller's start; in muster-sim, the trace's origin). `protect_after`
  // (scheduling.protect_after_ms; with a kind only, 0: off): a job that has waited this long
  // (from submission or --begin) is protected: it goes before unprotected jobs (the core's tiers
  // and preempting jobs aside), protected jobs in submission order, and only protected jobs take
  // reservations.
  OrderedPassPolicy(std::optional<Kind> kind, BackfillOrder backfill,
                    std::unique_ptr<PassPolicy> base, const TimeMs& origin,
                    TimeMs protect_after = 0)
      : kind_(kind),
        backfill_(backfill),
        base_(std::move(base)),
        origin_(origin),
        protect_after_(protect_after) {}

  void BeforePass(TimeMs now) override { base_->BeforePass(now); }
  void BeginPass(core::ClusterView* view) override { base_->BeginPass(view); }
  core::JobReason Admit(const JobEntry& job, const JobUse& use, std::string* detail) override {
    return base_->Admit(job, use, detail);
  }
  void Order(const JobEntry& job, TimeMs now, core::PendingJob* pj) const override;
  void Charge(const JobEntry& job, const JobUse& use, core::PendingJob* pj) override {
    base_->Charge(job, use, pj);
  }
  void Start(const core::JobStart& start, const v1::JobRecord& before, TimeMs now,
             JobChange* change) const override {
    base_->Start(start, before, now, change);
  }
  void AfterPass(const core::SchedulePass& pass, TimeMs now) override {
    base_->AfterPass(pass, now);
  }

  // The order's score of a job (higher goes first): its wait and time limit in seconds, its
  // processors (GPUs when it asks for any, else CPUs), its submission in seconds from the origin.
  static double Score(Kind kind, double wait_s, double limit_s, double procs, double submit_s);
  // An integer priority in the same order as the score (priorities are integers).
  static int64_t RankOf(double score);

 private:
  std::optional<Kind> kind_;
  BackfillOrder backfill_;
  std::unique_ptr<PassPolicy> base_;
  const TimeMs& origin_;
  TimeMs protect_after_;
};

}  // namespace muster::controller
