// Jobs end to end: a gang with its GPUs and environment, ends, limits, cancels, drains.
#include <fstream>

#include "harness/cluster_test.h"
#include "muster/common/job_limits.h"

namespace muster::testing {
namespace {

TEST_F(ClusterTest, GangJobRunsOnTwoNodesWithItsGpusAndSlurmEnvironment) {
  auto id = cluster_->Submit("#!/bin/sh\nenv > " + jobs_ + "env.$SLURMD_NODENAME\necho hello\n",
                             Gang(2, 8));
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::COMPLETED, 10'000);
  auto job = cluster_->Job(*id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->nodes_size(), 2);
  EXPECT_EQ(job->exit_code(), 0);
  EXPECT_EQ(Read(jobs_ + "slurm-" + std::to_string(*id) + ".out"), "hello\n");
  std::string env = Read(jobs_ + "env.node1");
  EXPECT_NE(env.find("SLURM_JOB_ID=" + std::to_string(*id) + "\n"), std::string::npos) << env;
  EXPECT_NE(env.find("SLURM_JOB_NODELIST=node[1-2]\n"), std::string::npos) << env;
  EXPECT_NE(env.find("CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7\n"), std::string::npos);
  EXPECT_NE(env.find("SLURM_JOB_NUM_NODES=2\n"), std::string::npos);
  ASSERT_EVENTUALLY(!cluster_->Job(*id)->completing(), 5'000);
  auto n = cluster_->Node("node1");
  EXPECT_EQ(n->gpus_allocated(), 0u);
}

// The largest job the controller accepts (a script just under 4 MiB and nearly 1 MiB of
// environment) fits in one launch on the agent channel. It once broke the channel at every
// reconnect: the job stayed RUNNING, could not be cancelled, and the node took no new work.
TEST_F(ClusterTest, TheLargestJobAcceptedReachesItsNodeAndRuns) {
  std::string script = "#!/bin/sh\necho \"${#BIG0}\" > " + jobs_ + "big.out\n";
  const std::string line = "# " + std::string(1021, 'p') + "\n";
  while (script.size() + line.size() < kMaxScriptBytes) script += line;
  v1::JobSpec s = Gang(1, 0);
  for (int i = 0; i < 8; ++i) {
    s.add_environment("BIG" + std::to_string(i) + "=" + std::string(120'000, 'e'));
  }
  auto id = cluster_->Submit(script, s);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::COMPLETED, 15'000);
  EXPECT_EQ(Read(jobs_ + "big.out"), "120000\n");
  // And the node still takes work.
  auto next = cluster_->Submit("#!/bin/sh\ntrue\n", Gang(4, 0));
  ASSERT_TRUE(next.ok());
  ASSERT_EVENTUALLY(cluster_->State(*next) == v1::COMPLETED, 10'000);
}

TEST_F(ClusterTest, TimeLimitEndsTheJobAsTimeout) {
  v1::JobSpec s = Gang(1, 0);
  s.set_time_limit_ms(700);
  // The script ignores SIGTERM, so only SIGKILL after the grace period stops it.
  auto id =
      cluster_->Submit("#!/bin/sh\ntrap '' TERM\necho $$ > " + jobs_ + "t.pid\nsleep 60\n", s);
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::TIMEOUT, 10'000);
  auto job = cluster_->Job(*id);
  EXPECT_EQ(job->reason(), "TimeLimit");
  EXPECT_EQ(job->exit_signal(), SIGKILL);
  EXPECT_GE(job->end_time_ms() - job->start_time_ms(), 700 + 400);
  EXPECT_TRUE(ProcessGone(jobs_ + "t.pid"));
}

TEST_F(ClusterTest, SignalBeforeTheTimeLimitReachesTheBatchScript) {
  // --signal=B:USR1@2 with a 3 s limit: USR1 after about a second; the script checkpoints and
  // ends on its own, so the job completes instead of timing out.
  v1::JobSpec s = Gang(1, 0);
  s.set_time_limit_ms(3'000);
  s.set_signal(SIGUSR1);
  s.set_signal_time_s(2);
  s.set_signal_batch_only(true);
  auto id = cluster_->Submit(
      "#!/bin/sh\ntrap 'echo checkpoint > " + jobs_ + "sig.out; exit 0' USR1\nsleep 60 &\nwait\n",
      s);
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::COMPLETED || cluster_->State(*id) == v1::TIMEOUT,
                    10'000);
  EXPECT_EQ(cluster_->State(*id), v1::COMPLETED);
  auto job = cluster_->Job(*id);
  EXPECT_LT(job->end_time_ms() - job->start_time_ms(), 3'000);
  std::ifstream in(jobs_ + "sig.out");
  std::string word;
  in >> word;
  EXPECT_EQ(word, "checkpoint");
}

TEST_F(ClusterTest, NonZeroExitFailsAndLaunchErrorsAreReported) {
  auto failed = cluster_->Submit("#!/bin/sh\nexit 7\n", Gang(1, 0));
  ASSERT_TRUE(failed.ok());
  ASSERT_EVENTUALLY(cluster_->State(*failed) == v1::FAILED, 10'000);
  EXPECT_EQ(cluster_->Job(*failed)->exit_code(), 7);
  v1::JobSpec s = Gang(1, 0);
  s.set_stdout_pattern("/nonexistent/dir/out");
  auto bad = cluster_->Submit("#!/bin/sh\ntrue\n", s);
  ASSERT_TRUE(bad.ok());
  ASSERT_EVENTUALLY(cluster_->State(*bad) == v1::FAILED, 10'000);
  auto job = cluster_->Job(*bad);
  EXPECT_EQ(job->reason(), "JobLaunchFailure");
  EXPECT_NE(job->reason_detail().find("cannot open output file /nonexistent/dir/out"),
            std::string::npos)
      << job->reason_detail();
}

TEST_F(ClusterTest, CancelKillsTheWholeProcessTree) {
  auto id = cluster_->Submit("#!/bin/sh\nsleep 60 &\necho $! > " + jobs_ + "child.pid\necho $$ > " +
                                 jobs_ + "batch.pid\nwait\n",
                             Gang(1, 1));
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(!Read(jobs_ + "child.pid").empty() && !Read(jobs_ + "batch.pid").empty(),
                    10'000);
  auto c = cluster_->Client();
  v1::CancelJobRequest r;
  r.add_job_ids(*id);
  auto resp = c->CancelJob(r);
  ASSERT_TRUE(resp.ok());
  ASSERT_EQ(resp->results(0).code(), 0);
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::CANCELLED, 10'000);
  ASSERT_EVENTUALLY(!cluster_->Job(*id)->completing(), 10'000);
  EXPECT_TRUE(ProcessGone(jobs_ + "batch.pid"));
  EXPECT_TRUE(ProcessGone(jobs_ + "child.pid"));
  EXPECT_EQ(cluster_->Job(*id)->exit_signal(), SIGTERM);
}

TEST_F(ClusterTest, DrainBlocksPlacementUntilResumed) {
  auto c = cluster_->Client();
  ASSERT_TRUE(c.ok());
  v1::UpdateNodeRequest drain;
  drain.set_nodes("node[1-3]");
  drain.set_action(v1::UpdateNodeRequest::DRAIN);
  drain.set_reason("test");
  ASSERT_TRUE(c->UpdateNode(drain).ok());
  auto id = cluster_->Submit("#!/bin/sh\ntrue\n", Gang(2, 8));
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster_->Job(*id)->reason() == "ReqNodeNotAvail", 5'000);
  EXPECT_EQ(cluster_->State(*id), v1::PENDING);
  v1::UpdateNodeRequest resume;
  resume.set_nodes("node1");
  resume.set_action(v1::UpdateNodeRequest::RESUME);
  ASSERT_TRUE(c->UpdateNode(resume).ok());
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::COMPLETED, 10'000);
  auto job = cluster_->Job(*id);
  EXPECT_EQ(std::set<std::string>(job->nodes().begin(), job->nodes().end()),
            (std::set<std::string>{"node1", "node4"}));
}

}  // namespace
}  // namespace muster::testing
