// A step request is checked against what the controller granted the job on this node.
#include "step_grant.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace muster::agent
