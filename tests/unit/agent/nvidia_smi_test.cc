// The nvidia-smi capture parsers against every captured output in tests/data/nvidia-smi.
#include "nvidia_smi.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "inventory.h"

namespace muster::agent {
namespace {

std::string Data(const std::string& name) {
  std::ifstream in(std::string(MUSTER_SOURCE_DIR) + "/tests/data/nvidia-smi/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << name;
  return ss.str();
}

const char* kMig = "L_mig_2xGH200_7x1g.12gb-each.txt";
const char* kQueryH100 = "q_h100-sxm5_single-gpu_ecc-remap-fabric_princeton-pli.txt";
const char* kTopoA100 = "topo-m_dgx-a100_8xA100-SXM4_12xmlx5.txt";
const char* kTopoH100 = "topo-m_hgx-h100_8xH100-SXM5_6xNIC_princeton-pli.txt";
const char* kTopoDgx1 = "topo-mp_dgx1_8xV100_4xmlx5_pcie-paths-only.txt";

TEST(NvidiaSmiList, MigInstancesOfTwoGh200) {
  auto gpus = ParseNvidiaSmiList(Data(kMig));
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 2u);
  const SmiListedGpu& g1 = (*gpus)[1];
  EXPECT_EQ(g1.index, 1u);
  EXPECT_EQ(g1.model, "NVIDIA GH200 96GB HBM3");
  EXPECT_EQ(g1.uuid, "GPU-9e6df7cb-64d4-5e53-2b1d-cee9e58aeb94");
  ASSERT_EQ(g1.migs.size(), 7u);
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(g1.migs[i].index(), i) << "numbering restarts for each GPU";
    EXPECT_EQ(g1.migs[i].profile(), "1g.12gb");
    EXPECT_EQ(g1.migs[i].memory_mb(), 12u * 1024);
  }
  EXPECT_EQ((*gpus)[0].migs[0].uuid(), "MIG-4d806f22-346a-5a1d-ac01-86b505cdf485");
  EXPECT_EQ(g1.migs[6].uuid(), "MIG-c7cbc24b-a93f-5ff3-b388-deba1f3ac17e");
}

TEST(NvidiaSmiList, MalformedLinesAreErrorsWithTheLine) {
  auto bad = ParseNvidiaSmiList("GPU 0: NVIDIA A100 (UUID: GPU-1)\nsomething else\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(ParseNvidiaSmiList("  MIG 1g.5gb Device 0: (UUID: MIG-1)\n").ok());
  EXPECT_FALSE(ParseNvidiaSmiList("GPU 1: NVIDIA A100 (UUID: GPU-1)\n").ok())
      << "indices must start at 0";
}

TEST(NvidiaSmiTopo, DgxA100NvSwitchTwelveHcasTwoCpuRanges) {
  auto t = ParseNvidiaSmiTopo(Data(kTopoA100));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->gpu_cells.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    for (size_t j = 0; j < 8; ++j) EXPECT_EQ(t->gpu_cells[i][j], i == j ? "X" : "NV12");
  }
  EXPECT_EQ(t->cpu_affinity[0], "48-63,176-191");
  EXPECT_EQ(t->cpu_affinity[7], "80-95,208-223");
  EXPECT_EQ(t->numa_affinity, (std::vector<int>{3, 3, 1, 1, 7, 7, 5, 5}));
  ASSERT_EQ(t->nics.size(), 12u);
  EXPECT_EQ(t->nics[11], "mlx5_11");
  EXPECT_EQ(t->nic_cells[0],
            (std::vector<std::string>{"PXB", "PXB", "SYS", "SYS", "SYS", "SYS", "SYS", "SYS"}));
  EXPECT_EQ(t->nic_cells[8][6], "PXB");
}

TEST(NvidiaSmiTopo, HgxH100EmptyCpuAffinityAndNicLegend) {
  auto t = ParseNvidiaSmiTopo(Data(kTopoH100));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->gpu_cells.size(), 8u);
  EXPECT_EQ(t->gpu_cells[3][5], "NV18");
  for (size_t g = 0; g < 4; ++g) EXPECT_EQ(t->cpu_affinity[g], "") << "GPU" << g;
  for (size_t g = 4; g < 8; ++g) EXPECT_EQ(t->cpu_affinity[g], "1") << "GPU" << g;
  EXPECT_EQ(t->numa_affinity, (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(t->nics,
            (std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5"}));
  EXPECT_EQ(t->nic_cells[3][4], "PIX");
  EXPECT_EQ(t->nic_cells[5][6], "PIX");
  EXPECT_EQ(t->nic_cells[5][0], "NODE");
}

TEST(NvidiaSmiTopo, Dgx1PcieOnlyGivesSwitchHostAndSystemLinks) {
  auto gpus = GpusFromNvidiaSmi("", Data(kTopoDgx1), "");
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 8u);
  auto link = [&](size_t i, uint32_t peer) {
    for (const auto& l : (*gpus)[i].links()) {
      if (l.peer_index() == peer) return l.type();
    }
    return v1::GPU_LINK_UNSPECIFIED;
  };
  EXPECT_EQ(link(0, 1), v1::GPU_LINK_PCIE_SWITCH);
  EXPECT_EQ(link(0, 2), v1::GPU_LINK_PCIE_HOST);
  EXPECT_EQ(link(0, 4), v1::GPU_LINK_SYSTEM);
  EXPECT_EQ(link(6, 7), v1::GPU_LINK_PCIE_SWITCH);
  EXPECT_EQ((*gpus)[5].numa_node(), 1);
  EXPECT_EQ((*gpus)[5].cpu_affinity(), "20-39,60-79");
}

TEST(NvidiaSmiTopo, MalformedMatrices) {
  EXPECT_FALSE(ParseNvidiaSmiTopo("GPU0 X\n").ok()) << "no header";
  EXPECT_FALSE(ParseNvidiaSmiTopo("\tGPU0\tGPU1\nGPU0\t X \tNV4\n").ok()) << "GPU1 row missing";
  auto weird = GpusFromNvidiaSmi("", "\tGPU0\tGPU1\nGPU0\t X \tQQQ\nGPU1\tQQQ\t X \n", "");
  ASSERT_FALSE(weird.ok());
  EXPECT_NE(weird.status().message().find("QQQ"), std::string::npos);
}

TEST(NvidiaSmiQuery, H100SxmFieldsAndHealth) {
  auto q = ParseNvidiaSmiQuery(Data(kQueryH100));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ASSERT_EQ(q->size(), 1u);
  const SmiQueriedGpu& g = (*q)[0];
  EXPECT_EQ(g.pci_bus_id, "00000000:19:00.0");
  EXPECT_EQ(g.model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g.uuid, "GPU-10f35015-e921-bfab-2eb8-4e9b6664d5f1");
  EXPECT_EQ(g.minor_number, 0);
  EXPECT_FALSE(g.mig_enabled);
  EXPECT_EQ(g.memory_mb, 81559u) << "FB memory, not BAR1";
  EXPECT_EQ(g.volatile_uncorrectable_ecc, 0u);
  EXPECT_FALSE(g.remapped_rows_pending);
  EXPECT_FALSE(g.retired_pages_pending) << "N/A on Hopper";
  EXPECT_EQ(g.fabric_state, "Completed");
  EXPECT_EQ(g.fabric_cluster_uuid, "") << "not a multi-node NVLink system";
  EXPECT_EQ(HealthFromQuery(g), "");

  auto gpus = GpusFromNvidiaSmi("", "", Data(kQueryH100));
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ((*gpus)[0].type(), "h100");
  EXPECT_EQ((*gpus)[0].memory_mb(), 81559u);
  EXPECT_EQ((*gpus)[0].pci_bus_id(), "00000000:19:00.0");
}

// The same capture with the faults a broken GPU shows: counters and flags in their sections.
std::string WithLine(std::string text, const std::string& section, const std::string& key,
                     const std::string& value) {
  size_t s = text.find("    " + section + "\n");
  EXPECT_NE(s, std::string::npos) << section;
  size_t k = text.find(key, s);
  size_t colon = text.find(": ", k);
  size_t eol = text.find('\n', colon);
  return text.substr(0, colon + 2) + value + text.substr(eol);
}

TEST(NvidiaSmiQuery, FaultsMakeTheGpuUnhealthy) {
  const std::string base = Data(kQueryH100);
  auto health = [](const std::string& text) {
    auto q = ParseNvidiaSmiQuery(text);
    return q.ok() && q->size() == 1 ? HealthFromQuery((*q)[0]) : "parse error";
  };
  EXPECT_EQ(health(WithLine(base, "ECC Errors", "DRAM Uncorrectable", "2")),
            "2 uncorrectable ECC error(s)");
  EXPECT_EQ(health(WithLine(base, "Remapped Rows", "Pending", "Yes")),
            "row remapping pending (the GPU needs a reset)");
  EXPECT_EQ(health(WithLine(base, "Remapped Rows", "Remapping Failure Occurred", "Yes")),
            "row remapping failed");
  EXPECT_EQ(health(WithLine(base, "GPU Reset Status", "Reset Required", "Yes")),
            "the GPU needs a reset");
  // Aggregate (lifetime) counters do not make a GPU unhealthy now.
  std::string aggregate = base;
  size_t agg = aggregate.find("        Aggregate\n");
  size_t dram = aggregate.find("DRAM Uncorrectable", agg);
  aggregate.replace(aggregate.find(": 0", dram), 3, ": 5");
  EXPECT_EQ(health(aggregate), "");
  EXPECT_FALSE(ParseNvidiaSmiQuery("this is not nvidia-smi -q output\n").ok());
}

TEST(NvidiaSmiCombined, CapturesMustAgreeOnTheGpus) {
  auto mig = GpusFromNvidiaSmi(Data(kMig), "", "");
  ASSERT_TRUE(mig.ok()) << mig.status().ToString();
  ASSERT_EQ(mig->size(), 2u);
  EXPECT_TRUE((*mig)[0].mig_enabled());
  EXPECT_EQ((*mig)[0].mig_devices_size(), 7);
  EXPECT_EQ((*mig)[0].type(), "gh200");
  auto a100 = GpusFromNvidiaSmi("", Data(kTopoA100), "");
  ASSERT_TRUE(a100.ok());
  const v1::GpuDevice& g0 = (*a100)[0];
  ASSERT_EQ(g0.links_size(), 7);
  EXPECT_EQ(g0.links(0).type(), v1::GPU_LINK_NVLINK);
  EXPECT_EQ(g0.links(0).count(), 12u);
  EXPECT_EQ((*a100)[2].numa_node(), 1);
  auto clash = GpusFromNvidiaSmi("", Data(kTopoH100), Data(kQueryH100));
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.status().message().find("disagree"), std::string::npos);
}

TEST(NvidiaSmiCombined, FixtureFileNamesCapturesRelativeToItself) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("muster-smi-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "L.txt") << Data(kMig);
  std::ofstream(dir / "node.toml") << "[node]\ncpus = 144\n[nvidia_smi]\nlist = \"L.txt\"\n";
  auto f = LoadGpuFixture((dir / "node.toml").string());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->cpus, 144u);
  ASSERT_EQ(f->gpus.size(), 2u);
  EXPECT_EQ(f->gpus[1].mig_devices(3).uuid(), "MIG-81544523-8683-58cd-8b72-5d797baf35de");
  std::ofstream(dir / "bad.toml") << "[nvidia_smi]\nlist = \"missing.txt\"\n";
  auto bad = LoadGpuFixture((dir / "bad.toml").string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("missing.txt"), std::string::npos);
  std::ofstream(dir / "both.toml") << "[gpus]\ncount = 1\n[nvidia_smi]\nlist = \"L.txt\"\n";
  EXPECT_FALSE(LoadGpuFixture((dir / "both.toml").string()).ok());
  fs::remove_all(dir);
}

TEST(Xid, OnlyHardwareXidsAreCritical) {
  EXPECT_EQ(CriticalXidDescription(79), "fallen off the bus");
  EXPECT_EQ(CriticalXidDescription(48), "double-bit ECC error");
  EXPECT_EQ(CriticalXidDescription(13), "") << "graphics engine exception: the program's fault";
  EXPECT_EQ(CriticalXidDescription(31), "") << "MMU fault: the program's fault";
}

}  // namespace
}  // namespace muster::agent
