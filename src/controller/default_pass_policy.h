// Muster's pass policy: priority from fair share and QoS; account and QoS limits (a job over a
// per-job limit is not considered; the rest are counters the core charges); GPU quotas with
// cohorts that lend and reclaim (each GPU type a job may use is a choice with its own quota);
// the cluster's licenses (counters as the limits');
// advance reservations (a job in one ends with it); preemption for what still waits.
//
// Strand-confined.
#pragma once

#include "fair_share.h"
#include "license_book.h"
#include "limit_tracker.h"
#include "pass_policy.h"
#include "preemptor.h"
#include "qos_manager.h"
#include "quota_book.h"
#include "reservation_manager.h"

namespace muster::controller {

class DefaultPassPolicy final : public PassPolicy {
 public:
  DefaultPassPolicy(FairShare& fair_share, const QosManager& qos, LimitTracker& limits,
                    LicenseBook& licenses, QuotaBook& quotas,
                    const ReservationManager& reservations, Preemptor& preemptor)
      : fair_share_(fair_share),
        qos_(qos),
        limits_(limits),
        licenses_(licenses),
        quotas_(quotas),
        reservations_(reservations),
        preemptor_(preemptor) {}

  void BeforePass(TimeMs now) override;
  void BeginPass(core::ClusterView* view) override;
  core::JobReason Admit(const JobEntry& job, const JobUse& use, std::string* detail) override;
  void Order(const JobEntry& job, TimeMs now, core::PendingJob* pj) const override;
  void Charge(const JobEntry& job, const JobUse& use, core::PendingJob* pj) override;
  void Start(const core::JobStart& start, const v1::JobRecord& before, TimeMs now,
             JobChange* change) const override;
  void AfterPass(const core::SchedulePass& pass, TimeMs now) override;

 private:
  FairShare& fair_share_;
  const QosManager& qos_;
  LimitTracker& limits_;
  LicenseBook& licenses_;
  QuotaBook& quotas_;
  const ReservationManager& reservations_;
  Preemptor& preemptor_;
  bool quotas_now_ = false;  // this pass has quotas to charge (BeginPass)
};

}  // namespace muster::controller
