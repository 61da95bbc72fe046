#include "muster/core/quota.h"

namespace muster::core {

uint64_t CohortLends(const std::vector<QuotaView>& quotas, const CohortView& c) {
  uint64_t sum = 0;
  for (uint32_t m : c.members) sum += quotas[m].Lends();
  return sum;
}

uint64_t CohortBorrows(const std::vector<QuotaView>& quotas, const CohortView& c) {
  uint64_t sum = 0;
  for (uint32_t m : c.members) sum += quotas[m].Borrows();
  return sum;
}

JobReason QuotaBlock(const std::vector<QuotaView>& quotas, const std::vector<CohortView>& cohorts,
                     uint32_t index, uint64_t amount, std::string* detail) {
  if (index >= quotas.size()) return JobReason::kNone;
  const QuotaView& q = quotas[index];
  if (q.used + amount > q.max) {
    *detail = q.what + ": " + std::to_string(q.used) + " in use of at most " +
              std::to_string(q.max) + " (guaranteed " + std::to_string(q.guaranteed) +
              "), this job needs " + std::to_string(amount) +
              (amount > q.max ? " (more than the quota's max: it can never start under it)"
                              : "; it starts when " + std::to_string(q.used + amount - q.max) +
                                    " more are free");
    return JobReason::kQuotaMax;
  }
  if (!WouldBorrow(q, amount)) return JobReason::kNone;
  // Borrowing: after this start, what the cohort borrows must stay within what it lends.
  const uint64_t more = (q.used + amount - q.guaranteed) - q.Borrows();
  if (q.cohort < 0 || static_cast<size_t>(q.cohort) >= cohorts.size()) {
    *detail = q.what + ": " + std::to_string(q.used) + " in use of " +
              std::to_string(q.guaranteed) + " guaranteed, this job needs " +
              std::to_string(amount) + "; the account is in no cohort to borrow from";
    return JobReason::kQuotaBorrow;
  }
  const CohortView& c = cohorts[static_cast<size_t>(q.cohort)];
  // The account lends nothing once it borrows, so its own lending leaves the pool.
  const uint64_t lends = CohortLends(quotas, c) - q.Lends();
  const uint64_t borrows = CohortBorrows(quotas, c);
  if (borrows + more <= lends) return JobReason::kNone;
  *detail = q.what + ": " + std::to_string(q.used) + " in use of " + std::to_string(q.guaranteed) +
            " guaranteed, this job would borrow " + std::to_string(more) + " more; cohort " +
            c.name + " lends " + std::to_string(lends) + " idle GPUs and " +
            std::to_string(borrows) +
            " are borrowed already; it starts when the cohort has more idle or its own jobs end";
  return JobReason::kQuotaBorrow;
}

}  // namespace muster::core
