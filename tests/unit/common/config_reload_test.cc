#include "muster/common/config_reload.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace muster {
namespace {

// A small cluster; `extra` is appended (TOML tables after the base ones).
std::string ClusterToml(const std::string& controller, const std::string& nodes_gpus,
                        const std::string& extra) {
  return R"(
cluster_name = "c1"
admins = ["alice"]
[controller]
socket = "/tmp/x.sock"
agent_address = "127.0.0.1:6817"
)" + controller +
         R"(
[scheduling]
backfill_depth = 100
)" + extra +
         R"(
[[nodes]]
names = "n[1-2]"
cpus = 8
memory_mb = 16000
gpus = )" +
         nodes_gpus + R"(
gpu_type = "h100"
features = ["ib"]
[[partition]]
name = "gpu"
nodes = "n[1-2]"
default = true
)";
}

Config Parsed(const std::string& text) {
  auto c = ParseConfig(text, "muster.toml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : Config{};
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(ConfigReloadTest, NothingChangedSaysSo) {
  const Config a = Parsed(ClusterToml("", "4", ""));
  const ConfigReload r = MergeReloadedConfig(a, a);
  EXPECT_TRUE(r.changes.empty());
  EXPECT_TRUE(r.restart_only.empty());
  // An unchanged file gives the running config back.
  EXPECT_TRUE(r.config.controller == a.controller);
  EXPECT_TRUE(r.config.scheduling == a.scheduling);
  EXPECT_EQ(r.config.nodes, a.nodes);
  EXPECT_EQ(r.config.partitions, a.partitions);
  EXPECT_EQ(r.config.admins, a.admins);
}

TEST(ConfigReloadTest, WhatOnlyAStartSetsUpKeepsItsRunningValueAndIsNamed) {
  const Config running = Parsed(ClusterToml("log_level = \"info\"\n", "4", ""));
  Config next = Parsed(
      ClusterToml("log_level = \"debug\"\napi_address = \"head:6819\"\nuser_request_rate = 5\n",
                  "4", "[munge]\nsocket = \"/elsewhere\"\n"));
  next.cluster_name = "renamed";
  const ConfigReload r = MergeReloadedConfig(running, next);
  EXPECT_TRUE(Has(r.restart_only, "controller.api_address"));
  EXPECT_TRUE(Has(r.restart_only, "controller.user_request_rate"));
  EXPECT_TRUE(Has(r.restart_only, "munge"));
  EXPECT_TRUE(Has(r.restart_only, "cluster_name"));
  EXPECT_FALSE(Has(r.restart_only, "controller.log_level")) << "the log level changes at once";
  EXPECT_EQ(r.config.controller.api_address, "");
  EXPECT_EQ(r.config.controller.user_request_rate, running.controller.user_request_rate);
  EXPECT_EQ(r.config.munge.socket, running.munge.socket);
  EXPECT_EQ(r.config.cluster_name, "c1");
  EXPECT_EQ(r.config.controller.log_level, "debug");
  EXPECT_TRUE(Has(r.changes, "controller.log_level"));
}

TEST(ConfigReloadTest, NodesPartitionsAndSchedulingChangesAreEachNamed) {
  const Config running = Parsed(ClusterToml("", "4", ""));
  Config next = Parsed(ClusterToml("", "8", R"(
[[nodes]]
names = "n3"
cpus = 4
[[partition]]
name = "debug"
nodes = "n3"
)"));
  next.scheduling.backfill_depth = 7;
  next.admins.push_back("bob");
  const ConfigReload r = MergeReloadedConfig(running, next);
  EXPECT_TRUE(Has(r.changes, "node n1 changed: gpus")) << ::testing::PrintToString(r.changes);
  EXPECT_TRUE(Has(r.changes, "node n2 changed: gpus"));
  EXPECT_TRUE(Has(r.changes, "node n3 added"));
  EXPECT_TRUE(Has(r.changes, "partition debug added"));
  EXPECT_TRUE(Has(r.changes, "scheduling.backfill_depth"));
  EXPECT_TRUE(Has(r.changes, "admins"));
  EXPECT_TRUE(r.restart_only.empty()) << ::testing::PrintToString(r.restart_only);
  EXPECT_EQ(r.config.nodes.size(), 3u);
  EXPECT_EQ(r.config.scheduling.backfill_depth, 7u);

  // And back: what the new file no longer has is named as removed.
  const ConfigReload back = MergeReloadedConfig(r.config, running);
  EXPECT_TRUE(Has(back.changes, "node n3 removed")) << ::testing::PrintToString(back.changes);
  EXPECT_TRUE(Has(back.changes, "partition debug removed"));
}

TEST(ConfigReloadTest, TheControllerKeepsItsOwnAgentSection) {
  const Config running = Parsed(ClusterToml("", "4", ""));
  Config next = running;
  next.agent.prolog = "/etc/muster/prolog";
  const ConfigReload r = MergeReloadedConfig(running, next);
  EXPECT_TRUE(r.changes.empty()) << "[agent] is read by the agents themselves";
  EXPECT_EQ(r.config.agent.prolog, "");
}

}  // namespace
}  // namespace muster
