#include "job_cpus.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace muster::agent {
namespace {

using Ids = std::vector<uint32_t>;

// One socket of four cores of two threads: cores {0,4} {1,5} {2,6} {3,7}.
CpuTopology Machine() {
  CpuTopology t;
  for (uint32_t id = 0; id < 8; ++id) t.cpus.push_back({id, 0, id % 4, 0});
  return t;
}

v1::JobSpec Spec(uint32_t core_spec, uint32_t thread_spec) {
  v1::JobSpec s;
  s.set_core_spec(core_spec);
  s.set_thread_spec(thread_spec);
  return s;
}

TEST(JobCpusTest, TheSetAsideCoresLeaveTheJob) {
  EXPECT_FALSE(SetsCpusAside(Spec(0, 0)));
  EXPECT_TRUE(SetsCpusAside(Spec(1, 0)));
  EXPECT_TRUE(SetsCpusAside(Spec(0, 1)));
  const Ids all = {0, 1, 2, 3, 4, 5, 6, 7};
  auto cores = CpusLeftToJob(Spec(1, 0), all, Machine());
  ASSERT_TRUE(cores.ok()) << cores.status().ToString();
  EXPECT_EQ(*cores, (Ids{0, 1, 2, 4, 5, 6})) << "both threads of core 3";
  auto threads = CpusLeftToJob(Spec(0, 1), all, Machine());
  ASSERT_TRUE(threads.ok());
  EXPECT_EQ(*threads, (Ids{0, 1, 2, 3, 4, 5, 6})) << "core 3's higher thread";
}

TEST(JobCpusTest, OnlyCpusThisMachineHasAreKept) {
  // A node configured with more CPUs than the machine has (a test cluster on one host).
  auto left = CpusLeftToJob(Spec(1, 0), {0, 1, 2, 3, 4, 5, 6, 7, 8, 15}, Machine());
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(*left, (Ids{0, 1, 2, 4, 5, 6}));
}

TEST(JobCpusTest, NothingLeftOrTooFewCoresIsAFailureNotAGuess) {
  auto none = CpusLeftToJob(Spec(1, 0), {3, 7}, Machine());
  ASSERT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("none of the CPUs held on this node (3,7) is left"),
            std::string::npos)
      << none.status().message();
  auto too_many = CpusLeftToJob(Spec(4, 0), {0, 1}, Machine());
  ASSERT_EQ(too_many.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(too_many.status().message().find("this node has 4 cores"), std::string::npos)
      << too_many.status().message();
}

// A cpuset names CPUs by the kernel's ids, which may have holes: each id is looked for among the
// online ones, never compared with how many there are.
TEST(JobCpusTest, CpusAreCheckedAgainstTheOnlineIdsNotTheirCount) {
  namespace fs = std::filesystem;
  const fs::path sysfs =
      fs::temp_directory_path() / ("muster-online-" + std::to_string(::getpid()));
  fs::create_directories(sysfs / "devices/system/cpu");
  std::ofstream(sysfs / "devices/system/cpu/online") << "0-3,8-11\n";  // 8 CPUs, ids up to 11
  auto online = OnlineCpus(sysfs.string());
  ASSERT_TRUE(online.ok()) << online.status().ToString();
  EXPECT_EQ(*online, (Ids{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_TRUE(AllOnline({8, 9, 11}, *online)) << "ids past the count that the machine has";
  EXPECT_TRUE(AllOnline({0, 3}, *online));
  EXPECT_FALSE(AllOnline({3, 5}, *online)) << "an id under the count that the machine lacks";
  EXPECT_FALSE(AllOnline({}, *online)) << "no CPU is nothing to pin to";
  fs::remove_all(sysfs);
  EXPECT_EQ(OnlineCpus(sysfs.string()).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace muster::agent
