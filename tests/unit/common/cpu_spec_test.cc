#include "muster/common/cpu_spec.h"

#include <gtest/gtest.h>

namespace muster {
namespace {

using Ids = std::vector<uint32_t>;

// Two sockets of two cores of two threads, numbered as Linux numbers them: the first threads of
// every core (0-3) before their siblings (4-7). Socket 0: cores {0,4} and {1,5}; socket 1: {2,6}
// and {3,7}.
CpuTopology TwoSocketsTwoThreads() {
  CpuTopology t;
  for (uint32_t id = 0; id < 8; ++id) {
    const uint32_t first = id % 4;
    t.cpus.push_back({id, first / 2, first, first / 2});
  }
  return t;
}

// `sockets` sockets of `cores` single-thread cores, numbered socket by socket.
CpuTopology OneThreadPerCore(uint32_t sockets, uint32_t cores) {
  CpuTopology t;
  for (uint32_t id = 0; id < sockets * cores; ++id) t.cpus.push_back({id, id / cores, id, 0});
  return t;
}

Ids Aside(const CpuTopology& t, uint32_t core_spec, uint32_t thread_spec) {
  auto r = SpecializedCpus(t, core_spec, thread_spec);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Ids{9999};
}

TEST(CpuSpecTest, NothingAsideWithoutEither) {
  EXPECT_EQ(Aside(TwoSocketsTwoThreads(), 0, 0), Ids{});
}

// Slurm's documented order (core_spec.html) on two sockets of four cores: socket 1 core 3,
// socket 0 core 3, socket 1 core 2, socket 0 core 2, ...
TEST(CpuSpecTest, CoresComeFromTheHighestCoreOfEachSocketInTurn) {
  const CpuTopology t = OneThreadPerCore(2, 4);  // socket 0: 0-3, socket 1: 4-7
  EXPECT_EQ(Aside(t, 1, 0), (Ids{7}));
  EXPECT_EQ(Aside(t, 2, 0), (Ids{3, 7}));
  EXPECT_EQ(Aside(t, 3, 0), (Ids{3, 6, 7}));
  EXPECT_EQ(Aside(t, 4, 0), (Ids{2, 3, 6, 7}));
  EXPECT_EQ(Aside(t, 7, 0), (Ids{1, 2, 3, 4, 5, 6, 7}));
}

TEST(CpuSpecTest, CoreSpecTakesEveryThreadOfItsCores) {
  const CpuTopology t = TwoSocketsTwoThreads();
  EXPECT_EQ(Aside(t, 1, 0), (Ids{3, 7}));              // socket 1's highest core
  EXPECT_EQ(Aside(t, 2, 0), (Ids{1, 3, 5, 7}));        // and socket 0's
  EXPECT_EQ(Aside(t, 3, 0), (Ids{1, 2, 3, 5, 6, 7}));  // then socket 1's next
}

TEST(CpuSpecTest, ThreadSpecEmptiesOneCoreBeforeTheNext) {
  const CpuTopology t = TwoSocketsTwoThreads();
  EXPECT_EQ(Aside(t, 0, 1), (Ids{7}));  // the highest thread of the first core
  EXPECT_EQ(Aside(t, 0, 2), Aside(t, 1, 0));
  EXPECT_EQ(Aside(t, 0, 3), (Ids{3, 5, 7}));
  EXPECT_EQ(Aside(t, 0, 7), (Ids{1, 2, 3, 4, 5, 6, 7}));
}

TEST(CpuSpecTest, SocketsWithFewerCoresDropOutOfTheTurns) {
  // Socket 0: cores 0, 1, 2; socket 1: core 3.
  CpuTopology t = OneThreadPerCore(1, 3);
  t.cpus.push_back({3, 1, 3, 1});
  EXPECT_EQ(Aside(t, 1, 0), (Ids{3}));
  EXPECT_EQ(Aside(t, 2, 0), (Ids{2, 3}));
  EXPECT_EQ(Aside(t, 3, 0), (Ids{1, 2, 3}));
}

TEST(CpuSpecTest, CoresNamedByCoreIdAreToldApartBySocket) {
  // Older kernels without sibling lists: core_id repeats across sockets.
  CpuTopology t;
  for (uint32_t id = 0; id < 4; ++id) t.cpus.push_back({id, id / 2, id % 2, id / 2});
  EXPECT_EQ(Aside(t, 1, 0), (Ids{3}));
  EXPECT_EQ(Aside(t, 2, 0), (Ids{1, 3}));
}

TEST(CpuSpecTest, RefusesToLeaveTheJobNothingOrBothCounts) {
  const CpuTopology t = TwoSocketsTwoThreads();
  auto cores = SpecializedCpus(t, 4, 0);
  ASSERT_EQ(cores.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(cores.status().message().find(
                "--core-spec=4 leaves no core to the job: this node has 4 cores"),
            std::string::npos)
      << cores.status().message();
  auto threads = SpecializedCpus(t, 0, 8);
  ASSERT_EQ(threads.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(threads.status().message().find("this node has 8 threads"), std::string::npos)
      << threads.status().message();
  auto both = SpecializedCpus(t, 1, 1);
  ASSERT_EQ(both.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(both.status().message().find("cannot be used together"), std::string::npos);
  EXPECT_FALSE(SpecializedCpus(CpuTopology{}, 1, 0).ok()) << "no CPUs known: nothing to give";
}

TEST(CpuSpecTest, CpusOtherThanKeepsTheRestAscending) {
  EXPECT_EQ(CpusOtherThan({5, 0, 3, 3, 7, 1}, {7, 3, 9}), (Ids{0, 1, 5}));
  EXPECT_EQ(CpusOtherThan({0, 1}, {}), (Ids{0, 1}));
  EXPECT_EQ(CpusOtherThan({0, 1}, {0, 1}), Ids{});
}

}  // namespace
}  // namespace muster
