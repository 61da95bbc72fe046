// GPU quotas that lend and reclaim (in the manner of Kueue's cohorts): an account may always use
// its guaranteed GPUs of a type; beyond them, up to its max, it borrows what the other accounts of
// its cohort have idle and lend. Pure arithmetic over ClusterView::quotas and ::cohorts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "muster/core/types.h"

namespace muster::core {

// Whether `amount` more GPUs fit quota `q` now: kNone, or kQuotaMax / kQuotaBorrow with a
// sentence that gives the numbers.
JobReason QuotaBlock(const std::vector<QuotaView>& quotas, const std::vector<CohortView>& cohorts,
                     uint32_t q, uint64_t amount, std::string* detail);

// Whether `amount` more GPUs would take quota `q` beyond what it is guaranteed.
inline bool WouldBorrow(const QuotaView& q, uint64_t amount) {
  return q.used + amount > q.guaranteed;
}

// What the members of a cohort lend now, and what they borrow.
uint64_t CohortLends(const std::vector<QuotaView>& quotas, const CohortView& c);
uint64_t CohortBorrows(const std::vector<QuotaView>& quotas, const CohortView& c);

}  // namespace muster::core
