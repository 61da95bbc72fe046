// Each GPU's socket, for --gpus-per-socket: the package hwloc puts it under (captured exports of
// real nodes, tests/data/hwloc), joined to NVML's GPUs by PCI bus id, else by NUMA node or CPU
// affinity; and the sockets a GPU fixture gives its fake GPUs.
#include "gpu_sockets.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

#include "host_topology.h"
#include "inventory.h"
#include "muster/common/cpu_topology.h"

namespace muster::agent {
namespace {

std::string Fixture(const std::string& name) {
  return std::string(MUSTER_SOURCE_DIR) + "/tests/data/hwloc/" + name;
}

// NVML's form of a bus id: eight hex digits of domain, upper case.
std::string NvmlBusId(const std::string& hwloc_id) {
  std::string id = "0000" + hwloc_id;
  for (char& c : id) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return id;
}

std::vector<int64_t> Sockets(const google::protobuf::RepeatedPtrField<v1::GpuDevice>& gpus) {
  std::vector<int64_t> out;
  for (const auto& g : gpus) out.push_back(g.has_socket() ? int64_t{g.socket()} : -1);
  return out;
}

TEST(GpuSocketsTest, HwlocPutsEachGpuUnderItsPackage) {
  auto dgx = ProbeHostTopology(Fixture("nvidia-dgx2h_16xV100_12xNVSwitch_nvlink-bw.v2.xml"));
  ASSERT_TRUE(dgx.ok()) << dgx.status().ToString();
  ASSERT_EQ(dgx->gpus.size(), 16u);
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(dgx->gpus[i].package, i < 8 ? 0 : 1) << i;
  ASSERT_EQ(dgx->numa.size(), 2u);
  EXPECT_EQ(dgx->numa[0].package, 0);
  EXPECT_EQ(dgx->numa[1].package, 1);

  // A version 1 export (sockets, not packages) of a POWER9 node: two GPUs on each socket.
  auto lassen = ProbeHostTopology(Fixture("llnl-lassen_power9_4xV100-SXM2_4xmlx5.v1.xml"));
  ASSERT_TRUE(lassen.ok()) << lassen.status().ToString();
  ASSERT_EQ(lassen->gpus.size(), 4u);
  std::vector<int32_t> packages;
  for (const auto& g : lassen->gpus) packages.push_back(g.package);
  EXPECT_EQ(packages, (std::vector<int32_t>{0, 0, 1, 1}));
}

TEST(GpuSocketsTest, NvmlGpusByBusIdThenNumaNodeThenCpuAffinity) {
  auto xeon = ProbeHostTopology(Fixture("xeon-2socket_1gpu_mlx5-ib_wholeio.v2.xml"));
  ASSERT_TRUE(xeon.ok()) << xeon.status().ToString();
  ASSERT_EQ(xeon->gpus.size(), 3u);
  google::protobuf::RepeatedPtrField<v1::GpuDevice> gpus;
  for (const auto& g : xeon->gpus) {
    v1::GpuDevice* d = gpus.Add();
    d->set_pci_bus_id(NvmlBusId(g.pci_bus_id));  // "00000000:83:00.0"
    d->set_numa_node(-1);
  }
  // Not in the export: by NUMA node (1), by CPUs all on socket 0, by CPUs on both (unknown),
  // by nothing at all (unknown).
  const std::vector<uint32_t>& numa0 = xeon->numa[0].pus;
  const std::vector<uint32_t>& numa1 = xeon->numa[1].pus;
  ASSERT_FALSE(numa0.empty());
  ASSERT_FALSE(numa1.empty());
  for (int i = 0; i < 4; ++i) {
    v1::GpuDevice* d = gpus.Add();
    d->set_pci_bus_id("00000000:F" + std::to_string(i) + ":00.0");
    d->set_numa_node(-1);
  }
  gpus[3].set_numa_node(1);
  gpus[4].set_cpu_affinity(FormatCpuList(numa0));
  gpus[5].set_cpu_affinity(std::to_string(numa0.front()) + "," + std::to_string(numa1.front()));
  // One the fixture already placed keeps its socket.
  v1::GpuDevice* fixed = gpus.Add();
  fixed->set_pci_bus_id(NvmlBusId(xeon->gpus[0].pci_bus_id));
  fixed->set_socket(1);
  AssignGpuSockets(*xeon, &gpus);
  EXPECT_EQ(Sockets(gpus), (std::vector<int64_t>{0, 1, 1, 1, 0, -1, -1, 1}));
}

// A fixture spreads its GPUs over `sockets` as over NUMA nodes; without it, a socket per NUMA
// node (muster local's fixture: 8 GPUs on 2 NUMA nodes, four on each socket).
TEST(GpuSocketsTest, FixtureSockets) {
  auto f = ParseGpuFixture("[gpus]\ncount = 8\nnuma_nodes = 2\n", "gpus.toml");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  std::vector<uint32_t> sockets;
  for (const auto& g : f->gpus) sockets.push_back(g.socket());
  EXPECT_EQ(sockets, (std::vector<uint32_t>{0, 0, 0, 0, 1, 1, 1, 1}));
  f = ParseGpuFixture("[gpus]\ncount = 8\nnuma_nodes = 2\nsockets = 4\n", "gpus.toml");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  sockets.clear();
  for (const auto& g : f->gpus) sockets.push_back(g.socket());
  EXPECT_EQ(sockets, (std::vector<uint32_t>{0, 0, 1, 1, 2, 2, 3, 3}));
  f = ParseGpuFixture("[gpus]\ncount = 8\nsockets = -1\n", "gpus.toml");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("gpus.sockets"), std::string::npos) << f.status().message();
}

}  // namespace
}  // namespace muster::agent
