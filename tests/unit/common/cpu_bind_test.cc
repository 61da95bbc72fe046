#include "muster/common/cpu_bind.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace muster {
namespace {

using Ids = std::vector<uint32_t>;
using Tasks = std::vector<Ids>;

// Two sockets of two cores of two threads, numbered as Linux numbers them: the first threads of
// every core (0-3) before their siblings (4-7). Socket 0: cores {0,4} and {1,5}; socket 1: {2,6}
// and {3,7}. One NUMA node per socket.
CpuTopology TwoSockets() {
  CpuTopology t;
  for (uint32_t id = 0; id < 8; ++id) {
    const uint32_t first = id % 4;
    t.cpus.push_back({id, first / 2, first % 2, first / 2});
  }
  return t;
}

const Ids kAll = {0, 1, 2, 3, 4, 5, 6, 7};

Tasks Lay(const std::string& bind, const Ids& held, uint32_t ntasks, uint32_t cpus_per_task = 1,
          CpuDistribution dist = CpuDistribution::kCyclic) {
  auto b = ParseCpuBind(bind);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  if (!b.ok()) return {};
  auto tasks = LayOutTaskCpus(*b, dist, TwoSockets(), held, ntasks, cpus_per_task);
  EXPECT_TRUE(tasks.ok()) << bind << ": " << tasks.status().ToString();
  return tasks.ok() ? *tasks : Tasks{{9999}};
}

Status LayError(const std::string& bind, const Ids& held, uint32_t ntasks) {
  auto b = ParseCpuBind(bind);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  auto tasks = LayOutTaskCpus(*b, CpuDistribution::kCyclic, TwoSockets(), held, ntasks, 1);
  return tasks.status();
}

TEST(CpuBindTest, ParsesSlurmsForms) {
  auto b = ParseCpuBind("verbose,cores");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->verbose);
  EXPECT_EQ(b->kind, CpuBind::Kind::kCores);
  b = ParseCpuBind("q,map_cpu:0,2*2,0x4");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_FALSE(b->verbose);
  EXPECT_EQ(b->kind, CpuBind::Kind::kMapCpu);
  EXPECT_EQ(b->list, (Tasks{{0}, {2}, {2}, {4}}));
  EXPECT_EQ(b->list_text, "0,2*2,0x4");
  b = ParseCpuBind("mask_cpu:0x3,f0,verbose");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(b->verbose) << "a verbosity after the list ends it";
  EXPECT_EQ(b->list, (Tasks{{0, 1}, {4, 5, 6, 7}}));
  b = ParseCpuBind("mask_cpu:0x10000000000000000");
  ASSERT_TRUE(b.ok()) << "masks are longer than 64 bits on big nodes";
  EXPECT_EQ(b->list, (Tasks{{64}}));
  for (const char* ok : {"none", "no", "q", "quiet", "v", "threads", "thread", "sockets", "ldoms",
                         "rank", "rank_ldom", "map_ldom:1,0", "mask_ldom:0x3", "VERBOSE,Cores"}) {
    EXPECT_TRUE(ParseCpuBind(ok).ok()) << ok;
  }
  EXPECT_EQ(ParseCpuBind("quiet")->kind, CpuBind::Kind::kUnset);
  for (const char* bad :
       {"boards", "cores,sockets", "map_cpu", "map_cpu:", "map_cpu:x", "mask_cpu:0", "mask_cpu:0xg",
        "cores:2", "map_cpu:1*0", "map_cpu:70000", "map_cpu:0*5000"}) {
    EXPECT_EQ(ParseCpuBind(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(ParseCpuBind("cores,sockets").status().message().find("more than one binding type"),
            std::string::npos);
}

// A list's ids are bounded as a whole: long masks repeated many times, or many of them, are
// refused before they are expanded (srun and the node's supervisor, as root, expand them).
TEST(CpuBindTest, AListOfTooManyCpusIsRefused) {
  const std::string full(16384, 'f');
  for (const std::string& bad :
       {"mask_cpu:" + full + "*4096", "mask_ldom:" + full + "*4096", "mask_cpu:" + full + "*17",
        "mask_cpu:" + full + "*8," + full + "*8," + full, std::string("map_cpu:1*4097")}) {
    auto b = ParseCpuBind(bad);
    ASSERT_FALSE(b.ok()) << bad.substr(0, 40) << "... (" << bad.size() << " bytes)";
    EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  }
  auto ok = ParseCpuBind("mask_cpu:" + full + "*16");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->list.size(), 16u);
  EXPECT_EQ(ok->list[0].size(), 65536u);
  EXPECT_TRUE(ParseCpuBind("map_cpu:1*4096").ok());
}

TEST(CpuBindTest, NoneAndNoTypeBindNothing) {
  EXPECT_EQ(Lay("none", kAll, 4), Tasks{});
  EXPECT_EQ(Lay("verbose", kAll, 4), Tasks{});
}

// Slurm's default (block:cyclic): consecutive tasks on alternate sockets, and within a socket
// on its cores in turn before any core's second thread.
TEST(CpuBindTest, CyclicSpreadsTasksOverSocketsThenCores) {
  EXPECT_EQ(Lay("threads", kAll, 8), (Tasks{{0}, {2}, {1}, {3}, {4}, {6}, {5}, {7}}));
  EXPECT_EQ(Lay("cores", kAll, 4), (Tasks{{0, 4}, {2, 6}, {1, 5}, {3, 7}}));
  EXPECT_EQ(Lay("sockets", kAll, 2), (Tasks{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(Lay("ldoms", kAll, 2), (Tasks{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  // A task of two threads takes both of one core.
  EXPECT_EQ(Lay("threads", kAll, 2, 2), (Tasks{{0, 4}, {2, 6}}));
  // Three threads: cores are whole, so two of them.
  EXPECT_EQ(Lay("cores", kAll, 2, 3), (Tasks{{0, 1, 4, 5}, {2, 3, 6, 7}}));
}

TEST(CpuBindTest, BlockFillsASocketFirst) {
  const auto block = CpuDistribution::kBlock;
  EXPECT_EQ(Lay("threads", kAll, 4, 1, block), (Tasks{{0}, {4}, {1}, {5}}));
  EXPECT_EQ(Lay("cores", kAll, 4, 1, block), (Tasks{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(Lay("sockets", kAll, 2, 1, block), (Tasks{{0, 1, 4, 5}, {0, 1, 4, 5}}));
  EXPECT_EQ(Lay("threads", kAll, 2, 2, CpuDistribution::kFcyclic), (Tasks{{0, 2}, {1, 3}}));
}

TEST(CpuBindTest, OnlyTheStepsCpusAreDealt) {
  // The step holds the second core of each socket.
  EXPECT_EQ(Lay("cores", {1, 5, 3, 7}, 2), (Tasks{{1, 5}, {3, 7}}));
  EXPECT_EQ(Lay("sockets", {1, 5, 3}, 2), (Tasks{{1, 5}, {3}}));
  EXPECT_EQ(Lay("rank", {4, 5, 6}, 3), (Tasks{{4}, {5}, {6}}));
  EXPECT_EQ(Lay("rank", {4, 5, 6, 7}, 2, 2), (Tasks{{4, 5}, {6, 7}}));
  EXPECT_EQ(Lay("rank_ldom", {0, 2, 3}, 2), (Tasks{{0}, {2, 3}}));
  // More tasks than cores: they share, starting again from the first.
  EXPECT_EQ(Lay("cores", {0, 4}, 2), (Tasks{{0, 4}, {0, 4}}));
  // CPUs the step holds but this machine lacks (a node configured larger than it is) are left
  // out; with none left the binding fails, saying why.
  EXPECT_EQ(Lay("threads", {0, 1, 20}, 2), (Tasks{{0}, {1}}));
  Status none = LayError("threads", {20, 21}, 1);
  EXPECT_EQ(none.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(none.message().find("none of the CPUs the step holds on this node (20-21)"),
            std::string::npos)
      << none.message();
}

TEST(CpuBindTest, MapsAndMasksNameOnlyTheStepsCpus) {
  EXPECT_EQ(Lay("map_cpu:5,1", {1, 5}, 3), (Tasks{{5}, {1}, {5}}));
  EXPECT_EQ(Lay("mask_cpu:0x3,0xc0", kAll, 2), (Tasks{{0, 1}, {6, 7}}));
  EXPECT_EQ(Lay("map_ldom:1,0", kAll, 2), (Tasks{{2, 3, 6, 7}, {0, 1, 4, 5}}));
  EXPECT_EQ(Lay("mask_ldom:0x3", {0, 2}, 1), (Tasks{{0, 2}}));
  Status s = LayError("map_cpu:2", {1, 5}, 1);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("names CPU 2, which the step does not hold on this node (it holds "
                             "1,5)"),
            std::string::npos)
      << s.message();
  s = LayError("mask_cpu:0x3", {1, 5}, 1);
  EXPECT_NE(s.message().find("names CPU 0"), std::string::npos) << s.message();
  s = LayError("map_ldom:1", {0, 1}, 1);
  EXPECT_NE(s.message().find("names NUMA node 1, where the step holds no CPU"), std::string::npos)
      << s.message();
  s = LayError("map_cpu:20", {0, 20}, 1);
  EXPECT_NE(s.message().find("CPU 20, which this machine does not have online"), std::string::npos)
      << s.message();
}

TEST(CpuBindTest, EnvironmentAndReportAsSlurmWritesThem) {
  auto b = ParseCpuBind("cores");
  auto env = CpuBindEnv(*b, {{0, 4}, {2, 6}});
  ASSERT_EQ(env.size(), 4u);
  EXPECT_EQ(env[0], (std::pair<std::string, std::string>{
                        "SLURM_CPU_BIND", "quiet,mask_cpu:0x0000000000000011,0x0000000000000044"}));
  EXPECT_EQ(env[1].second, "mask_cpu:");
  EXPECT_EQ(env[2].second, "0x0000000000000011,0x0000000000000044");
  EXPECT_EQ(env[3].second, "quiet");
  b = ParseCpuBind("verbose,map_cpu:1,0");
  env = CpuBindEnv(*b, {{1}, {0}});
  EXPECT_EQ(env[0].second, "verbose,map_cpu:1,0");
  EXPECT_EQ(env[1].second, "map_cpu:");
  EXPECT_EQ(env[2].second, "1,0");
  EXPECT_EQ(env[3].second, "verbose");
  b = ParseCpuBind("none");
  env = CpuBindEnv(*b, {});
  EXPECT_EQ(env[0].second, "quiet,none");
  EXPECT_EQ(env[2].second, "");
  EXPECT_EQ(CpuMaskHex({0, 1}), "3");
  EXPECT_EQ(CpuMaskHex({2, 35, 66, 99}), "8000000040000000800000004");
  EXPECT_EQ(CpuMaskHex({4}, 4, true), "0010");
  b = ParseCpuBind("v,cores");
  EXPECT_EQ(CpuBindReport(*b, "node1", 3, 1, 4242, {8}),
            "cpu-bind=MASK - node1, task  3  1 [4242]: mask 0x100 set\n");
  b = ParseCpuBind("v,none");
  EXPECT_EQ(CpuBindReport(*b, "node1", 0, 0, 7, {0, 1}),
            "cpu-bind=NONE - node1, task  0  0 [7]: mask 0x3\n");
}

TEST(CpuTopologyTest, ListsParseAndPrintAsTheKernelWritesThem) {
  EXPECT_EQ(*ParseCpuList("0-3,8,10-11\n"), (Ids{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(*ParseCpuList(""), Ids{});
  EXPECT_FALSE(ParseCpuList("3-1").ok());
  EXPECT_FALSE(ParseCpuList("a").ok());
  EXPECT_FALSE(ParseCpuList("0-70000").ok());
  EXPECT_EQ(FormatCpuList({11, 0, 1, 2, 3, 8, 10}), "0-3,8,10-11");
}

// A sysfs tree of two sockets with one NUMA node each; CPU 3 is offline.
TEST(CpuTopologyTest, ReadsSocketsCoresAndNumaNodesFromSysfs) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("muster-sysfs-" + std::to_string(::getpid()));
  auto put = [&](const fs::path& p, const std::string& text) {
    fs::create_directories((root / p).parent_path());
    std::ofstream(root / p) << text;
  };
  put("devices/system/cpu/online", "0-2,4\n");
  const uint32_t socket[] = {0, 0, 1, 1, 1}, core[] = {0, 1, 0, 1, 0};
  for (uint32_t id = 0; id < 5; ++id) {
    const std::string dir = "devices/system/cpu/cpu" + std::to_string(id) + "/topology/";
    put(dir + "physical_package_id", std::to_string(socket[id]) + "\n");
    put(dir + "core_id", std::to_string(core[id]) + "\n");
  }
  put("devices/system/node/node0/cpulist", "0-1\n");
  put("devices/system/node/node1/cpulist", "2-4\n");
  auto t = ReadCpuTopology(root.string());
  fs::remove_all(root);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->cpus.size(), 4u);
  EXPECT_EQ(t->cpus[2].id, 2u);
  EXPECT_EQ(t->cpus[2].socket, 1u);
  EXPECT_EQ(t->cpus[2].ldom, 1u);
  EXPECT_EQ(t->cpus[3].id, 4u);
  EXPECT_EQ(t->cpus[1].core, 1u);
  EXPECT_EQ(t->Find(3), nullptr) << "offline";
  EXPECT_EQ(ReadCpuTopology("/nonexistent").status().code(), StatusCode::kNotFound);
}

// Some multi-die CPUs number cores within a die: core_id repeats in a package, and the core's
// threads are those of topology/core_cpus_list (thread_siblings_list on older kernels).
TEST(CpuTopologyTest, CoresAreTheirSiblingListsNotTheirCoreIds) {
  namespace fs = std::filesystem;
  const fs::path root =
      fs::temp_directory_path() / ("muster-sysfs-dies-" + std::to_string(::getpid()));
  auto put = [&](const fs::path& p, const std::string& text) {
    fs::create_directories((root / p).parent_path());
    std::ofstream(root / p) << text;
  };
  // One package of two dies of one core of two threads each, both cores numbered 0: {0,2}, {1,3}.
  put("devices/system/cpu/online", "0-3\n");
  for (uint32_t id = 0; id < 4; ++id) {
    const std::string dir = "devices/system/cpu/cpu" + std::to_string(id) + "/topology/";
    put(dir + "physical_package_id", "0\n");
    put(dir + "core_id", "0\n");
    put(dir + (id < 2 ? "core_cpus_list" : "thread_siblings_list"),
        id % 2 == 0 ? "0,2\n" : "1,3\n");
  }
  auto t = ReadCpuTopology(root.string());
  fs::remove_all(root);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->cpus.size(), 4u);
  EXPECT_EQ(t->cpus[0].core, t->cpus[2].core);
  EXPECT_EQ(t->cpus[1].core, t->cpus[3].core);
  EXPECT_NE(t->cpus[0].core, t->cpus[1].core);
  // Cores: one task's two threads are one core's.
  auto b = ParseCpuBind("cores");
  ASSERT_TRUE(b.ok());
  auto tasks = LayOutTaskCpus(*b, CpuDistribution::kBlock, *t, {0, 1, 2, 3}, 2, 2);
  ASSERT_TRUE(tasks.ok()) << tasks.status().ToString();
  EXPECT_EQ(*tasks, (Tasks{{0, 2}, {1, 3}}));
}

TEST(CpuTopologyTest, ThisMachinesTopologyReads) {
  auto t = ReadCpuTopology();
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_GE(t->cpus.size(), 1u);
}

}  // namespace
}  // namespace muster
