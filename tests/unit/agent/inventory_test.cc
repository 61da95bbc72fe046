// GPU fixtures, GPU types from model names, injected faults, and NVML without a driver.
#include "inventory.h"

#include <gtest/gtest.h>

#include "nvml.h"

namespace muster::agent {
namespace {

TEST(GpuFixtureTest, GeneratesAnNvSwitchNode) {
  auto f = ParseGpuFixture(R"(
[node]
cpus = 16
memory_mb = 64000
[gpus]
count = 8
model = "NVIDIA H100 80GB HBM3"
memory_mb = 81559
numa_nodes = 2
)",
                           "f.toml");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->cpus, 16u);
  ASSERT_EQ(f->gpus.size(), 8u);
  EXPECT_EQ(f->gpus[3].type(), "h100");
  EXPECT_EQ(f->gpus[3].numa_node(), 0);
  EXPECT_EQ(f->gpus[4].numa_node(), 1);
  ASSERT_EQ(f->gpus[0].links_size(), 7);
  EXPECT_EQ(f->gpus[0].links(0).type(), v1::GPU_LINK_NVSWITCH);
}

TEST(GpuFixtureTest, ReadsAnNvidiaSmiStyleMatrix) {
  // DGX-1-like: NVLink pairs inside a quad, system links across sockets.
  auto f = ParseGpuFixture(R"(
[gpus]
count = 4
model = "Tesla V100-SXM2-16GB"
topo = ["X NV1 NV2 SYS", "NV1 X PIX SYS", "NV2 PIX X NODE", "SYS SYS NODE X"]
)",
                           "f.toml");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->gpus[0].type(), "v100");
  EXPECT_EQ(f->gpus[0].links(1).type(), v1::GPU_LINK_NVLINK);
  EXPECT_EQ(f->gpus[0].links(1).count(), 2u);
  EXPECT_EQ(f->gpus[1].links(1).type(), v1::GPU_LINK_PCIE_SWITCH);
  EXPECT_EQ(f->gpus[3].links(0).type(), v1::GPU_LINK_SYSTEM);
}

TEST(GpuFixtureTest, ErrorsNameFileLineAndKey) {
  auto f = ParseGpuFixture("[gpus]\ncount = 2\ntopo = [\"X NV4\", \"NV4 Y\"]\n", "bad.toml");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("bad.toml:3: gpus.topo"), std::string::npos)
      << f.status().message();
  f = ParseGpuFixture("[gpus]\ncount = 2\ncolour = \"green\"\n", "bad.toml");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("bad.toml:3: gpus.colour"), std::string::npos);
}

TEST(GpuTypeTest, FromModelNames) {
  EXPECT_EQ(GpuTypeFromModel("NVIDIA H100 80GB HBM3"), "h100");
  EXPECT_EQ(GpuTypeFromModel("NVIDIA A100-SXM4-80GB"), "a100");
  EXPECT_EQ(GpuTypeFromModel("Tesla V100-SXM2-16GB"), "v100");
  EXPECT_EQ(GpuTypeFromModel("NVIDIA GeForce RTX 4090"), "rtx4090");
  EXPECT_EQ(GpuTypeFromModel(""), "gpu");
}

TEST(GpuFaultsTest, InjectedFaultsAreWordedAsNvmlWordsThem) {
  auto f =
      ParseGpuFaults("# injected\n3 xid 79\n1 ecc 2\n0 lost\n2 remap-pending\n5 xid 13\n3 ecc 1\n");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->size(), 4u) << "XID 13 is the application's fault, not the GPU's";
  EXPECT_EQ(f->at(3), "XID 79 (fallen off the bus)") << "a GPU's first fault is its reason";
  EXPECT_EQ(f->at(1), "2 uncorrectable ECC error(s)");
  EXPECT_EQ(f->at(0), "fallen off the bus");
  EXPECT_EQ(f->at(2), "row remapping pending (the GPU needs a reset)");
  auto bad = ParseGpuFaults("3 xid\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 1"), std::string::npos);
  EXPECT_FALSE(ParseGpuFaults("gpu3 lost\n").ok());
  EXPECT_FALSE(ParseGpuFaults("1 melted\n").ok());
}

TEST(NvmlTest, WithoutADriverItSaysSoInsteadOfFailing) {
  auto g = Nvml::Open();
  if (g.ok()) GTEST_SKIP() << "this machine has NVML; tests/gpu covers it";
  EXPECT_EQ(g.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace muster::agent
