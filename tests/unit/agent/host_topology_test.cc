// hwloc discovery against captured exports of real nodes (tests/data/hwloc): counts, NUMA
// layout, GPUs deduplicated by PCI function, HCAs and their locality.
#include "host_topology.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "infiniband.h"

namespace muster::agent {
namespace {

std::string Fixture(const std::string& name) {
  return std::string(MUSTER_SOURCE_DIR) + "/tests/data/hwloc/" + name;
}

std::vector<std::string> BusIds(const HostTopology& t) {
  std::vector<std::string> ids;
  for (const auto& g : t.gpus) ids.push_back(g.pci_bus_id + "@" + std::to_string(g.numa));
  return ids;
}

TEST(HostTopologyTest, DgxTwoHasSixteenGpusAndNoNvSwitchCountsAsOne) {
  auto t = ProbeHostTopology(Fixture("nvidia-dgx2h_16xV100_12xNVSwitch_nvlink-bw.v2.xml"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->packages, 2u);
  ASSERT_EQ(t->numa.size(), 2u);
  ASSERT_EQ(t->gpus.size(), 16u) << "12 NVSwitches are PCI bridges, not GPUs";
  for (size_t i = 0; i < 16; ++i) {
    EXPECT_EQ(t->gpus[i].numa, i < 8 ? 0 : 1) << t->gpus[i].pci_bus_id;
    EXPECT_EQ(t->gpus[i].pci_device, 0x1db8u);
    EXPECT_EQ(t->gpus[i].os_devices, std::vector<std::string>{"nvml" + std::to_string(i)});
  }
  EXPECT_TRUE(t->hcas.empty());
}

TEST(HostTopologyTest, Power8GpuSeenThreeTimesIsOneGpu) {
  auto t = ProbeHostTopology(Fixture("ibm-power8_4xP100-nvlink_cuda-nvml-opencl.v2.xml"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->cores, 8u);
  EXPECT_EQ(t->pus, 16u);
  EXPECT_EQ(BusIds(*t), (std::vector<std::string>{"0002:01:00.0@0", "0003:01:00.0@0",
                                                  "000a:01:00.0@1", "000b:01:00.0@1"}));
  EXPECT_EQ(t->gpus[0].os_devices, (std::vector<std::string>{"cuda0", "opencl0d0", "nvml0"}));
}

TEST(HostTopologyTest, XeonGpusAndHcaLocality) {
  auto t = ProbeHostTopology(Fixture("xeon-2socket_1gpu_mlx5-ib_wholeio.v2.xml"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->packages, 2u);
  EXPECT_EQ(t->cores, 16u);
  EXPECT_EQ(t->pus, 32u);
  ASSERT_EQ(t->numa.size(), 2u);
  EXPECT_EQ(t->numa[1].pus.size(), 16u);
  // Three NVIDIA boards on the PCI bus; only one had a driver bound when it was captured.
  EXPECT_EQ(BusIds(*t),
            (std::vector<std::string>{"0000:03:00.0@0", "0000:83:00.0@1", "0000:84:00.0@1"}));
  EXPECT_EQ(t->gpus[2].os_devices, (std::vector<std::string>{"cuda0", "card0"}));
  ASSERT_EQ(t->hcas.size(), 1u);
  EXPECT_EQ(t->hcas[0].name, "mlx5_0");
  EXPECT_EQ(t->hcas[0].numa, 1);
  EXPECT_EQ(t->hcas[0].node_guid, "248a:0703:001e:39fe");
}

TEST(HostTopologyTest, LassenAndSierraFromVersionOneExports) {
  auto lassen = ProbeHostTopology(Fixture("llnl-lassen_power9_4xV100-SXM2_4xmlx5.v1.xml"));
  ASSERT_TRUE(lassen.ok()) << lassen.status().ToString();
  EXPECT_EQ(lassen->cores, 40u);
  EXPECT_EQ(lassen->pus, 160u);
  ASSERT_EQ(lassen->numa.size(), 2u);
  EXPECT_EQ(lassen->numa[1].os_index, 8u);
  EXPECT_EQ(BusIds(*lassen), (std::vector<std::string>{"0004:04:00.0@0", "0004:05:00.0@0",
                                                       "0035:03:00.0@8", "0035:04:00.0@8"}));
  ASSERT_EQ(lassen->hcas.size(), 4u);
  EXPECT_EQ(lassen->hcas[2].name, "mlx5_2");
  EXPECT_EQ(lassen->hcas[2].numa, 8);

  auto sierra = ProbeHostTopology(Fixture("llnl-sierra_power9_4xV100-SXM2_4xmlx5_cuda-drm.v1.xml"));
  ASSERT_TRUE(sierra.ok()) << sierra.status().ToString();
  EXPECT_EQ(sierra->pus, 176u);
  // GPU memory appears as four CPU-less NUMA nodes.
  ASSERT_EQ(sierra->numa.size(), 6u);
  EXPECT_TRUE(sierra->numa[5].pus.empty());
  // CUDA and DRM devices of one board are one GPU; the BMC's VGA (not NVIDIA) is none.
  ASSERT_EQ(sierra->gpus.size(), 4u);
  EXPECT_EQ(sierra->gpus[0].os_devices.size(), 3u);
  EXPECT_EQ(sierra->hcas.size(), 4u);
}

TEST(HostTopologyTest, ThisMachineAndBadFiles) {
  auto here = ProbeHostTopology();
  ASSERT_TRUE(here.ok()) << here.status().ToString();
  EXPECT_GE(here->pus, 1u);
  auto missing = ProbeHostTopology("/nonexistent/topo.xml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("/nonexistent/topo.xml"), std::string::npos);
  auto not_xml = ProbeHostTopology(std::string(MUSTER_SOURCE_DIR) + "/tests/data/hwloc/README.md");
  EXPECT_FALSE(not_xml.ok());
}

// A sysfs tree as an Azure HB120rs_v3 VM shows it (values from the captured ibv_devinfo): a
// ConnectX-6 VF on InfiniBand and a ConnectX-4 Lx VF on Ethernet (RoCE).
class InfinibandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("muster-ib-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
    Device("mlx5_0", "0015:5dff:fe33:ff18", "0101:00:00.0", "-1", "4: ACTIVE",
           "200 Gb/sec (4X HDR)", "InfiniBand");
    Device("mlx5_1", "000d:3aff:fe72:a6b3", "0002:00:02.0", "0", "4: ACTIVE", "40 Gb/sec (4X QDR)",
           "Ethernet");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void Write(const std::filesystem::path& p, const std::string& text) {
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  }
  void Device(const std::string& name, const std::string& guid, const std::string& bus,
              const std::string& numa, const std::string& state, const std::string& rate,
              const std::string& layer) {
    auto pci = root_ / "devices" / bus;
    Write(pci / "numa_node", numa);
    auto dev = root_ / "class" / name;
    Write(dev / "node_guid", guid);
    std::filesystem::create_directory_symlink(pci, dev / "device");
    Write(dev / "ports" / "1" / "state", state);
    Write(dev / "ports" / "1" / "rate", rate);
    Write(dev / "ports" / "1" / "link_layer", layer);
  }
  std::filesystem::path root_;
};

TEST_F(InfinibandTest, PortsStateRateAndLinkLayer) {
  auto devs = ProbeInfiniband((root_ / "class").string());
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_EQ(devs[0].name, "mlx5_0");
  EXPECT_EQ(devs[0].node_guid, "0015:5dff:fe33:ff18");
  EXPECT_EQ(devs[0].pci_bus_id, "0101:00:00.0");
  EXPECT_EQ(devs[0].numa, -1);
  ASSERT_EQ(devs[0].ports.size(), 1u);
  EXPECT_EQ(devs[0].ports[0].state, "ACTIVE");
  EXPECT_DOUBLE_EQ(devs[0].ports[0].rate_gbps, 200);
  EXPECT_EQ(devs[0].ports[0].link_layer, "InfiniBand");
  EXPECT_EQ(devs[1].numa, 0);
  EXPECT_EQ(devs[1].ports[0].link_layer, "Ethernet") << "RoCE: not part of an IB fabric";
  EXPECT_TRUE(ProbeInfiniband((root_ / "nothing").string()).empty()) << "no HCAs is no error";
  // The GUIDs are the ones `ibv_devices` printed on that VM (it writes them without colons).
  std::ifstream in(std::string(MUSTER_SOURCE_DIR) +
                   "/tests/data/ib/ibv_devices_azure-hb120rs-v3.txt");
  std::map<std::string, std::string> listed;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string name, guid;
    if (f >> name >> guid && name.rfind("mlx5_", 0) == 0) listed[name] = guid;
  }
  ASSERT_EQ(listed.size(), 2u);
  for (const auto& d : devs) {
    std::string bare = d.node_guid;
    bare.erase(std::remove(bare.begin(), bare.end(), ':'), bare.end());
    EXPECT_EQ(listed[d.name], bare) << d.name;
  }
}

}  // namespace
}  // namespace muster::agent
