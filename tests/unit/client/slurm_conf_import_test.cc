// `muster import-slurm-conf` on three representative sites (tests/data/slurm-conf): an H100
// cluster with a fat tree, a MIG/shard cluster whose GPU types come from gres.conf, and a shared
// cluster with priority tiers, preemption and licenses. Each import must load as a muster.toml
// and say what it could not carry.
#include "muster/client/slurm_conf_import.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "muster/common/config.h"

namespace muster::client {
namespace {

std::string Data(const std::string& rel) {
  std::ifstream in(std::string(MUSTER_SOURCE_DIR) + "/tests/data/slurm-conf/" + rel);
  EXPECT_TRUE(in) << rel;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Imported {
  SlurmConfImport out;
  Config config;
};

Imported Import(const SlurmConfFiles& files) {
  auto r = ImportSlurmConf(files);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  auto c = ParseConfig(r->toml, "imported.toml");
  EXPECT_TRUE(c.ok()) << c.status().ToString() << "\n" << r->toml;
  return {*r, c.ok() ? *c : Config{}};
}

// The not-carried line for `setting` (its "KEY=VALUE" start), or "" when there is none.
std::string LeftBehind(const SlurmConfImport& out, const std::string& setting) {
  for (const std::string& n : out.not_carried) {
    if (n.find(": " + setting) != std::string::npos) return n;
  }
  return "";
}

TEST(SlurmConfImportTest, AnH100ClusterWithAFatTree) {
  SlurmConfFiles f;
  f.slurm_conf = Data("gpu-tree/slurm.conf");
  f.gres_conf = Data("gpu-tree/gres.conf");
  f.topology_conf = Data("gpu-tree/topology.conf");
  const Imported r = Import(f);
  const Config& c = r.config;
  EXPECT_EQ(c.cluster_name, "atlas");
  EXPECT_EQ(c.controller.agent_address, "head01:6817");
  EXPECT_EQ(c.controller.api_address, "head01:6819");
  ASSERT_EQ(c.nodes.size(), 32u);
  const NodeConfig& n = c.nodes[0];
  EXPECT_EQ(n.name, "gpu001");
  EXPECT_EQ(n.cpus, 112u) << "Sockets x CoresPerSocket x ThreadsPerCore";
  EXPECT_EQ(n.memory_mb, 2'000'000u);
  EXPECT_EQ(n.gpus, 8u);
  EXPECT_EQ(n.gpu_type, "h100");
  EXPECT_EQ(n.features, (std::vector<std::string>{"h100", "ib", "nvl8"}));
  EXPECT_EQ(n.tmp_disk_mb, 3'500'000u);
  EXPECT_EQ(n.topology, "spine1/leaf1");
  EXPECT_EQ(c.FindNode("gpu009")->topology, "spine1/leaf2");
  EXPECT_EQ(c.FindNode("gpu032")->topology, "spine1/leaf4");
  // Partitions with PartitionName=DEFAULT's MaxTime, their own where they set it.
  ASSERT_EQ(c.partitions.size(), 2u);
  EXPECT_EQ(c.partitions[0].name, "train");
  EXPECT_TRUE(c.partitions[0].is_default);
  EXPECT_EQ(c.partitions[0].nodes.size(), 32u);
  EXPECT_EQ(c.partitions[0].max_time_ms, 2 * 86'400'000);
  EXPECT_EQ(c.partitions[1].max_time_ms, 30 * 60'000);
  EXPECT_EQ(c.partitions[1].default_time_ms, 10 * 60'000);
  EXPECT_EQ(c.partitions[1].priority_tier, 10u);
  // Scheduling and the agents' programs.
  const SchedulingConfig& s = c.scheduling;
  EXPECT_EQ(s.priority_weight_fairshare, 100'000u);
  EXPECT_EQ(s.priority_weight_size, 500u);
  EXPECT_EQ(s.priority_weight_qos, 2000u);
  EXPECT_EQ(s.fairshare_half_life_ms, 14ULL * 86'400'000);
  EXPECT_EQ(s.priority_max_age_ms, 7ULL * 86'400'000);
  EXPECT_EQ(s.kill_grace_ms, 60'000u);
  EXPECT_EQ(s.finished_job_retention_ms, 600'000u);
  EXPECT_EQ(s.node_down_ms, 300'000u);
  EXPECT_EQ(s.max_job_count, 200'000u);
  EXPECT_EQ(s.max_array_size, 10'001u);
  EXPECT_EQ(s.max_switch_wait_ms, 600'000u);
  EXPECT_EQ(c.agent.prolog, "/etc/slurm/prolog.d/gpu-reset.sh");
  EXPECT_EQ(c.agent.epilog_timeout_s, 180u);
  EXPECT_EQ(c.agent.health_check_program, "/usr/sbin/nhc");
  EXPECT_EQ(c.agent.reboot_program, "/usr/sbin/reboot");
  EXPECT_EQ(c.scheduling.reboot_timeout_s, 900u);
  EXPECT_EQ(c.agent.health_check_interval_s, 600u);
  EXPECT_EQ(c.controller.mail_prog, "/usr/bin/s-nail");
  // Named, with file and line, and why.
  EXPECT_NE(LeftBehind(r.out, "SlurmctldHost=head02(10.10.0.2)").find("slurm.conf:4: "),
            std::string::npos);
  EXPECT_NE(LeftBehind(r.out, "SlurmctldHost=head02").find("hot standby"), std::string::npos);
  EXPECT_NE(LeftBehind(r.out, "SchedulerParameters=bf_max_job_test=500"), "");
  EXPECT_NE(LeftBehind(r.out, "SchedulerParameters=bf_window=2880"), "");
  EXPECT_NE(LeftBehind(r.out, "StateSaveLocation=").find("not needed"), std::string::npos);
  EXPECT_NE(LeftBehind(r.out, "PriorityJobFactor=10"), "");
  EXPECT_NE(LeftBehind(r.out, "LinkSpeed=400").find("topology.conf:2:"), std::string::npos);
  EXPECT_EQ(LeftBehind(r.out, "AutoDetect=nvml"), "") << "musterd's own discovery";
  EXPECT_EQ(LeftBehind(r.out, "State=UNKNOWN"), "");
  // The file says so too.
  EXPECT_NE(r.out.toml.find("#   slurm.conf:4: SlurmctldHost=head02"), std::string::npos);
}

TEST(SlurmConfImportTest, MigSlicesShardsAndGpuTypesFromGresConf) {
  SlurmConfFiles f;
  f.slurm_conf = Data("mig/slurm.conf");
  f.gres_conf = Data("mig/gres.conf");
  const Imported r = Import(f);
  const Config& c = r.config;
  ASSERT_EQ(c.nodes.size(), 14u);
  const NodeConfig* mig = c.FindNode("mig01");
  ASSERT_NE(mig, nullptr);
  EXPECT_EQ(mig->gpus, 0u);
  ASSERT_EQ(mig->gres.size(), 2u);
  EXPECT_EQ(mig->gres[0].name, "gpu");
  EXPECT_EQ(mig->gres[0].type, "1g.10gb");
  EXPECT_EQ(mig->gres[0].count, 14u);
  EXPECT_EQ(mig->gres[1].type, "3g.40gb");
  const NodeConfig* whole = c.FindNode("a100-02");
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(whole->gpus, 8u);
  EXPECT_EQ(whole->gpu_type, "a100") << "slurm.conf says gpu:8; gres.conf says which";
  const NodeConfig* l4 = c.FindNode("l4-08");
  ASSERT_NE(l4, nullptr);
  EXPECT_EQ(l4->gpu_type, "l4");
  EXPECT_EQ(l4->shards_per_gpu, 8u) << "shard:32 over 4 GPUs";
  EXPECT_EQ(c.scheduling.order, "fcfs") << "priority/basic";
  EXPECT_TRUE(c.private_data.jobs);
  EXPECT_TRUE(c.private_data.usage);
  EXPECT_FALSE(c.private_data.accounts);
  EXPECT_EQ(c.partitions.size(), 3u);
  EXPECT_EQ(c.partitions[2].max_time_ms, 0) << "UNLIMITED";
  EXPECT_NE(LeftBehind(r.out, "Gres=gpu:l4:4,shard:32,mps:400").find("MPS"), std::string::npos);
  EXPECT_EQ(LeftBehind(r.out, "Weight=10"), "") << "node weights are carried";
  EXPECT_EQ(l4->weight, 10u);
  EXPECT_EQ(whole->weight, 1u) << "Slurm's default weight";
  EXPECT_NE(LeftBehind(r.out, "AllowGroups=ml-staff").find("by group"), std::string::npos);
  EXPECT_NE(LeftBehind(r.out, "OverSubscribe=FORCE:4"), "");
  EXPECT_NE(LeftBehind(r.out, "PrivateData=cloud"), "");
}

TEST(SlurmConfImportTest, TiersPreemptionNodeSetsAndLicenses) {
  SlurmConfFiles f;
  f.slurm_conf = Data("tiers/slurm.conf");
  const Imported r = Import(f);
  const Config& c = r.config;
  EXPECT_EQ(c.controller.agent_address, "sched1:6817") << "ControlMachine, the old name";
  ASSERT_EQ(c.nodes.size(), 80u);
  EXPECT_EQ(c.FindNode("c064")->cpus, 128u);
  const NodeConfig* g = c.FindNode("g16");
  EXPECT_EQ(g->gpus, 4u);
  EXPECT_EQ(g->gpu_type, "a40");
  ASSERT_EQ(g->gres.size(), 1u);
  EXPECT_EQ(g->gres[0].name, "nvme");
  EXPECT_EQ(g->gres[0].type, "local");
  EXPECT_EQ(g->gres[0].count, 2u);
  ASSERT_EQ(c.partitions.size(), 4u);
  const PartitionConfig* gpu = c.FindPartition("gpu");
  EXPECT_EQ(gpu->nodes.size(), 16u) << "NodeSet=gpunodes by Feature=gpu";
  EXPECT_EQ(c.FindPartition("priority")->nodes.size(), 32u);
  EXPECT_EQ(c.FindPartition("priority")->preempt_mode, "off");
  // PreemptMode=REQUEUE for every partition without its own, as preempt/partition_prio does.
  EXPECT_EQ(c.FindPartition("cpu")->preempt_mode, "requeue");
  const PartitionConfig* scavenger = c.FindPartition("scavenger");
  EXPECT_EQ(scavenger->nodes.size(), 80u);
  EXPECT_EQ(scavenger->priority_tier, 1u);
  EXPECT_EQ(scavenger->preempt_mode, "requeue");
  EXPECT_EQ(scavenger->grace_time_ms, 120'000u);
  EXPECT_EQ(c.scheduling.preempt_min_runtime_ms, 600'000u);
  EXPECT_TRUE(c.scheduling.enable_user_top);
  EXPECT_TRUE(c.scheduling.kill_invalid_depend);
  EXPECT_EQ(c.scheduling.propagate_resource_limits_except, "MEMLOCK");
  EXPECT_EQ(c.licenses,
            (std::map<std::string, uint32_t>{{"ansys", 4}, {"comsol", 1}, {"matlab", 20}}));
  EXPECT_NE(LeftBehind(r.out, "PreemptMode=REQUEUE,GANG").find("GANG"), std::string::npos);
  EXPECT_NE(LeftBehind(r.out, "AllowAccounts=paid"), "");
  EXPECT_NE(LeftBehind(r.out, "PriorityFlags=SMALL_RELATIVE_TO_TIME"), "");
  EXPECT_EQ(LeftBehind(r.out, "PriorityFlags=FAIR_TREE"), "");
  EXPECT_NE(LeftBehind(r.out, "PriorityWeightTRES="), "");
  EXPECT_NE(LeftBehind(r.out, "DefMemPerGPU=64000"), "");
  EXPECT_NE(LeftBehind(r.out, "JobSubmitPlugins=lua"), "");
  EXPECT_NE(LeftBehind(r.out, "SchedulerParameters=bf_continue"), "");
}

TEST(SlurmConfImportTest, WhatSlurmWouldRefuseIsRefusedWithItsLine) {
  SlurmConfFiles f;
  f.slurm_conf = "NodeName=n[1-2] CPUs=4\nPartitionName=p Nodes=n[1-3]\n";
  auto r = ImportSlurmConf(f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("slurm.conf:2: partition p: unknown node n3"),
            std::string::npos)
      << r.status().message();

  f.slurm_conf = "ClusterName=x\nNodeName=n1 CPUs=4 \\\n  RealMemory\n";
  r = ImportSlurmConf(f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("slurm.conf:2: expected KEY=VALUE, got 'RealMemory'"),
            std::string::npos)
      << r.status().message();

  f.slurm_conf = "NodeName=n1 CPUs=4\nPartitionName=p Nodes=n1 MaxTime=forever\n";
  r = ImportSlurmConf(f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("slurm.conf:2: MaxTime"), std::string::npos)
      << r.status().message();

  f.slurm_conf = "NodeName=n1 CPUs=4\nNodeName=n1 CPUs=8\n";
  r = ImportSlurmConf(f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("node n1 is defined twice"), std::string::npos);
}

// What a hostile or broken file cannot do: crash the importer, add keys through a file name or
// a value, or loop in its topology.
TEST(SlurmConfImportTest, HostileInputIsRefusedOrKeptInsideItsString) {
  SlurmConfFiles f;
  f.slurm_conf =
      "\"\"\nNodeName=n1 CPUs=2\nHealthCheckProgram=/opt/a\x7f"
      "b\nPartitionName=p Nodes=n1\n";
  f.slurm_conf_name = "s\nadmins = [\"mallory\"]\n#.conf";
  const Imported r = Import(f);
  EXPECT_TRUE(r.config.admins.empty()) << r.out.toml;
  EXPECT_EQ(r.config.agent.health_check_program,
            "/opt/a\x7f"
            "b");
  EXPECT_EQ(r.out.toml.find("\nadmins"), std::string::npos) << r.out.toml;

  f = {};
  f.slurm_conf = "NodeName=n1 CPUs=2\nPartitionName=p Nodes=n1\n";
  f.topology_conf = "SwitchName=l Nodes=n1\nSwitchName=a Switches=l,b\nSwitchName=b Switches=a\n";
  auto cycle = ImportSlurmConf(f);
  ASSERT_FALSE(cycle.ok());
  EXPECT_NE(cycle.status().message().find("is above itself"), std::string::npos)
      << cycle.status().message();

  std::string deep = "SwitchName=s0 Nodes=n1\n";
  for (int i = 1; i <= 70; ++i) {
    deep += "SwitchName=s" + std::to_string(i) + " Switches=s" + std::to_string(i - 1) + "\n";
  }
  f.topology_conf = deep;
  auto too_deep = ImportSlurmConf(f);
  ASSERT_FALSE(too_deep.ok());
  EXPECT_NE(too_deep.status().message().find("levels deep"), std::string::npos);

  f.topology_conf.clear();
  f.slurm_conf = "NodeName=n1 Sockets=4096 CoresPerSocket=4096 ThreadsPerCore=64\n";
  auto huge = ImportSlurmConf(f);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("CPUs per node"), std::string::npos);
}

// Values muster.toml cannot take as they are: named, and clamped or left out; Include lines
// are named as not followed.
TEST(SlurmConfImportTest, OutOfRangeValuesAndIncludesAreNamed) {
  SlurmConfFiles f;
  f.slurm_conf =
      "Include /etc/slurm/nodes.conf\nSlurmdTimeout=0\nKillWait=7200\nMinJobAge=0\n"
      "NodeName=n1 CPUs=2 Gres=bandwidth:lustre:no_consume:4\nPartitionName=p Nodes=n1\n";
  const Imported r = Import(f);
  EXPECT_NE(LeftBehind(r.out, "Include=/etc/slurm/nodes.conf").find("slurm.conf:1: "),
            std::string::npos);
  EXPECT_NE(LeftBehind(r.out, "Include=").find("not followed"), std::string::npos);
  EXPECT_NE(LeftBehind(r.out, "SlurmdTimeout=0"), "");
  EXPECT_EQ(r.config.scheduling.node_down_ms, SchedulingConfig{}.node_down_ms);
  EXPECT_NE(LeftBehind(r.out, "KillWait=7200").find("3600 s is used"), std::string::npos);
  EXPECT_EQ(r.config.scheduling.kill_grace_ms, 3'600'000u);
  EXPECT_NE(LeftBehind(r.out, "MinJobAge=0"), "");
  EXPECT_NE(LeftBehind(r.out, "Gres=bandwidth:lustre:no_consume:4").find("not consumed"),
            std::string::npos);
  EXPECT_TRUE(r.config.nodes[0].gres.empty());
}

TEST(SlurmConfImportTest, QuotedValuesCommentsAndContinuations) {
  SlurmConfFiles f;
  f.slurm_conf =
      "ClusterName=\"with space\"  # a comment\n"
      "HealthCheckProgram=\"/opt/nhc/run#1\"\n"
      "NodeName=n[1-2] CPUs=4 \\\n"
      "   RealMemory=8000   # continued\n"
      "PartitionName=p Nodes=n[1,2] Default=YES\n";
  const Imported r = Import(f);
  EXPECT_EQ(r.config.cluster_name, "with space");
  EXPECT_EQ(r.config.agent.health_check_program, "/opt/nhc/run#1");
  ASSERT_EQ(r.config.nodes.size(), 2u);
  EXPECT_EQ(r.config.nodes[1].memory_mb, 8000u);
  ASSERT_EQ(r.config.partitions.size(), 1u);
  EXPECT_EQ(r.config.partitions[0].nodes.size(), 2u) << "a comma inside a hostlist's brackets";
  EXPECT_TRUE(r.out.not_carried.empty()) << ::testing::PrintToString(r.out.not_carried);
}

}  // namespace
}  // namespace muster::client
