// A state directory restored from a backup, made safe to start on (`musterctld
// --after-restore`): the cluster has seen later epochs than the copy holds (agents refuse a
// controller older than one they obeyed) and job ids issued after the copy was taken. Both are
// moved well past anything the cluster can have seen since.
#pragma once

#include <cstdint>

#include "muster/common/status.h"
#include "muster/store/state_store.h"

namespace muster::store {

// Controller epochs a cluster could go through between a backup and its restore (each start and
// reconfiguration is one): the restored epoch moves this far on.
inline constexpr uint64_t kRestoreEpochJump = 1'000'000;

struct RestoredState {
  uint64_t epoch_before = 0, epoch_after = 0;
  uint64_t next_job_id_before = 0, next_job_id_after = 0;
};

// Moves the store's epoch kRestoreEpochJump on and its next job id `job_id_gap` past the
// largest it holds (live or archived), in one synced commit. INTERNAL/DATA_LOSS from the store;
// FAILED_PRECONDITION for a store that was never a controller's (no meta record).
Result<RestoredState> PrepareRestoredState(StateStore& store, uint64_t job_id_gap);

}  // namespace muster::store
