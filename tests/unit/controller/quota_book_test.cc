// QuotaBook on its own (no engine), over the accounts and jobs a restarted controller reads from
// its store: which account's quota a job counts against, the GPU types a job tries, the quotas
// and cohorts a pass sees with what running jobs hold, and which borrowed jobs an owner may take
// GPUs back from.
#include "quota_book.h"

#include <gtest/gtest.h>

#include "manager_context.h"

namespace muster::controller {
namespace {

constexpr TimeMs kNow = 1'700'000'000'000;

// Science and bio lend each other h100s; physics has a100s of its own and science's h100s above.
constexpr const char* kQuotas = R"(
[[nodes]]
names = "gpu[1-2]"
cpus = 8
memory_mb = 1000
gpus = 8
gpu_type = "h100"

[[nodes]]
names = "gpu3"
cpus = 8
memory_mb = 1000
gpus = 8
gpu_type = "a100"

[[partition]]
name = "gpu"
nodes = "gpu[1-3]"

[[accounts]]
name = "science"
users = ["alice"]
cohort = "campus"
quota = { h100 = { guaranteed = 8, max = 16 } }

[[accounts]]
name = "physics"
parent = "science"
users = ["alice"]
quota = { a100 = 4 }

[[accounts]]
name = "bio"
users = ["bob"]
cohort = "campus"
quota = { h100 = 8 }

[[accounts]]
name = "guests"
users = ["carol"]
)";

using Usage = std::map<std::pair<std::string, std::string>, uint64_t>;

class QuotaBookTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(); }
  // The managers afresh over the store, as a restarted controller makes them.
  void Start() {
    quotas_.reset();
    policy_.reset();  // the old controller goes before the new one starts
    policy_ = std::make_unique<PolicyManagers>(world_, kNow);
    quotas_ = std::make_unique<QuotaBook>(*policy_->ctx, policy_->accounts, policy_->table->jobs,
                                          *policy_->limits);
  }
  static v1::JobRecord Pending(uint64_t id, const std::string& user, const std::string& account,
                               uint32_t gpus, const std::string& type = "") {
    v1::JobRecord r;
    r.set_id(id);
    r.set_state(v1::PENDING);
    r.set_submit_time_ms(kNow - 1000);
    v1::JobSpec* s = r.mutable_spec();
    s->set_user(user);
    s->set_uid(user == "alice" ? 1000 : user == "bob" ? 1001 : 1002);
    s->set_account(account);
    s->set_qos("normal");
    s->add_partitions("gpu");
    s->set_nodes(1);
    s->set_ntasks(1);
    s->set_gpus_per_node(gpus);
    s->set_gpu_type(type);
    return r;
  }
  // A job running with GPUs [0, n) on each named node, as a pass started it.
  static v1::JobRecord Running(uint64_t id, const std::string& user, const std::string& account,
                               std::vector<std::pair<std::string, uint32_t>> on,
                               bool borrowed = false, const std::string& type = "") {
    v1::JobRecord r = Pending(id, user, account, on.front().second, type);
    r.set_state(v1::RUNNING);
    r.set_start_time_ms(kNow - 1000);
    r.set_borrowed(borrowed);
    r.mutable_spec()->set_nodes(static_cast<uint32_t>(on.size()));
    r.mutable_allocation()->set_partition("gpu");
    for (const auto& [node, gpus] : on) {
      v1::NodeAllocation* na = r.mutable_allocation()->add_nodes();
      na->set_node(node);
      na->add_cpu_ids(static_cast<uint32_t>(id % 8));
      na->set_ntasks(1);
      for (uint32_t g = 0; g < gpus; ++g) na->add_gpu_indices(g);
    }
    return r;
  }
  const v1::JobRecord& Rec(uint64_t id) { return policy_->table->jobs.Find(id)->rec(); }
  ManagerContext world_{kQuotas};
  std::unique_ptr<PolicyManagers> policy_;
  std::unique_ptr<QuotaBook> quotas_;
};

TEST_F(QuotaBookTest, AJobCountsAgainstTheNearestQuotaUpItsTreeForTheTypeItRunsOn) {
  EXPECT_TRUE(quotas_->any());
  EXPECT_EQ(quotas_->Holder("physics", "h100"), "science") << "physics holds none of its own";
  EXPECT_EQ(quotas_->Holder("physics", "a100"), "physics");
  EXPECT_EQ(quotas_->Holder("science", "a100"), "") << "a quota below covers no one above";
  EXPECT_EQ(quotas_->Holder("guests", "h100"), "");
  EXPECT_EQ(quotas_->Holder("physics", ""), "") << "no type, no quota";
  EXPECT_TRUE(quotas_->TypeHasQuotas("h100"));
  EXPECT_FALSE(quotas_->TypeHasQuotas("v100"));
}

TEST_F(QuotaBookTest, AJobThatNamesNoGpuTypeTriesItsQuotaTypesNearestFirst) {
  v1::JobRecord either = Pending(2, "alice", "physics", 2);
  either.mutable_spec()->add_gpu_types("h100");
  either.mutable_spec()->add_gpu_types("a100");
  world_.PutJobs({Pending(1, "alice", "physics", 2), either,
                  Pending(3, "alice", "physics", 2, "h100"), Pending(4, "carol", "guests", 2),
                  Pending(5, "alice", "physics", 0)});
  Start();
  auto choices = [&](uint64_t id) { return quotas_->ChoiceTypes(*policy_->table->jobs.Find(id)); };
  EXPECT_EQ(choices(1), (std::vector<std::string>{"a100", "h100"})) << "physics's, then science's";
  EXPECT_EQ(choices(2), (std::vector<std::string>{"h100", "a100"})) << "as it named them";
  EXPECT_EQ(choices(3), (std::vector<std::string>{"h100"}));
  EXPECT_EQ(choices(4), (std::vector<std::string>{""})) << "no quota: the request as it is";
  EXPECT_EQ(choices(5), (std::vector<std::string>{""})) << "no GPUs";
}

TEST_F(QuotaBookTest, APassSeesEveryQuotaWithWhatRunningJobsHoldAndOneCohortPerType) {
  // Job 10 asked for any type and got h100s; guests' job 12 counts for no quota.
  world_.PutJobs({Running(10, "alice", "physics", {{"gpu1", 6}}),
                  Running(11, "alice", "physics", {{"gpu3", 2}}, false, "a100"),
                  Running(12, "carol", "guests", {{"gpu2", 4}})});
  Start();
  core::ClusterView view;
  quotas_->Fill(&view);
  ASSERT_EQ(view.quotas.size(), 3u);
  const int32_t science = quotas_->QuotaIndex("physics", "h100");
  ASSERT_GE(science, 0);
  EXPECT_EQ(science, quotas_->QuotaIndex("science", "h100"));
  const core::QuotaView& s = view.quotas[static_cast<size_t>(science)];
  EXPECT_EQ(s.used, 6u);
  EXPECT_EQ(s.guaranteed, 8u);
  EXPECT_EQ(s.max, 16u);
  EXPECT_EQ(s.lending_limit, 8u) << "in a cohort it lends all its guaranteed GPUs by default";
  const int32_t bio = quotas_->QuotaIndex("bio", "h100");
  ASSERT_GE(bio, 0);
  ASSERT_GE(s.cohort, 0);
  EXPECT_EQ(view.quotas[static_cast<size_t>(bio)].cohort, s.cohort);
  EXPECT_EQ(view.cohorts[static_cast<size_t>(s.cohort)].name, "campus (h100)");
  EXPECT_EQ(view.cohorts[static_cast<size_t>(s.cohort)].members.size(), 2u);
  // Outside a cohort a quota neither lends nor goes past its guarantee.
  const core::QuotaView& a100 =
      view.quotas[static_cast<size_t>(quotas_->QuotaIndex("physics", "a100"))];
  EXPECT_EQ(a100.used, 2u);
  EXPECT_EQ(a100.max, 4u);
  EXPECT_EQ(a100.lending_limit, 0u);
  EXPECT_EQ(a100.cohort, -1);
  EXPECT_EQ(quotas_->QuotaIndex("guests", "h100"), -1);
  EXPECT_EQ(quotas_->Usage(), (Usage{{{"physics", "a100"}, 2}, {{"science", "h100"}, 6}}));
  EXPECT_EQ(quotas_->JobsOf("science", "h100"),
            (std::vector<std::pair<uint64_t, uint64_t>>{{10, 6}}));
}

TEST_F(QuotaBookTest, BorrowedGpusAreReclaimableOnlyWhileTheirQuotaIsPastItsGuarantee) {
  // Science runs 12 h100s of its 8 guaranteed; guests run on a100s physics is guaranteed.
  v1::JobRecord bio = Running(22, "bob", "bio", {{"gpu2", 2}});
  bio.mutable_allocation()->mutable_nodes(0)->clear_gpu_indices();
  bio.mutable_allocation()->mutable_nodes(0)->add_gpu_indices(6);
  bio.mutable_allocation()->mutable_nodes(0)->add_gpu_indices(7);
  world_.PutJobs({Running(20, "alice", "science", {{"gpu1", 8}, {"gpu2", 4}}, true),
                  Running(21, "carol", "guests", {{"gpu3", 2}}, true), bio});
  Start();
  const Usage usage = quotas_->Usage();
  EXPECT_EQ(usage, (Usage{{{"bio", "h100"}, 2}, {{"science", "h100"}, 12}}));
  EXPECT_TRUE(quotas_->Reclaimable(Rec(20), "h100", usage));
  EXPECT_TRUE(quotas_->Reclaimable(Rec(21), "a100", usage)) << "no quota of its own";
  EXPECT_FALSE(quotas_->Reclaimable(Rec(22), "h100", usage)) << "not marked borrowed";
  Usage within = usage;
  within[{"science", "h100"}] = 8;
  EXPECT_FALSE(quotas_->Reclaimable(Rec(20), "h100", within)) << "back within its guarantee";
  // Bio may take back what its guarantee still has room for, and no more.
  EXPECT_TRUE(quotas_->MayReclaim("bio", "h100", 6, usage));
  EXPECT_FALSE(quotas_->MayReclaim("bio", "h100", 7, usage));
  EXPECT_FALSE(quotas_->MayReclaim("guests", "h100", 1, usage)) << "nothing guaranteed";

  // A start on a100s: borrowed for guests (physics holds them), not for physics.
  core::JobStart start;
  start.placement.nodes.push_back({});
  start.placement.nodes[0].node = static_cast<core::NodeIndex>(*policy_->ctx->NodeIndex("gpu3"));
  start.placement.nodes[0].gpus = {4};
  EXPECT_TRUE(quotas_->Borrowed(start, Pending(30, "carol", "guests", 1)));
  EXPECT_FALSE(quotas_->Borrowed(start, Pending(31, "alice", "physics", 1)));
  start.borrowed = true;  // the pass says it went past its quota
  EXPECT_TRUE(quotas_->Borrowed(start, Pending(31, "alice", "physics", 1)));
}

}  // namespace
}  // namespace muster::controller
