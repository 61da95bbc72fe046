// Preemption by partition priority_tier (Slurm's preempt/partition_prio): jobs of a higher-tier
// partition push whole jobs of a lower-tier partition on the same nodes aside when that partition's
// preempt_mode allows it, with the partition's grace time; partitions that keep the default
// preempt_mode = "off" are never preempted by tier. And the suspend mode: victims stopped in
// place on every node, keeping GPUs and memory, lending their CPUs, continued when they are free
// again, with their time limit extended by the time suspended.
#include "engine_fixture.h"

namespace muster::controller {
namespace {

constexpr const char* kPartitions = R"(
[[partition]]
name = "scavenge"
nodes = "node[1-4]"
priority_tier = 1
preempt_mode = "requeue"
grace_time = "1s"

[[partition]]
name = "spot"
nodes = "node[1-4]"
priority_tier = 1
preempt_mode = "cancel"

[[partition]]
name = "prio"
nodes = "node[1-4]"
priority_tier = 5

[[partition]]
name = "shared"
nodes = "node[1-4]"
priority_tier = 1
preempt_mode = "suspend"

[[partition]]
name = "prio2"
nodes = "node[1-4]"
priority_tier = 5
preempt_mode = "requeue"
)";

class PartitionPreemptionTest : public EngineTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    UseConfig(kPartitions);
  }

  uint64_t SubmitTo(const std::string& partition, uint32_t nodes, uint32_t gpus,
                    const std::string& topology = "") {
    v1::JobSpec s = Gang(nodes, gpus);
    s.add_partitions(partition);
    s.set_topology(topology);
    auto id = Submit(s, Root());
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : 0;
  }
};

TEST_F(PartitionPreemptionTest, HigherTierPreemptsAWholeGangOfAPreemptablePartition) {
  const uint64_t g1 = SubmitTo("scavenge", 2, 8, "leaf");
  Pass();
  Run(g1);
  now_ += 60'000;
  const uint64_t g2 = SubmitTo("scavenge", 2, 8, "leaf");
  Pass();
  Run(g2);
  Flush();
  const uint64_t high = SubmitTo("prio", 2, 8, "leaf");
  Pass();
  // The later gang goes, whole, with the partition's grace; the older one keeps running.
  EXPECT_EQ(Job(g1).state(), v1::RUNNING);
  ASSERT_EQ(Job(g2).state(), v1::PENDING);
  EXPECT_EQ(Job(g2).reason(), "Preempted");
  EXPECT_NE(Job(g2).reason_detail().find("preempted by job " + std::to_string(high) +
                                         " (partition prio, priority tier 5)"),
            std::string::npos)
      << Job(g2).reason_detail();
  const v1::JobInfo victim = Job(g2);
  for (const auto& n : victim.nodes()) {
    auto sent = Sent(n);
    ASSERT_EQ(sent.size(), 1u) << n;
    ASSERT_TRUE(sent[0].has_terminate_job());
    EXPECT_EQ(sent[0].terminate_job().kill_grace_ms(), 1000u);
  }
  Pass();
  EXPECT_EQ(Job(g1).state(), v1::RUNNING) << "nothing more while the victim leaves";
  CleanUp(g2, 0);
  Pass();
  ASSERT_EQ(Job(high).state(), v1::RUNNING);
  EXPECT_EQ(Job(high).partition(), "prio");
}

TEST_F(PartitionPreemptionTest, CancelModeEndsTheJobPreempted) {
  const uint64_t spot = SubmitTo("spot", 4, 8);
  Pass();
  Run(spot);
  const uint64_t high = SubmitTo("prio", 1, 8);
  Pass();
  EXPECT_EQ(Job(spot).state(), v1::PREEMPTED);
  CleanUp(spot, 0);
  Pass();
  EXPECT_EQ(Job(high).state(), v1::RUNNING);
}

TEST_F(PartitionPreemptionTest, NoPreemptionOfOffPartitionsOrTheSameTier) {
  // The default partition "gpu" (tier 1, preempt_mode off) is never preempted by tier.
  const uint64_t plain = SubmitTo("gpu", 4, 8);
  Pass();
  Run(plain);
  const uint64_t high = SubmitTo("prio", 1, 8);
  Pass();
  EXPECT_EQ(Job(plain).state(), v1::RUNNING);
  EXPECT_EQ(Job(high).state(), v1::PENDING);
  Exited(plain, "node1", 0);
  for (const char* n : {"node1", "node2", "node3", "node4"}) Cleaned(plain, n);
  Pass();
  ASSERT_EQ(Job(high).state(), v1::RUNNING);
  Run(high);
  // prio2 is preemptable but has the same tier as prio: a prio job does not push it aside.
  const uint64_t same = SubmitTo("prio2", 3, 8);
  Pass();
  Run(same);
  const uint64_t another = SubmitTo("prio", 1, 8);
  Pass();
  EXPECT_EQ(Job(same).state(), v1::RUNNING);
  EXPECT_EQ(Job(another).state(), v1::PENDING);
}

TEST_F(PartitionPreemptionTest, ByTierTheVictimsAreOnlyThoseBelowThePartitionPlacedIn) {
  // A job that may run in scavenge or prio preempts only for its prio placement: placed in
  // scavenge (tier 1) it would outrank nobody.
  const uint64_t low = SubmitTo("scavenge", 4, 8);
  Pass();
  Run(low);
  v1::JobSpec s = Gang(1, 8);
  s.add_partitions("scavenge");
  s.add_partitions("prio");
  auto both = Submit(s, Root());
  ASSERT_TRUE(both.ok());
  Pass();
  EXPECT_EQ(Job(low).state(), v1::PENDING);
  CleanUp(low, 0);
  Pass();
  EXPECT_EQ(Job(*both).state(), v1::RUNNING);
}

TEST_F(PartitionPreemptionTest, SuspendLendsCpusKeepsGpusAndResumesWhenThePreemptorEnds) {
  // A CPU-only 2-node gang fills every CPU of node1-2 (GPUs idle), with a 1 h limit.
  v1::JobSpec cpu = Gang(2, 0);
  cpu.add_partitions("shared");
  cpu.set_ntasks_per_node(16);
  cpu.set_time_limit_ms(3'600'000);
  cpu.add_required_nodes("node1");
  cpu.add_required_nodes("node2");
  auto low = Submit(cpu, Root());
  ASSERT_TRUE(low.ok()) << low.status().ToString();
  // And a GPU job in "shared" holds node3-4's GPUs: suspending it would free no GPU.
  const uint64_t gpu_low = SubmitTo("shared", 2, 8);
  Pass();
  Run(*low);
  Run(gpu_low);
  Flush();
  // A prio job needing 2 nodes with 4 CPUs and 4 GPUs each: only node1-2 have GPUs to give.
  v1::JobSpec want = Gang(2, 4);
  want.add_partitions("prio");
  want.set_ntasks_per_node(4);
  auto high = Submit(want, Root());
  ASSERT_TRUE(high.ok());
  Pass();
  // The CPU gang is suspended on both nodes, whole; it stays RUNNING inside, SUSPENDED outside.
  ASSERT_EQ(Job(*low).state(), v1::SUSPENDED) << Job(*low).reason_detail();
  EXPECT_EQ(Job(*low).reason(), "Preempted");
  EXPECT_NE(Job(*low).reason_detail().find("suspended: preempted by job " + std::to_string(*high)),
            std::string::npos);
  EXPECT_EQ(Job(gpu_low).state(), v1::RUNNING) << "suspending it frees no GPU";
  for (const char* n : {"node1", "node2"}) {
    auto sent = Sent(n);
    ASSERT_EQ(sent.size(), 1u) << n;
    ASSERT_TRUE(sent[0].has_suspend_job()) << n;
    EXPECT_FALSE(sent[0].suspend_job().resume());
  }
  EXPECT_TRUE(Sent("node3").empty());
  // The next pass starts the preemptor on the lent CPUs (a resume must not take them back).
  now_ += 1000;
  Pass();
  ASSERT_EQ(Job(*high).state(), v1::RUNNING);
  EXPECT_EQ(Job(*low).state(), v1::SUSPENDED);
  Run(*high);
  // squeue -t S finds it.
  v1::ListJobsRequest lr;
  lr.add_states(v1::SUSPENDED);
  auto listed = engine_->ListJobs(Root(), lr);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->jobs_size(), 1);
  EXPECT_EQ(listed->jobs(0).id(), *low);
  // A controller restart keeps the suspension and who holds the CPUs.
  Restart();
  Up("node1", {*low, *high});
  Up("node2", {*low, *high});
  Up("node3", {gpu_low});
  Up("node4", {gpu_low});
  EXPECT_EQ(Job(*low).state(), v1::SUSPENDED);
  {
    // The reconnected agents are told again that it is suspended (one told while away missed it).
    auto again = Sent("node2");
    auto it = std::find_if(again.begin(), again.end(),
                           [](const v1::ControllerMessage& m) { return m.has_suspend_job(); });
    ASSERT_NE(it, again.end());
    EXPECT_FALSE(it->suspend_job().resume());
  }
  Flush();
  // The preemptor ends 10 minutes later: the suspended gang continues on both nodes, with 10 min
  // (and the second before) added to its time limit.
  now_ += 600'000;
  Exited(*high, "node1", 0);
  Cleaned(*high, "node1");
  Cleaned(*high, "node2");
  Pass();
  ASSERT_EQ(Job(*low).state(), v1::RUNNING) << Job(*low).reason_detail();
  for (const char* n : {"node1", "node2"}) {
    auto sent = Sent(n);
    auto it = std::find_if(sent.begin(), sent.end(),
                           [](const v1::ControllerMessage& m) { return m.has_suspend_job(); });
    ASSERT_NE(it, sent.end()) << n;
    EXPECT_TRUE(it->suspend_job().resume());
    EXPECT_EQ(it->suspend_job().suspended_ms(), 601'000);
  }
  // Suspended jobs are not preempted again while suspended, and once resumed they run on their
  // CPUs: a new prio job preempts again (suspends it again) rather than sharing them.
  v1::JobSpec again = want;
  auto second = Submit(again, Root());
  ASSERT_TRUE(second.ok());
  Pass();
  EXPECT_EQ(Job(*low).state(), v1::SUSPENDED);
  EXPECT_EQ(Job(*low).preempt_count(), 2u);
  // Cancelled while suspended: its nodes are told to end it (SIGCONT first, agent side) and its
  // GPUs and memory come back with the CPUs it no longer holds.
  Flush();
  v1::CancelJobRequest cr;
  cr.add_job_ids(*low);
  ASSERT_TRUE(engine_->CancelJob(Root(), cr, now_).ok());
  auto sent = Sent("node1");
  ASSERT_FALSE(sent.empty());
  EXPECT_TRUE(sent.back().has_terminate_job());
  Pass();
  EXPECT_EQ(Job(*low).state(), v1::SUSPENDED) << "not resumed while it is being cancelled";
  Exited(*low, "node1", 0, SIGTERM);
  EXPECT_EQ(Job(*low).state(), v1::CANCELLED);
  // A restart while its nodes clean up: they hold its GPUs, never the CPUs it lent.
  Restart();
  Up("node1", {*low});
  Up("node2", {*low});
  Up("node3", {gpu_low});
  Up("node4", {gpu_low});
  Cleaned(*low, "node1");
  Cleaned(*low, "node2");
  Pass();
  EXPECT_EQ(Job(*second).state(), v1::RUNNING);
}

TEST(PartitionPreemptionConfigTest, BadModesAreRefused) {
  auto c = ParseConfig(std::string(kConfig) +
                           "[[partition]]\nname = \"x\"\nnodes = \"node1\"\n"
                           "preempt_mode = \"sometimes\"\n",
                       "test.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("expected off, requeue, cancel or suspend"),
            std::string::npos)
      << c.status().message();
}

}  // namespace
}  // namespace muster::controller

namespace muster::controller {
namespace {

// scontrol suspend/resume: operators and admins stop a running job in place (its CPUs lent, its
// GPUs kept); the scheduler never resumes it by itself; their resume does, once its CPUs are
// free; the time stopped extends its limit.
class AdminSuspendTest : public EngineTest {
 protected:
  Status Act(uint64_t id, v1::UpdateJobRequest::Action action, Caller who = Root()) {
    v1::UpdateJobRequest r;
    r.add_job_ids(id);
    r.set_action(action);
    auto resp = engine_->UpdateJob(who, r, now_);
    if (!resp.ok()) return resp.status();
    for (const auto& res : resp->results()) {
      if (res.code() != 0) return Status(static_cast<StatusCode>(res.code()), res.message());
    }
    return Status::Ok();
  }
  bool Told(const char* node, bool resume) {
    for (const auto& m : Sent(node)) {
      if (m.has_suspend_job() && m.suspend_job().resume() == resume) return true;
    }
    return false;
  }
};

TEST_F(AdminSuspendTest, AnOperatorSuspendsAndOnlyAResumeContinues) {
  AllUp();
  v1::JobSpec s = Gang(1, 2);
  s.set_ntasks_per_node(16);  // every CPU of its node
  s.set_time_limit_ms(3'600'000);
  auto id = Submit(s, Alice());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  Pass();
  Run(*id);
  Flush();
  const std::string node = Job(*id).nodes(0);
  const Caller olga{1005, 1005, "olga", false, /*is_operator=*/true};
  EXPECT_EQ(Act(*id, v1::UpdateJobRequest::SUSPEND, Bob()).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(Act(*id, v1::UpdateJobRequest::SUSPEND, Alice()).code(), StatusCode::kPermissionDenied)
      << "owners do not suspend their jobs, as in Slurm";
  EXPECT_EQ(Act(*id, v1::UpdateJobRequest::RESUME, olga).code(), StatusCode::kFailedPrecondition)
      << "not suspended";
  ASSERT_TRUE(Act(*id, v1::UpdateJobRequest::SUSPEND, olga).ok());
  EXPECT_EQ(Job(*id).state(), v1::SUSPENDED);
  EXPECT_TRUE(Told(node.c_str(), /*resume=*/false));
  EXPECT_EQ(Act(*id, v1::UpdateJobRequest::SUSPEND, olga).code(), StatusCode::kFailedPrecondition);
  Flush();
  // Its CPUs are free all along: the scheduler's passes leave it suspended all the same.
  now_ += 60'000;
  Pass();
  Pass();
  EXPECT_EQ(Job(*id).state(), v1::SUSPENDED);
  EXPECT_FALSE(Told(node.c_str(), /*resume=*/true));
  // A restart keeps it suspended by the operator.
  Restart();
  for (const char* n : {"node1", "node2", "node3", "node4"}) {
    Up(n, n == node ? std::vector<uint64_t>{*id} : std::vector<uint64_t>{});
  }
  Pass();
  EXPECT_EQ(Job(*id).state(), v1::SUSPENDED);
  Flush();
  ASSERT_TRUE(Act(*id, v1::UpdateJobRequest::RESUME, Root()).ok());
  EXPECT_EQ(Job(*id).state(), v1::RUNNING);
  EXPECT_TRUE(Told(node.c_str(), /*resume=*/true));
}

TEST_F(AdminSuspendTest, AResumeWaitsForCpusLentMeanwhile) {
  AllUp();
  v1::JobSpec s = Gang(1, 0);
  s.set_ntasks_per_node(16);
  s.add_required_nodes("node1");
  auto first = Submit(s, Alice());
  ASSERT_TRUE(first.ok());
  Pass();
  Run(*first);
  ASSERT_TRUE(Act(*first, v1::UpdateJobRequest::SUSPEND).ok());
  // Its CPUs are lent: another job takes them.
  auto second = Submit(s, Bob());
  ASSERT_TRUE(second.ok());
  now_ += 1000;
  Pass();
  ASSERT_EQ(Job(*second).state(), v1::RUNNING) << Job(*second).reason_detail();
  Run(*second);
  Flush();
  ASSERT_TRUE(Act(*first, v1::UpdateJobRequest::RESUME).ok());
  EXPECT_EQ(Job(*first).state(), v1::SUSPENDED) << "its CPUs are another job's now";
  EXPECT_NE(Job(*first).reason_detail().find("continues once its CPUs are free"),
            std::string::npos);
  Exited(*second, "node1", 0);
  Cleaned(*second, "node1");
  Pass();
  EXPECT_EQ(Job(*first).state(), v1::RUNNING);
  EXPECT_TRUE(Told("node1", /*resume=*/true));
}

}  // namespace
}  // namespace muster::controller

namespace muster::controller {
namespace {

Status ActOn(Engine& engine, uint64_t id, v1::UpdateJobRequest::Action action, TimeMs now) {
  v1::UpdateJobRequest r;
  r.add_job_ids(id);
  r.set_action(action);
  auto resp = engine.UpdateJob({0, 0, "root", true}, r, now);
  if (!resp.ok()) return resp.status();
  for (const auto& res : resp->results()) {
    if (res.code() != 0) return Status(static_cast<StatusCode>(res.code()), res.message());
  }
  return Status::Ok();
}

// A CPU gang of "shared" on node1-2 (every CPU), then a prio job that needs those CPUs.
class SuspendKindsTest : public PartitionPreemptionTest {
 protected:
  uint64_t CpuGang() {
    v1::JobSpec cpu = Gang(2, 0);
    cpu.add_partitions("shared");
    cpu.set_ntasks_per_node(16);
    cpu.add_required_nodes("node1");
    cpu.add_required_nodes("node2");
    auto id = Submit(cpu, Root());
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : 0;
  }
  // A GPU job of "shared" holds node3-4's GPUs, so the prio job can go only to node1-2.
  void FillNode34() {
    gpu_low_ = SubmitTo("shared", 2, 8);
    Pass();
    Run(gpu_low_);
  }
  uint64_t Preemptor() {
    v1::JobSpec want = Gang(2, 4);
    want.add_partitions("prio");
    want.set_ntasks_per_node(4);
    auto id = Submit(want, Root());
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : 0;
  }
  uint64_t gpu_low_ = 0;
};

// Its CPUs are lent to its preemptor: an operator's resume would only have it preempted again.
TEST_F(SuspendKindsTest, AJobSuspendedByPreemptionIsNotAnOperatorsToResume) {
  const uint64_t low = CpuGang();
  FillNode34();
  Run(low);
  Flush();
  const uint64_t high = Preemptor();
  Pass();
  ASSERT_EQ(Job(low).state(), v1::SUSPENDED);
  const Status s = ActOn(*engine_, low, v1::UpdateJobRequest::RESUME, now_);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("suspended by preemption (for job " + std::to_string(high)),
            std::string::npos)
      << s.message();
}

// An operator's suspend belongs to the run it stopped: requeued, the job's next run is
// suspended by preemption like any other, and resumes by itself once its preemptor is gone.
TEST_F(SuspendKindsTest, AnOperatorsSuspendEndsWithItsRun) {
  const uint64_t low = CpuGang();
  FillNode34();
  Run(low);
  ASSERT_TRUE(ActOn(*engine_, low, v1::UpdateJobRequest::SUSPEND, now_).ok());
  ASSERT_TRUE(ActOn(*engine_, low, v1::UpdateJobRequest::REQUEUE, now_).ok());
  ASSERT_EQ(Job(low).state(), v1::PENDING);
  Cleaned(low, "node1");
  Cleaned(low, "node2");
  now_ += 1000;
  Pass();
  ASSERT_EQ(Job(low).state(), v1::RUNNING) << Job(low).reason_detail();
  Run(low);
  Flush();
  const uint64_t high = Preemptor();
  Pass();
  ASSERT_EQ(Job(low).state(), v1::SUSPENDED);
  now_ += 1000;
  Pass();
  ASSERT_EQ(Job(high).state(), v1::RUNNING);
  Run(high);
  Exited(high, "node1", 0);
  Cleaned(high, "node1");
  Cleaned(high, "node2");
  Pass();
  EXPECT_EQ(Job(low).state(), v1::RUNNING) << "held suspended by the first run's operator";
}

}  // namespace
}  // namespace muster::controller
