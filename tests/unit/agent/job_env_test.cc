// What a job's processes see: the SLURM_* and MUSTER_* environment, GPUs by index and UUID.
#include "job_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace muster::agent {
namespace {

std::map<std::string, std::string> EnvMap(const std::vector<std::string>& env) {
  std::map<std::string, std::string> m;
  for (const auto& kv : env) {
    size_t eq = kv.find('=');
    m[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return m;
}

v1::LaunchJob TwoNodeLaunch() {
  v1::LaunchJob l;
  l.set_job_id(42);
  l.set_cluster_name("local");
  auto* s = l.mutable_spec();
  s->set_name("train");
  s->set_user("alice");
  s->set_account("physics");
  s->set_reservation("team");
  s->set_uid(1000);
  s->set_ntasks(4);
  s->set_gpus_per_node(8);
  s->set_work_dir("/home/alice");
  s->set_submit_dir("/home/alice/src");
  s->add_environment("HOME=/home/alice");
  s->add_environment("CUDA_VISIBLE_DEVICES=9");  // the submitter's own: must be overridden
  auto* a = l.mutable_allocation();
  a->set_partition("gpu");
  for (const char* n : {"node1", "node2"}) {
    auto* na = a->add_nodes();
    na->set_node(n);
    na->set_ntasks(2);
    for (uint32_t c = 0; c < 2; ++c) na->add_cpu_ids(c);
    for (uint32_t g = 0; g < 8; ++g) na->add_gpu_indices(g);
  }
  return l;
}

TEST(JobEnvTest, BatchEnvironmentHasSlurmAndMusterVariables) {
  v1::LaunchJob l = TwoNodeLaunch();
  auto env = EnvMap(BuildBatchEnv(l, "node1", "/etc/muster/muster.toml", GpuList(l)));
  EXPECT_EQ(env["HOME"], "/home/alice");
  EXPECT_EQ(env["SLURM_JOB_ID"], "42");
  EXPECT_EQ(env["SLURM_JOBID"], "42");
  EXPECT_EQ(env["MUSTER_JOB_ID"], "42");
  EXPECT_EQ(env["SLURM_JOB_NAME"], "train");
  EXPECT_EQ(env["SLURM_JOB_NODELIST"], "node[1-2]");
  EXPECT_EQ(env["SLURM_NODELIST"], "node[1-2]");
  EXPECT_EQ(env["SLURM_JOB_NUM_NODES"], "2");
  EXPECT_EQ(env["SLURM_NNODES"], "2");
  EXPECT_EQ(env["SLURM_NTASKS"], "4");
  EXPECT_EQ(env["SLURM_TASKS_PER_NODE"], "2(x2)");
  EXPECT_EQ(env["SLURM_JOB_CPUS_PER_NODE"], "2(x2)");
  EXPECT_EQ(env["SLURM_NODEID"], "0");
  EXPECT_EQ(env["SLURM_PROCID"], "0");
  EXPECT_EQ(env["SLURM_LOCALID"], "0");
  EXPECT_EQ(env["SLURM_SUBMIT_DIR"], "/home/alice/src");
  EXPECT_EQ(env["SLURM_JOB_PARTITION"], "gpu");
  EXPECT_EQ(env["SLURM_JOB_ACCOUNT"], "physics");
  EXPECT_EQ(env["MUSTER_JOB_ACCOUNT"], "physics");
  EXPECT_EQ(env["SLURM_JOB_RESERVATION"], "team");
  EXPECT_EQ(env["SLURM_GPUS_ON_NODE"], "8");
  EXPECT_EQ(env["SLURM_JOB_GPUS"], "0,1,2,3,4,5,6,7");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "0,1,2,3,4,5,6,7");
  EXPECT_EQ(env["GPU_DEVICE_ORDINAL"], "0,1,2,3,4,5,6,7");
  EXPECT_EQ(env["SLURMD_NODENAME"], "node1");
  EXPECT_EQ(env["SLURM_CLUSTER_NAME"], "local");
  EXPECT_EQ(env["MUSTER_CONF"], "/etc/muster/muster.toml");
  EXPECT_EQ(env["SLURM_TOPOLOGY_ADDR"], "node1");
  EXPECT_EQ(env["SLURM_TOPOLOGY_ADDR_PATTERN"], "node");
  EXPECT_EQ(env["SLURM_NODE_ALIASES"], "(null)");
  EXPECT_EQ(env.count("SLURM_ARRAY_JOB_ID"), 0u);
  // Under switches, and as a job array's task.
  l.set_topology("spine1/leaf3");
  l.mutable_array()->set_array_job_id(40);
  l.mutable_array()->set_task_id(2);
  l.mutable_array()->set_count(3);
  l.mutable_array()->set_min(0);
  l.mutable_array()->set_max(4);
  l.mutable_array()->set_step(2);
  l.mutable_spec()->set_ntasks_per_node(2);
  env = EnvMap(BuildBatchEnv(l, "node1", "", GpuList(l)));
  EXPECT_EQ(env["SLURM_TOPOLOGY_ADDR"], "spine1.leaf3.node1");
  EXPECT_EQ(env["SLURM_TOPOLOGY_ADDR_PATTERN"], "switch.switch.node");
  EXPECT_EQ(env["SLURM_ARRAY_JOB_ID"], "40");
  EXPECT_EQ(env["SLURM_ARRAY_TASK_ID"], "2");
  EXPECT_EQ(env["SLURM_ARRAY_TASK_COUNT"], "3");
  EXPECT_EQ(env["SLURM_ARRAY_TASK_MIN"], "0");
  EXPECT_EQ(env["SLURM_ARRAY_TASK_MAX"], "4");
  EXPECT_EQ(env["SLURM_ARRAY_TASK_STEP"], "2");
  EXPECT_EQ(env["SLURM_NTASKS_PER_NODE"], "2");
}

TEST(JobEnvTest, TaskEnvironmentIsPerTask) {
  v1::LaunchJob l = TwoNodeLaunch();
  l.set_node_id(1);
  v1::StepLaunchRequest step;
  step.set_step_id(3);
  step.set_node_id(1);
  step.set_first_task(2);
  step.set_ntasks(2);
  step.set_total_tasks(4);
  step.set_total_nodes(2);
  step.set_step_nodelist("node[1-2]");
  step.set_tasks_per_node("2(x2)");
  step.add_environment("SLURM_PROCID=0");  // inherited from the batch script: replaced
  auto env = EnvMap(BuildTaskEnv(l, "node2", "", GpuList(l), step, 1));
  EXPECT_EQ(env["SLURM_PROCID"], "3");
  EXPECT_EQ(env["SLURM_LOCALID"], "1");
  EXPECT_EQ(env["SLURM_NODEID"], "1");
  EXPECT_EQ(env["SLURM_STEP_ID"], "3");
  EXPECT_EQ(env["SLURM_GTIDS"], "2,3");
  EXPECT_EQ(env["SLURMD_NODENAME"], "node2");
  EXPECT_EQ(env["MUSTER_PROCID"], "3");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "0,1,2,3,4,5,6,7");
}

// -m cyclic: the launch lists the node's task ids; SLURM_PROCID and SLURM_GTIDS are those,
// SLURM_LOCALID stays the task's place on the node, and SLURM_DISTRIBUTION is what srun named.
TEST(JobEnvTest, ListedTaskIdsAreTheTasksIds) {
  v1::LaunchJob l = TwoNodeLaunch();
  l.set_node_id(1);
  v1::StepLaunchRequest step;
  step.set_node_id(1);
  step.set_first_task(1);
  step.set_ntasks(2);
  step.set_total_tasks(4);
  step.set_total_nodes(2);
  step.add_task_ids(1);
  step.add_task_ids(3);
  auto env = EnvMap(BuildTaskEnv(l, "node2", "", GpuList(l), step, 1));
  EXPECT_EQ(env["SLURM_PROCID"], "3");
  EXPECT_EQ(env["SLURM_LOCALID"], "1");
  EXPECT_EQ(env["SLURM_GTIDS"], "1,3");
  EXPECT_EQ(env["SLURM_DISTRIBUTION"], "block") << "srun named none";
  step.add_environment("SLURM_DISTRIBUTION=cyclic");
  env = EnvMap(BuildTaskEnv(l, "node2", "", GpuList(l), step, 0));
  EXPECT_EQ(env["SLURM_PROCID"], "1");
  EXPECT_EQ(env["SLURM_DISTRIBUTION"], "cyclic");
  EXPECT_EQ(env["MUSTER_DISTRIBUTION"], "cyclic");
  EXPECT_EQ(TaskIdOf(step, 1), 3u);
  step.clear_task_ids();
  EXPECT_EQ(TaskIdOf(step, 1), 2u) << "no list: first_task + local id";
}

TEST(JobEnvTest, ShardsShowTheirGpusAndMigSlicesTheirUuids) {
  v1::LaunchJob l = TwoNodeLaunch();
  for (auto& na : *l.mutable_allocation()->mutable_nodes()) {
    na.clear_gpu_indices();
    auto* g = na.add_gres();
    g->set_name("shard");
    for (uint32_t u : {12u, 13u, 20u}) g->add_units(u);
    for (uint32_t gpu : {3u, 3u, 5u}) g->add_on_gpu(gpu);
  }
  google::protobuf::RepeatedPtrField<v1::GpuDevice> gpus;
  auto visible = VisibleDevices(l, gpus);
  ASSERT_TRUE(visible.ok());
  EXPECT_EQ(*visible, "3,5");
  auto env = EnvMap(BuildBatchEnv(l, "node1", "", *visible));
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "3,5");
  EXPECT_EQ(env["NVIDIA_VISIBLE_DEVICES"], "3,5");
  EXPECT_EQ(env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");
  EXPECT_EQ(env["SLURM_SHARDS_ON_NODE"], "3");
  // MIG slices: unit u of a profile is that profile's u-th instance in GPU order, by UUID. The
  // node of the GH200 capture: two GPUs with seven 1g.12gb instances each.
  l = TwoNodeLaunch();
  auto* me = l.mutable_allocation()->mutable_nodes(0);
  me->clear_gpu_indices();
  auto* mig = me->add_gres();
  mig->set_name("gpu");
  mig->set_type("1g.12gb");
  for (uint32_t u : {6u, 7u}) mig->add_units(u);
  for (uint32_t g = 0; g < 2; ++g) {
    v1::GpuDevice* d = gpus.Add();
    d->set_index(g);
    d->set_mig_enabled(true);
    for (uint32_t m = 0; m < 7; ++m) {
      v1::MigDevice* md = d->add_mig_devices();
      md->set_index(m);
      md->set_profile("1g.12gb");
      md->set_uuid("MIG-" + std::to_string(g) + "-" + std::to_string(m));
    }
  }
  visible = VisibleDevices(l, gpus);
  ASSERT_TRUE(visible.ok()) << visible.status().ToString();
  EXPECT_EQ(*visible, "MIG-0-6,MIG-1-0");
  env = EnvMap(BuildBatchEnv(l, "node1", "", *visible));
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "MIG-0-6,MIG-1-0");
  EXPECT_EQ(env["SLURM_GPUS_ON_NODE"], "2");
  mig->add_units(14);
  visible = VisibleDevices(l, gpus);
  ASSERT_FALSE(visible.ok());
  EXPECT_NE(visible.status().message().find("has 14 such instances"), std::string::npos)
      << visible.status().message();
}

// -B, --ntasks-per-core and --ntasks-per-socket reach the job (and its srun) as Slurm's
// variables, only when given; --hint=nomultithread's task per core is not one of them.
TEST(JobEnvTest, CpuShapeVariablesOnlyWhenGiven) {
  v1::LaunchJob l = TwoNodeLaunch();
  auto env = EnvMap(BuildBatchEnv(l, "node1", "", GpuList(l)));
  for (const char* k :
       {"SLURM_NTASKS_PER_CORE", "SLURM_NTASKS_PER_SOCKET", "SLURM_THREADS_PER_CORE"}) {
    EXPECT_EQ(env.count(k), 0u) << k;
  }
  v1::CpuShape* shape = l.mutable_spec()->mutable_cpu_shape();
  shape->set_hint("nomultithread");
  env = EnvMap(BuildBatchEnv(l, "node1", "", GpuList(l)));
  EXPECT_EQ(env.count("SLURM_NTASKS_PER_CORE"), 0u);
  shape->clear_hint();
  shape->set_ntasks_per_core(2);
  shape->set_ntasks_per_socket(8);
  shape->set_threads_per_core(1);
  env = EnvMap(BuildTaskEnv(l, "node1", "", GpuList(l), v1::StepLaunchRequest(), 0, ""));
  EXPECT_EQ(env["SLURM_NTASKS_PER_CORE"], "2");
  EXPECT_EQ(env["MUSTER_NTASKS_PER_CORE"], "2");
  EXPECT_EQ(env["SLURM_NTASKS_PER_SOCKET"], "8");
  EXPECT_EQ(env["SLURM_THREADS_PER_CORE"], "1");
}

// --gpus-per-socket reaches the job (and its tasks) as SLURM_GPUS_PER_SOCKET, only when given.
TEST(JobEnvTest, GpusPerSocketOnlyWhenGiven) {
  v1::LaunchJob l = TwoNodeLaunch();
  auto env = EnvMap(BuildBatchEnv(l, "node1", "", GpuList(l)));
  EXPECT_EQ(env.count("SLURM_GPUS_PER_SOCKET"), 0u);
  l.mutable_spec()->set_gpus_per_socket(2);
  env = EnvMap(BuildBatchEnv(l, "node1", "", GpuList(l)));
  EXPECT_EQ(env["SLURM_GPUS_PER_SOCKET"], "2");
  env = EnvMap(BuildTaskEnv(l, "node1", "", GpuList(l), v1::StepLaunchRequest(), 0, ""));
  EXPECT_EQ(env["SLURM_GPUS_PER_SOCKET"], "2");
}

TEST(JobEnvTest, JobWithoutGpusSeesNone) {
  v1::LaunchJob l = TwoNodeLaunch();
  for (auto& na : *l.mutable_allocation()->mutable_nodes()) na.clear_gpu_indices();
  auto env = EnvMap(BuildBatchEnv(l, "node1", "", GpuList(l)));
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "");
  EXPECT_EQ(env["NVIDIA_VISIBLE_DEVICES"], "void");
  EXPECT_EQ(env.count("SLURM_JOB_GPUS"), 0u);
}

// srun --task-prolog: what the prolog prints shapes the task, as Slurm's TaskProlog does.
TEST(JobEnvTest, ATaskPrologsExportUnsetAndPrintLinesShapeTheTask) {
  std::vector<std::string> env = {"KEEP=1", "GONE=2", "CHANGED=old", "CHANGED=dup"};
  auto printed = ApplyTaskPrologOutput(
      "export CHANGED=new=value with spaces\n"
      "export ADDED=yes\n"
      "unset GONE\n"
      "print hello from the prolog\n"
      "export =nameless\n"
      "export 1BAD=x\n"
      "unset\n"
      "something else\n"
      "print  two spaces\r\n",
      &env);
  EXPECT_EQ(env,
            (std::vector<std::string>{"KEEP=1", "CHANGED=new=value with spaces", "ADDED=yes"}));
  EXPECT_EQ(printed, (std::vector<std::string>{"hello from the prolog", " two spaces"}));
}

TEST(JobEnvTest, SetEnvVarReplacesInPlace) {
  std::vector<std::string> env = {"A=1", "B=2", "A=3"};
  SetEnvVar(env, "A", "x");
  SetEnvVar(env, "C", "y");
  EXPECT_EQ(env, (std::vector<std::string>{"A=x", "B=2", "C=y"}));
}

TEST(JobEnvTest, SetEnvVarKeepsTheFirstAndDropsEveryRepeat) {
  std::vector<std::string> env = {"AB=0", "A=1", "A=2", "B=2", "A=3", "A"};
  SetEnvVar(env, "A", "x");
  EXPECT_EQ(env, (std::vector<std::string>{"AB=0", "A=x", "B=2", "A"}));
  SetEnvVar(env, "B", "");
  EXPECT_EQ(env, (std::vector<std::string>{"AB=0", "A=x", "B=", "A"}));
}

}  // namespace
}  // namespace muster::agent

namespace muster::agent {
namespace {

TEST(JobEnvTest, LoginEnvironmentIsUnderTheSubmittedOneAndOvercommitIsShown) {
  v1::LaunchJob l = TwoNodeLaunch();
  l.mutable_spec()->clear_environment();
  l.mutable_spec()->add_environment("FOO=submitted");
  l.mutable_spec()->set_overcommit(true);
  l.mutable_spec()->mutable_get_user_env();
  const std::vector<std::string> login = {"FOO=login", "FROM_PROFILE=yes", "PATH=/login/bin"};
  auto env = EnvMap(BuildBatchEnv(l, "node1", "", GpuList(l), &login));
  EXPECT_EQ(env["FOO"], "submitted") << "the submission's environment wins";
  EXPECT_EQ(env["FROM_PROFILE"], "yes");
  EXPECT_EQ(env["PATH"], "/login/bin");
  EXPECT_EQ(env["SLURM_OVERCOMMIT"], "1");
  EXPECT_EQ(env["SLURM_GET_USER_ENV"], "1");
  env = EnvMap(BuildBatchEnv(TwoNodeLaunch(), "node1", "", GpuList(l)));
  EXPECT_FALSE(env.count("SLURM_OVERCOMMIT"));
}

}  // namespace
}  // namespace muster::agent
