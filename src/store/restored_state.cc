#include "muster/store/restored_state.h"

#include <algorithm>

namespace muster::store {

Result<RestoredState> PrepareRestoredState(StateStore& store, uint64_t job_id_gap) {
  MUSTER_ASSIGN_OR_RETURN(LoadedState state, store.LoadAll());
  if (!state.meta) {
    return FailedPrecondition(
        "this state directory holds no controller state (no meta record): nothing to restore");
  }
  v1::MetaRecord meta = *state.meta;
  uint64_t max_id = state.max_history_job_id;
  for (const v1::JobRecord& j : state.jobs) max_id = std::max(max_id, j.id());
  RestoredState r;
  r.epoch_before = meta.epoch();
  r.next_job_id_before = meta.next_job_id();
  meta.set_epoch(meta.epoch() + kRestoreEpochJump);
  meta.set_next_job_id(std::max(meta.next_job_id(), max_id + 1) + job_id_gap);
  r.epoch_after = meta.epoch();
  r.next_job_id_after = meta.next_job_id();
  Mutation m;
  m.PutMeta(meta);
  MUSTER_RETURN_IF_ERROR(store.Commit(m, Durability::kSync));
  return r;
}

}  // namespace muster::store
