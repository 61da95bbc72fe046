// scontrol reconfigure against the real daemons: the controller reads its file again while a job
// runs; the agents register again under the new epoch and the job runs on to its end; what the
// new file adds is usable at once; a file it cannot take changes nothing.
#include <fstream>

#include "harness/cluster_test.h"

namespace muster::testing {
namespace {

void Append(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::app) << text;
}

TEST_F(ClusterTest, ReconfigureAddsAPartitionWhileAJobRunsOnAndRefusesWhatItCannotTake) {
  auto running = cluster_->Submit(
      "#!/bin/sh\nwhile [ ! -e " + jobs_ + "go ]; do sleep 0.05; done\necho finished\n",
      Gang(1, 8));
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  ASSERT_EVENTUALLY(cluster_->State(*running) == v1::RUNNING, 10'000);
  auto c = cluster_->Client();
  ASSERT_TRUE(c.ok());
  auto before = c->ControllerInfo();
  ASSERT_TRUE(before.ok());

  const std::string original = Read(cluster_->config_path());
  Append(cluster_->config_path(), "[[partition]]\nname = \"debug\"\nnodes = \"node[3-4]\"\n");
  // And a node with its own partition: its agent (proving itself with a key of its own) may
  // register once the controller has read the file.
  Append(cluster_->config_path(),
         "[[nodes]]\nnames = \"node5\"\ncpus = 16\nmemory_mb = 64000\ngpus = 8\n"
         "gpu_type = \"h100\"\n[[partition]]\nname = \"fifth\"\nnodes = \"node5\"\n");
  auto r = c->Reconfigure();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->source(), cluster_->config_path());
  EXPECT_GT(r->epoch(), before->epoch());
  ASSERT_EQ(r->changes_size(), 3) << r->DebugString();
  EXPECT_EQ(r->changes(0), "node node5 added");
  EXPECT_EQ(r->changes(1), "partition debug added");
  EXPECT_EQ(r->changes(2), "partition fifth added");
  EXPECT_EQ(r->restart_only_size(), 0);

  // Every agent registers again (under the new epoch) and reports the job, which runs on; the
  // new node's agent registers too.
  ASSERT_TRUE(cluster_->AddAgent(4).ok());
  ASSERT_TRUE(cluster_->WaitForNodesUp(10'000).ok());
  v1::JobSpec fifth = Gang(1, 8);
  fifth.add_partitions("fifth");
  auto on_fifth = cluster_->Submit("#!/bin/sh\ntrue\n", fifth);
  ASSERT_TRUE(on_fifth.ok()) << on_fifth.status().ToString();
  ASSERT_EVENTUALLY(cluster_->State(*on_fifth) == v1::COMPLETED, 10'000);
  EXPECT_EQ(cluster_->Job(*on_fifth)->nodes(0), "node5");
  auto node3 = cluster_->Node("node3");
  ASSERT_TRUE(node3.ok());
  EXPECT_NE(std::find(node3->partitions().begin(), node3->partitions().end(), "debug"),
            node3->partitions().end());
  EXPECT_EQ(cluster_->State(*running), v1::RUNNING);
  v1::JobSpec debug = Gang(1, 1);
  debug.add_partitions("debug");
  auto in_debug = cluster_->Submit("#!/bin/sh\nhostname >/dev/null\n", debug);
  ASSERT_TRUE(in_debug.ok()) << in_debug.status().ToString();
  ASSERT_EVENTUALLY(cluster_->State(*in_debug) == v1::COMPLETED, 10'000);
  const std::string ran_on = cluster_->Job(*in_debug)->nodes(0);
  EXPECT_TRUE(ran_on == "node3" || ran_on == "node4") << ran_on;
  std::ofstream(jobs_ + "go") << "";
  ASSERT_EVENTUALLY(cluster_->State(*running) == v1::COMPLETED, 10'000);
  EXPECT_EQ(cluster_->Job(*running)->requeue_count(), 0u);
  EXPECT_EQ(Read(jobs_ + "slurm-" + std::to_string(*running) + ".out"), "finished\n");

  // A file that does not parse: refused with where, and nothing changes.
  const uint64_t epoch = r->epoch();
  Append(cluster_->config_path(), "[[partition]\n");
  auto bad = c->Reconfigure();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find(cluster_->config_path() + ":"), std::string::npos)
      << bad.status().message();
  auto info = c->ControllerInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->epoch(), epoch);

  // Back to the original file while a job waits in debug: refused, naming the partition and
  // the job; once it is gone, the same file is taken.
  v1::JobSpec held = debug;
  held.set_hold(true);
  auto waiting = cluster_->Submit("#!/bin/sh\ntrue\n", held);
  ASSERT_TRUE(waiting.ok());
  std::ofstream(cluster_->config_path(), std::ios::trunc) << original;
  auto refused = c->Reconfigure();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("partition debug is removed but job " +
                                            std::to_string(*waiting) + " needs it"),
            std::string::npos)
      << refused.status().message();
  v1::CancelJobRequest cancel;
  cancel.add_job_ids(*waiting);
  ASSERT_TRUE(c->CancelJob(cancel).ok());
  ASSERT_EVENTUALLY(cluster_->State(*waiting) == v1::CANCELLED, 5'000);
  auto back = c->Reconfigure();
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->changes_size(), 3) << back->DebugString();
  EXPECT_EQ(back->changes(0), "node node5 removed");
  EXPECT_EQ(back->changes(1), "partition debug removed");
  EXPECT_EQ(back->changes(2), "partition fifth removed");
  cluster_->StopAgent(4);
  ASSERT_TRUE(cluster_->WaitForNodesUp(10'000).ok());
}

}  // namespace
}  // namespace muster::testing
