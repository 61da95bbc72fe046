// A step request is checked against its credential (a grant the controller sealed for this node)
// and against what the controller granted the job on this node.
#include "step_grant.h"

#include <gtest/gtest.h>

#include "muster/credentials/step_credential.h"

namespace muster::agent {
namespace {

v1::LaunchJob Job() {
  v1::LaunchJob l;
  l.set_job_id(7);
  v1::NodeAllocation* n = l.mutable_allocation()->add_nodes();
  n->set_node("node1");
  for (uint32_t c : {0, 1, 2, 3}) n->add_cpu_ids(c);
  for (uint32_t g : {2, 3}) n->add_gpu_indices(g);
  return l;
}

v1::StepLaunchRequest Step(uint32_t ntasks) {
  v1::StepLaunchRequest r;
  r.set_job_id(7);
  r.set_ntasks(ntasks);
  r.set_total_tasks(ntasks);
  r.set_total_nodes(1);
  r.set_cpus_per_task(1);
  return r;
}

TEST(StepGrantTest, WithinTheGrantIsLaunched) {
  v1::StepLaunchRequest r = Step(4);
  r.set_gpus_given(true);
  r.add_gpu_indices(3);
  r.add_cpu_ids(1);
  EXPECT_TRUE(CheckStepWithinGrant(r, Job(), "node1").ok());
  r = Step(2);
  r.set_cpus_per_task(2);
  EXPECT_TRUE(CheckStepWithinGrant(r, Job(), "node1").ok());
}

TEST(StepGrantTest, MoreThanTheGrantIsRefused) {
  Status st = CheckStepWithinGrant(Step(100'000), Job(), "node1");
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("more than the job's 4 CPU(s)"), std::string::npos) << st.message();
  v1::StepLaunchRequest r = Step(3);
  r.set_cpus_per_task(2);
  EXPECT_EQ(CheckStepWithinGrant(r, Job(), "node1").code(), StatusCode::kPermissionDenied);
  r = Step(1);
  r.add_gpu_indices(0);  // another job's GPU
  st = CheckStepWithinGrant(r, Job(), "node1");
  EXPECT_NE(st.message().find("GPU 0 on node1 is not the job's"), std::string::npos)
      << st.message();
  r = Step(1);
  r.add_cpu_ids(9);
  EXPECT_EQ(CheckStepWithinGrant(r, Job(), "node1").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(CheckStepWithinGrant(Step(1), Job(), "node2").code(), StatusCode::kPermissionDenied);
  r = Step(2);
  r.set_first_task(4'294'967'295u);  // wraps past the total
  EXPECT_EQ(CheckStepWithinGrant(r, Job(), "node1").code(), StatusCode::kInvalidArgument);
}

TEST(StepGrantTest, ListedTaskIdsAreOnePerTaskAscendingAndInTheStep) {
  auto listed = [](std::vector<uint32_t> ids, uint32_t ntasks = 2) {
    v1::StepLaunchRequest r = Step(ntasks);
    r.set_total_tasks(5);
    r.set_first_task(ids.empty() ? 0 : ids[0]);
    for (uint32_t id : ids) r.add_task_ids(id);
    return CheckStepWithinGrant(r, Job(), "node1");
  };
  EXPECT_TRUE(listed({1, 3}).ok());
  EXPECT_TRUE(listed({0, 2, 4}, 3).ok());
  for (auto bad : {std::vector<uint32_t>{1}, {1, 3, 4}, {3, 1}, {1, 1}, {1, 5}}) {
    Status st = listed(bad);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad.size();
    EXPECT_NE(st.message().find("task ids on node1 do not add up"), std::string::npos)
        << st.message();
  }
  v1::StepLaunchRequest r = Step(2);
  r.set_total_tasks(5);
  r.set_first_task(0);  // not its first id
  r.add_task_ids(1);
  r.add_task_ids(3);
  EXPECT_EQ(CheckStepWithinGrant(r, Job(), "node1").code(), StatusCode::kInvalidArgument);
}

namespace credential_tests {

constexpr int64_t kNow = 1'700'000'000'000;
const std::string kSecret(32, 's');

v1::LaunchJob RunningJob() {
  v1::LaunchJob l = Job();
  l.set_requeue_count(2);
  l.mutable_spec()->set_uid(1000);
  return l;
}

// What the controller grants step 5 on node1, and the request that srun sends with it.
v1::StepGrant Grant() {
  v1::StepGrant g;
  g.set_job_id(7);
  g.set_step_id(5);
  g.set_run(2);
  g.set_uid(1000);
  g.set_node("node1");
  g.set_ntasks(2);
  g.set_total_tasks(2);
  g.set_total_nodes(1);
  g.set_cpus_per_task(1);
  g.add_cpu_ids(0);
  g.add_cpu_ids(1);
  g.set_expires_ms(kNow + 120'000);
  g.set_agent_instance("agent-1");
  return g;
}

v1::StepLaunchRequest RequestFor(const v1::StepGrant& g, const std::string& sealed_for = "node1") {
  v1::StepLaunchRequest r = Step(g.ntasks());
  r.set_step_id(g.step_id());
  r.set_run(g.run());
  *r.mutable_cpu_ids() = g.cpu_ids();
  r.set_credential(credentials::SealStepGrant(credentials::NodeStepKey(kSecret, sealed_for), g));
  return r;
}

Status Check(const v1::StepLaunchRequest& r, int64_t now = kNow,
             std::string_view instance = "agent-1") {
  return CheckStepCredential(r, RunningJob(), "node1", credentials::NodeStepKey(kSecret, "node1"),
                             now, instance)
      .status();
}

TEST(StepCredentialTest, TheControllersGrantForThisNodeIsAccepted) {
  EXPECT_TRUE(Check(RequestFor(Grant())).ok()) << Check(RequestFor(Grant())).ToString();
  EXPECT_TRUE(Check(RequestFor(Grant()), kNow + 120'000).ok()) << "good until it expires";
}

TEST(StepCredentialTest, ForgedOrForeignCredentialsAreRefused) {
  v1::StepLaunchRequest r = RequestFor(Grant());
  r.set_credential("the job's old shared secret");
  EXPECT_EQ(Check(r).code(), StatusCode::kPermissionDenied);
  // Sealed for node2 (a user holding node2's credential, or node2's agent forging one).
  Status st = Check(RequestFor(Grant(), "node2"));
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("not sealed for this node"), std::string::npos) << st.message();
  // node2's grant sealed with node1's key still names node2.
  v1::StepGrant g = Grant();
  g.set_node("node2");
  EXPECT_NE(Check(RequestFor(g)).message().find("is for node node2"), std::string::npos);
  // A grant changed after sealing: more CPUs than the controller gave.
  r = RequestFor(Grant());
  v1::SealedStepGrant sealed;
  ASSERT_TRUE(sealed.ParseFromString(r.credential()));
  g = Grant();
  g.add_cpu_ids(2);
  g.SerializeToString(sealed.mutable_grant());
  r.set_credential(sealed.SerializeAsString());
  r.add_cpu_ids(2);
  EXPECT_EQ(Check(r).code(), StatusCode::kPermissionDenied);
  // Before the node has registered it has no key to check with.
  EXPECT_EQ(CheckStepCredential(RequestFor(Grant()), RunningJob(), "node1", "", kNow, "agent-1")
                .status()
                .code(),
            StatusCode::kUnavailable);
}

// The agent remembers which grants started a step only while it runs: a grant made for an
// earlier start of it (before a restart) could otherwise be used a second time.
TEST(StepCredentialTest, AGrantForAnEarlierStartOfTheAgentIsRefused) {
  EXPECT_TRUE(Check(RequestFor(Grant()), kNow, "agent-1").ok());
  Status st = Check(RequestFor(Grant()), kNow, "agent-2");
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("earlier start of this node's agent"), std::string::npos)
      << st.message();
}

TEST(StepCredentialTest, AGrantIsBoundToItsJobStepUserRunAndTime) {
  auto refused = [](const v1::StepGrant& g, const std::string& why) {
    Status st = Check(RequestFor(g));
    EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << why;
    return st.message();
  };
  v1::StepGrant g = Grant();
  g.set_job_id(8);
  refused(g, "another job");
  g = Grant();
  g.set_uid(0);
  EXPECT_NE(refused(g, "root").find("names another user"), std::string::npos);
  g = Grant();
  g.set_run(1);
  EXPECT_NE(refused(g, "an earlier run").find("earlier run"), std::string::npos);
  // Another step's grant, shown with this step's id.
  v1::StepLaunchRequest r = RequestFor(Grant());
  r.set_step_id(6);
  EXPECT_EQ(Check(r).code(), StatusCode::kPermissionDenied);
  Status st = Check(RequestFor(Grant()), kNow + 120'001);
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("expired"), std::string::npos) << st.message();
}

TEST(StepCredentialTest, TheRequestMustAskForWhatTheGrantSays) {
  v1::StepLaunchRequest r = RequestFor(Grant());
  r.add_cpu_ids(2);
  EXPECT_EQ(Check(r).code(), StatusCode::kPermissionDenied);
  r = RequestFor(Grant());
  r.set_ntasks(1);
  EXPECT_EQ(Check(r).code(), StatusCode::kPermissionDenied);
  r = RequestFor(Grant());
  r.set_gpus_given(true);
  r.add_gpu_indices(2);
  EXPECT_NE(Check(r).message().find("other tasks, CPUs or GPUs"), std::string::npos);
}

// -m cyclic: the grant names the node's task ids; a launch must name the same ones (a user
// cannot run rank 0 on every node, or renumber the tasks the grant gave this node).
TEST(StepCredentialTest, ListedTaskIdsMustBeTheGrants) {
  v1::StepGrant g = Grant();
  g.set_total_tasks(5);
  g.set_first_task(1);
  g.add_task_ids(1);
  g.add_task_ids(3);
  v1::StepLaunchRequest r = RequestFor(g);
  r.set_total_tasks(5);
  r.set_first_task(1);
  r.add_task_ids(1);
  r.add_task_ids(3);
  EXPECT_TRUE(Check(r).ok()) << Check(r).ToString();
  v1::StepLaunchRequest other = r;
  other.set_task_ids(1, 4);
  Status st = Check(other);
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("other tasks, CPUs or GPUs"), std::string::npos) << st.message();
  other = r;
  other.clear_task_ids();  // as a block: tasks 1 and 2
  EXPECT_EQ(Check(other).code(), StatusCode::kPermissionDenied);
  // A block grant (no ids) does not let a launch list some.
  v1::StepLaunchRequest listed = RequestFor(Grant());
  listed.add_task_ids(0);
  listed.add_task_ids(1);
  EXPECT_EQ(Check(listed).code(), StatusCode::kPermissionDenied);
}

}  // namespace credential_tests

}  // namespace
}  // namespace muster::agent

namespace muster::agent {
namespace {

TEST(StepGrantTest, AnOvercommittedJobStartsMoreTasksThanItHasCpus) {
  v1::LaunchJob job = Job();  // 4 CPUs on node1
  EXPECT_EQ(CheckStepWithinGrant(Step(8), job, "node1").code(), StatusCode::kPermissionDenied);
  job.mutable_spec()->set_overcommit(true);
  EXPECT_TRUE(CheckStepWithinGrant(Step(8), job, "node1").ok());
  v1::StepLaunchRequest r = Step(8);
  r.set_cpus_per_task(5);  // one task's CPUs must still be there
  EXPECT_EQ(CheckStepWithinGrant(r, job, "node1").code(), StatusCode::kPermissionDenied);
  Status st = CheckStepWithinGrant(Step(513), job, "node1");
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("at most 512"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace muster::agent
