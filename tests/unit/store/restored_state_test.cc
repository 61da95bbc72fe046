// A state restored from a backup made safe to start on: the epoch moved past any the agents can
// have obeyed since, the next job id past every id the copy holds plus the gap.
#include "muster/store/restored_state.h"

#include <gtest/gtest.h>

#include "muster/store/state_store.h"

namespace muster::store {
namespace {

TEST(RestoredStateTest, EpochAndJobIdsMoveOnInOneCommit) {
  InMemoryStateStore store;
  EXPECT_EQ(PrepareRestoredState(store, 10).status().code(), StatusCode::kFailedPrecondition)
      << "an empty directory is no controller's";
  Mutation m;
  v1::MetaRecord meta;
  meta.set_epoch(7);
  meta.set_next_job_id(100);
  m.PutMeta(meta);
  v1::JobRecord live;
  live.set_id(120);  // newer than the meta says (meta is written later than a job, at times)
  m.PutJob(live);
  ASSERT_TRUE(store.Commit(m).ok());
  auto r = PrepareRestoredState(store, 1000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->epoch_before, 7u);
  EXPECT_EQ(r->epoch_after, 7u + kRestoreEpochJump);
  EXPECT_EQ(r->next_job_id_before, 100u);
  EXPECT_EQ(r->next_job_id_after, 1121u);
  auto loaded = store.LoadAll();
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->meta->epoch(), 7u + kRestoreEpochJump);
  EXPECT_EQ(loaded->meta->next_job_id(), 1121u);
}

}  // namespace
}  // namespace muster::store
