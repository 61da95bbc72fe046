#include "queue_orders.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "job_views.h"

namespace muster::controller {

std::optional<OrderedPassPolicy::Kind> OrderedPassPolicy::Parse(std::string_view name) {
  if (name == "fcfs") return Kind::kFcfs;
  if (name == "sjf") return Kind::kSjf;
  if (name == "wfp3") return Kind::kWfp3;
  if (name == "unicep") return Kind::kUnicep;
  if (name == "f1") return Kind::kF1;
  if (name == "hrrn") return Kind::kHrrn;
  return std::nullopt;
}

std::optional<OrderedPassPolicy::BackfillOrder> OrderedPassPolicy::ParseBackfillOrder(
    std::string_view name) {
  if (name == "priority") return BackfillOrder::kPriority;
  if (name == "shortest") return BackfillOrder::kShortest;
  if (name == "area") return BackfillOrder::kArea;
  return std::nullopt;
}

double OrderedPassPolicy::Score(Kind kind, double wait_s, double limit_s, double procs,
                                double submit_s) {
  // The paper's scores are "smallest first"; these are their negations.
  switch (kind) {
    case Kind::kFcfs:
      return -submit_s;
    case Kind::kSjf:
      return -limit_s;  // ties: the earlier submission (the core's own tie-break)
    case Kind::kWfp3:
      return std::pow(wait_s / limit_s, 3) * procs;
    case Kind::kUnicep:
      // The paper's 1e-15s keep a one-processor job (log2(1) = 0) finite: far ahead of others.
      return (wait_s + 1e-15) / (std::log2(procs + 1e-15) * limit_s);
    case Kind::kHrrn:
      return (wait_s + std::max(limit_s, 10.0)) / std::max(limit_s, 10.0);
    case Kind::kF1:
      return -(std::log10(limit_s > 0 ? limit_s : 0.1) * procs +
               870 * std::log10(submit_s > 0 ? submit_s : 0.1));
  }
  return 0;
}

int64_t OrderedPassPolicy::RankOf(double score) {
  if (std::isnan(score)) score = 0;
  // An IEEE double's bits, read as an integer, keep the order of non-negative values; negative
  // ones have their magnitude bits flipped so that they order too.
  int64_t bits = 0;
  std::memcpy(&bits, &score, sizeof bits);
  return bits >= 0 ? bits : bits ^ std::numeric_limits<int64_t>::max();
}

void OrderedPassPolicy::Order(const JobEntry& job, TimeMs now, core::PendingJob* pj) const {
  const JobTotals totals = TotalsOf(pj->request);
  const double procs = totals.gpus > 0 ? totals.gpus : std::max<uint32_t>(1, totals.cpus);
  // Without a time limit a job counts as very long (SJF puts it last, WFP3 ages it slowly).
  const double limit_s =
      pj->request.time_limit_ms > 0 ? static_cast<double>(pj->request.time_limit_ms) / 1000 : 1e9;
  const double wait_s = static_cast<double>(std::max<TimeMs>(0, now - pj->submit_time_ms)) / 1000;
  switch (backfill_) {
    case BackfillOrder::kPriority:
      break;
    case BackfillOrder::kShortest:
      pj->backfill_rank = RankOf(-limit_s);
      break;
    case BackfillOrder::kArea:
      pj->backfill_rank = RankOf(-limit_s * procs);
      break;
  }
  if (!kind_) {
    base_->Order(job, now, pj);
    return;
  }
  const double submit_s = static_cast<double>(pj->submit_time_ms - origin_) / 1000;
  pj->priority.by_policy = true;
  pj->priority.policy_priority = RankOf(Score(*kind_, wait_s, limit_s, procs, submit_s));
  pj->had_reservation = false;
  if (protect_after_ > 0) {
    // Two bands: the protected above, by submission (earliest highest); the others by the
    // order's score, halved into the lower band (RankOf's order survives a shift).
    // Waiting counts from when it could start (--begin), as the age factor's does.
    const TimeMs eligible = std::max<TimeMs>(pj->submit_time_ms, job.rec().spec().begin_time_ms());
    if (now - eligible >= protect_after_) {
      pj->priority.policy_priority =
          (int64_t{1} << 62) - std::clamp<TimeMs>(pj->submit_time_ms, 0, (int64_t{1} << 61));
    } else {
      pj->priority.policy_priority = (pj->priority.policy_priority >> 1) - (int64_t{1} << 62);
      pj->reserve = false;
    }
  }
}

}  // namespace muster::controller
