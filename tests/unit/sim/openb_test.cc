// The Alibaba openb readers: the pod list as a trace, the node list as a cluster.
#include "muster/sim/openb.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace muster::sim {
namespace {

bool HasNote(const Trace& t, const std::string& text) {
  return std::any_of(t.notes.begin(), t.notes.end(),
                     [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

constexpr const char* kPods =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"                                                    // line 1
    "openb-pod-0000,12000,16384,1,1000,,LS,Running,100,5000,100\n"                      // 2
    "openb-pod-0001,6500,12288,1,460,V100M16|V100M32|V100M32,BE,Succeeded,50,400,80\n"  // 3
    "openb-pod-0002,4000,8192,1,1000,,BE,Pending,200,300,\n"                            // 4
    "openb-pod-0003,4000,8192,0,0,,Burstable,Failed,210,,220\n"                         // 5
    "openb-pod-0004,4000,8192,0,0,,LS,Failed,230,240,240\n"                             // 6
    "openb-pod-0005,4000,8192,2,1000,T4,LS,Running,240,9000,250\n"                      // 7
    "openb-pod-0006,4000,8192,x,1000,,LS,Running,240,900,250\n"                         // 8
    "openb-pod-0007,4000,8192,1,1000,,LS,Running,240\n"                                 // 9
    "mypod,500,0,0,0,,Guaranteed,Succeeded,60,70,61\n";                                 // 10

TEST(OpenbTest, MapsEveryPodFieldAndSortsByCreation) {
  auto t = ReadOpenbPods(kPods);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->format, "openb");
  ASSERT_EQ(t->jobs.size(), 4u);
  const int64_t ids[] = {1, 8, 0, 5};  // "mypod" has no number: its row (from 0)
  const int64_t submits[] = {0, 10, 50, 190};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(t->jobs[i].trace_id, ids[i]) << i;
    EXPECT_EQ(t->jobs[i].submit_s, submits[i]) << i;
    EXPECT_EQ(t->jobs[i].nodes, 1u) << "a pod runs on one node";
    EXPECT_EQ(t->jobs[i].user, "openb");
    EXPECT_EQ(t->jobs[i].req_time_s, t->jobs[i].run_s) << "perfect estimates";
  }
  const SimJob& shared = t->jobs[0];
  EXPECT_EQ(shared.run_s, 320) << "deletion - scheduled";
  EXPECT_EQ(shared.traced_wait_s, 30) << "scheduled - creation";
  EXPECT_EQ(shared.procs, 7u) << "6500 milli-CPUs round up";
  EXPECT_EQ(shared.mem_mb, 12288u);
  EXPECT_EQ(shared.gpus, 1u) << "a shared GPU is replayed whole";
  EXPECT_EQ(shared.gpu_types, (std::vector<std::string>{"v100m16", "v100m32"}))
      << "lowercased, each model once, in order";
  EXPECT_EQ(shared.account, "BE");

  const SimJob& cpu_only = t->jobs[1];
  EXPECT_EQ(cpu_only.procs, 1u) << "half a CPU is one";
  EXPECT_EQ(cpu_only.mem_mb, 0u);
  EXPECT_EQ(cpu_only.gpus, 0u);
  EXPECT_EQ(cpu_only.run_s, 9);
  EXPECT_EQ(cpu_only.account, "Guaranteed");

  const SimJob& whole = t->jobs[2];
  EXPECT_EQ(whole.procs, 12u);
  EXPECT_EQ(whole.gpus, 1u);
  EXPECT_TRUE(whole.gpu_types.empty()) << "no gpu_spec: any model";
  EXPECT_EQ(whole.run_s, 4900);
  EXPECT_EQ(whole.traced_wait_s, 0);
  EXPECT_EQ(whole.account, "LS");

  const SimJob& two = t->jobs[3];
  EXPECT_EQ(two.gpus, 2u);
  EXPECT_EQ(two.gpu_types, (std::vector<std::string>{"t4"}));
  EXPECT_EQ(two.run_s, 8750) << "still running at the end: cut at the trace's last deletion";

  EXPECT_TRUE(HasNote(*t, "1 pods share a GPU"));
  EXPECT_TRUE(HasNote(*t, "2 pods ask for a fraction of a CPU"));
  EXPECT_TRUE(HasNote(*t, "1 pods were still Running at the trace's end (deletion_time 9000"));
  EXPECT_TRUE(HasNote(*t, "perfect estimates"));
}

TEST(OpenbTest, PodsThatCannotBeReplayedAreCountedAndListedByLine) {
  auto t = ReadOpenbPods(kPods);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->skipped, 5u);
  EXPECT_TRUE(
      HasNote(*t, "line 4: never scheduled (no scheduled_time): dropped (pod_phase Pending)"));
  EXPECT_TRUE(HasNote(*t, "line 5: no deletion_time: dropped"));
  EXPECT_TRUE(HasNote(*t, "line 6: run (deletion_time - scheduled_time) <= 0: dropped (run 0)"));
  EXPECT_TRUE(
      HasNote(*t, "line 8: malformed: skipped (num_gpu is not a non-negative integer: 'x')"));
  EXPECT_TRUE(HasNote(*t, "line 9: malformed: skipped (11 columns expected, 9 found)"));
  EXPECT_TRUE(HasNote(*t, "2 lines: malformed: skipped"));
}

TEST(OpenbTest, APodListWithoutTimesIsAnError) {
  auto t = ReadOpenbPods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nopenb-pod-0000,1,2,3,4\n");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("creation_time"), std::string::npos);
}

constexpr const char* kNodes =
    "sn,cpu_milli,memory_mib,gpu,model\n"
    "openb-node-0000,32000,262144,0,\n"
    "openb-node-0001,64000,262144,2,P100\n"
    "openb-node-0002,96000,393216,8,G2\n"
    "openb-node-0003,96500,786432,8,V100M32\n";

TEST(OpenbTest, TheNodeListBecomesAConfigWithItsNodesGpusAndTypes) {
  auto c = ReadOpenbNodes(kNodes);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->nodes.size(), 4u);
  const char* names[] = {"openb-node-0000", "openb-node-0001", "openb-node-0002",
                         "openb-node-0003"};
  const uint32_t cpus[] = {32, 64, 96, 96};
  const uint64_t mem[] = {262144, 262144, 393216, 786432};
  const uint32_t gpus[] = {0, 2, 8, 8};
  const char* types[] = {"", "p100", "g2", "v100m32"};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(c->nodes[i].name, names[i]);
    EXPECT_EQ(c->nodes[i].cpus, cpus[i]) << i;
    EXPECT_EQ(c->nodes[i].memory_mb, mem[i]) << i;
    EXPECT_EQ(c->nodes[i].gpus, gpus[i]) << i;
    EXPECT_EQ(c->nodes[i].gpu_type, types[i]) << i;
  }
  ASSERT_EQ(c->partitions.size(), 1u);
  EXPECT_EQ(c->partitions[0].name, "sim");
  EXPECT_TRUE(c->partitions[0].is_default);
  EXPECT_EQ(c->partitions[0].nodes.size(), 4u);
  ASSERT_NE(c->DefaultPartition(), nullptr);

  auto toml = OpenbNodesToToml(kNodes);
  ASSERT_TRUE(toml.ok());
  EXPECT_NE(toml->find("nodes = \"openb-node-[0000-0003]\""), std::string::npos) << *toml;
}

TEST(OpenbTest, NamesTheConfigWouldRefuseAreReplaced) {
  auto c = ReadOpenbNodes(
      "sn,cpu_milli,memory_mib,gpu,model\n"
      "good-1,8000,1024,0,\n"
      "-bad,8000,1024,1,T4\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->nodes.size(), 2u);
  EXPECT_EQ(c->nodes[0].name, "node0");
  EXPECT_EQ(c->nodes[1].name, "node1");
  EXPECT_EQ(c->nodes[1].gpu_type, "t4");
}

TEST(OpenbTest, ABadNodeListIsAnErrorNamingTheLine) {
  auto malformed = ReadOpenbNodes("sn,cpu_milli,memory_mib,gpu,model\nn1,8000,1024,0,\nn2,8000\n");
  ASSERT_FALSE(malformed.ok());
  EXPECT_NE(malformed.status().message().find("line 3"), std::string::npos);
  auto no_cpu = ReadOpenbNodes("sn,cpu_milli,memory_mib,gpu,model\nn1,500,1024,0,\n");
  ASSERT_FALSE(no_cpu.ok());
  EXPECT_NE(no_cpu.status().message().find("line 2"), std::string::npos);
  auto no_column = ReadOpenbNodes("sn,cpu_milli,gpu,model\nn1,8000,0,\n");
  ASSERT_FALSE(no_column.ok());
  EXPECT_NE(no_column.status().message().find("memory_mib"), std::string::npos);
  EXPECT_FALSE(ReadOpenbNodes("sn,cpu_milli,memory_mib,gpu,model\n").ok()) << "no node";
}

TEST(OpenbTest, PodsPastTheBoundsAreSkippedAsOutOfRange) {
  auto t = ReadOpenbPods(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time\n"
      "p-1,9223372036854775807,1,0,0,0,10,1\n"  // 2: rounding up to whole CPUs overflowed
      "p-2,1000,1073741825,0,0,0,10,1\n"        // 3: more than 1 PiB
      "p-3,1000,1,1000001,0,0,10,1\n"           // 4
      "p-4,1000,1,0,0,9223372036854775807,9223372036854775807,9223372036854775807\n"  // 5
      "p-5,1000,1,0,0,0,3155760001,1\n"                                               // 6
      "p-6,10000000000,1073741824,1000000,0,3155759990,3155760000,3155759999\n");     // 7
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 1u);
  const SimJob& j = t->jobs[0];
  EXPECT_EQ(j.trace_id, 6);
  EXPECT_EQ(j.procs, kMaxTraceProcs);
  EXPECT_EQ(j.mem_mb, kMaxTraceMemMb);
  EXPECT_EQ(j.gpus, kMaxTraceGpus);
  EXPECT_EQ(j.run_s, 1);
  EXPECT_EQ(t->skipped, 5u);
  EXPECT_TRUE(HasNote(*t,
                      "line 2: out of range: skipped (cpu_milli 9223372036854775807 is more than "
                      "10000000000)"));
  EXPECT_TRUE(
      HasNote(*t, "line 3: out of range: skipped (memory_mib 1073741825 is more than 1073741824)"));
  EXPECT_TRUE(HasNote(*t, "line 4: out of range: skipped (num_gpu 1000001 is more than 1000000)"));
  EXPECT_TRUE(HasNote(*t, "line 5: out of range: skipped (creation_time 9223372036854775807 s"));
  EXPECT_TRUE(HasNote(*t, "line 6: out of range: skipped (deletion_time 3155760001 s"));
}

TEST(OpenbTest, ANodePastWhatTheControllerHoldsIsAnErrorNamingTheLine) {
  // 2,000,000 CPUs: the config refuses it too, but without naming the node list's line.
  auto cpus = OpenbNodesToToml("sn,cpu_milli,memory_mib,gpu\nn1,8000,1024,0\nn2,2000000000,1,0\n");
  ASSERT_FALSE(cpus.ok());
  EXPECT_EQ(cpus.status().message(),
            "the openb node list, line 3: more than 1000000 CPUs (cpu_milli 2000000000)");
  // Memory the config has no bound for: the replay's totals would overflow.
  auto memory = ReadOpenbNodes("sn,cpu_milli,memory_mib,gpu\nn1,8000,9223372036854775807,0\n");
  ASSERT_FALSE(memory.ok());
  EXPECT_NE(memory.status().message().find("line 2: more than 1 PiB of memory"), std::string::npos)
      << memory.status().ToString();
  auto gpus = ReadOpenbNodes("sn,cpu_milli,memory_mib,gpu\nn1,8000,1024,4000000000\n");
  ASSERT_FALSE(gpus.ok());
  EXPECT_NE(gpus.status().message().find("line 2: more than 1024 GPUs"), std::string::npos);
  auto most = ReadOpenbNodes("sn,cpu_milli,memory_mib,gpu\nn1,1000000999,1073741824,1024\n");
  ASSERT_TRUE(most.ok()) << most.status().ToString();
  EXPECT_EQ(most->nodes[0].cpus, kMaxOpenbNodeCpus);
  EXPECT_EQ(most->nodes[0].memory_mb, kMaxTraceMemMb);
}

}  // namespace
}  // namespace muster::sim
