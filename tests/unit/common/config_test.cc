#include "muster/common/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace muster {
namespace {

constexpr const char* kGood = R"(
cluster_name = "test"
admins = ["alice"]

[controller]
socket = "/tmp/x.sock"
agent_address = "127.0.0.1:0"
state_dir = "/tmp/state"

[scheduling]
kill_grace_ms = 2000
heartbeat_interval_ms = 500
node_not_responding_ms = 2000
node_down_ms = 4000
max_switch_wait_ms = 60000

[[nodes]]
names = "gpu[01-04]"
cpus = 64
memory_mb = 512000
gpus = 8
gpu_type = "h100"
topology = "spine1/leaf1"
features = ["ib", "nvl72"]
nvlink_domain = "rack1"
mig = ["1g.10gb:7"]
gres = ["nvme:fast:2"]
shards_per_gpu = 4

[[nodes]]
names = "cpu1"
cpus = 32

[[partition]]
name = "gpu"
nodes = "gpu[01-04]"
default = true
max_time = "2-00:00:00"

[[partition]]
name = "all"
nodes = "gpu[01-04],cpu1"
max_time = 60
)";

TEST(ConfigTest, ParsesAFullConfig) {
  auto c = ParseConfig(kGood, "test.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->cluster_name, "test");
  EXPECT_EQ(c->admins, std::vector<std::string>{"alice"});
  EXPECT_EQ(c->controller.socket_path, "/tmp/x.sock");
  EXPECT_EQ(c->scheduling.kill_grace_ms, 2000u);
  ASSERT_EQ(c->nodes.size(), 5u);
  EXPECT_EQ(c->nodes[0].name, "gpu01");
  EXPECT_EQ(c->nodes[3].gpus, 8u);
  EXPECT_EQ(c->nodes[3].topology, "spine1/leaf1");
  EXPECT_EQ(c->nodes[3].features, (std::vector<std::string>{"ib", "nvl72"}));
  EXPECT_EQ(c->nodes[3].nvlink_domain, "rack1");
  EXPECT_EQ(c->nodes[4].nvlink_domain, "");
  EXPECT_EQ(c->scheduling.max_switch_wait_ms, 60'000u);
  ASSERT_EQ(c->nodes[3].gres.size(), 2u);
  EXPECT_EQ(c->nodes[3].gres[0].name, "gpu");
  EXPECT_EQ(c->nodes[3].gres[0].type, "1g.10gb");
  EXPECT_EQ(c->nodes[3].gres[0].count, 7u);
  EXPECT_EQ(c->nodes[3].gres[1].name, "nvme");
  EXPECT_EQ(c->nodes[3].gres[1].type, "fast");
  EXPECT_EQ(c->nodes[3].shards_per_gpu, 4u);
  EXPECT_EQ(c->nodes[4].name, "cpu1");
  EXPECT_EQ(c->nodes[4].gpus, 0u);
  ASSERT_EQ(c->partitions.size(), 2u);
  EXPECT_EQ(c->DefaultPartition()->name, "gpu");
  EXPECT_EQ(c->partitions[0].max_time_ms, 2 * 24 * 3600 * 1000LL);
  EXPECT_EQ(c->partitions[1].max_time_ms, 60 * 60 * 1000LL);
  EXPECT_EQ(c->partitions[1].nodes.size(), 5u);
}

// Every error names the file, the line and the key.
void ExpectError(const std::string& text, const std::string& want_line, const std::string& want) {
  auto c = ParseConfig(text, "bad.toml");
  ASSERT_FALSE(c.ok()) << "accepted:\n" << text;
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("bad.toml:" + want_line), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find(want), std::string::npos) << c.status().message();
}

constexpr const char* kTlsSection =
    "[tls]\nca_file = \"/etc/muster/tls/ca.crt\"\n"
    "controller_cert_file = \"/etc/muster/tls/controller.crt\"\n"
    "controller_key_file = \"/etc/muster/tls/controller.key\"\n"
    "node_cert_file = \"/etc/muster/tls/%n.crt\"\nnode_key_file = \"/etc/muster/tls/%n.key\"\n";

TEST(ConfigTest, MetricsNeedATokenFileAndAnAddress) {
  auto with = [](const std::string& controller) {
    std::string text = kGood;
    text.insert(text.find("[controller]\n") + 13, controller);  // into its [controller]
    return ParseConfig(text, "m.toml");
  };
  auto on = with("metrics_address = \"0.0.0.0:6820\"\nmetrics_token_file = \"/etc/t\"\n");
  ASSERT_TRUE(on.ok()) << on.status().ToString();
  EXPECT_EQ(on->controller.metrics_address, "0.0.0.0:6820");
  EXPECT_EQ(on->controller.metrics_token_file, "/etc/t");
  auto no_token = with("metrics_address = \"0.0.0.0:6820\"\n");
  ASSERT_FALSE(no_token.ok());
  EXPECT_NE(no_token.status().message().find("metrics_token_file"), std::string::npos);
  auto bad = with("metrics_address = \"head01\"\nmetrics_token_file = \"/etc/t\"\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not host:port"), std::string::npos);
  auto off = ParseConfig(kGood, "m.toml");
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->controller.metrics_address, "") << "off unless configured";
}

// Without TLS, an address beyond loopback must be accepted in so many words.
TEST(ConfigTest, AccountsFormOneTreeUnderRoot) {
  auto c = ParseConfig(std::string(kGood) + R"(
[[accounts]]
name = "physics"
parent = "science"
shares = 2
users = ["alice"]
[[accounts]]
name = "science"
description = "the science division"
)",
                       "t.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->accounts.size(), 2u);
  EXPECT_EQ(c->accounts[0].name, "science") << "parents come first";
  EXPECT_EQ(c->accounts[0].parent, "root");
  EXPECT_EQ(c->accounts[0].shares, 1u);
  EXPECT_EQ(c->accounts[1].users, std::vector<std::string>{"alice"});
  auto bad = [](const std::string& accounts) {
    auto r = ParseConfig(std::string(kGood) + accounts, "t.toml");
    EXPECT_FALSE(r.ok()) << accounts;
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_NE(bad("[[accounts]]\nname = \"a\"\nparent = \"b\"\n"
                "[[accounts]]\nname = \"b\"\nparent = \"a\"\n")
                .find("its own descendant (a cycle)"),
            std::string::npos);
  EXPECT_NE(bad("[[accounts]]\nname = \"a\"\nparent = \"nope\"\n").find("is not defined"),
            std::string::npos);
  EXPECT_NE(bad("[[accounts]]\nname = \"a\"\n[[accounts]]\nname = \"a\"\n").find("twice"),
            std::string::npos);
  bad("[[accounts]]\nname = \"root\"\n");
  bad("[[accounts]]\nname = \"a b\"\n");
  bad("[[accounts]]\nname = \"a\"\nshares = 0\n");
  bad("[[accounts]]\nname = \"a\"\nusers = [\"x;rm\"]\n");
  // A QoS limit only, as the live update says.
  EXPECT_NE(bad("[[accounts]]\nname = \"a\"\nmax_gpus_per_user = 8\n").find("a QoS limit"),
            std::string::npos);
}

TEST(ConfigTest, ANonLoopbackAgentAddressNeedsTlsOrInsecure) {
  const std::string base = "[[nodes]]\nnames = \"n1\"\ncpus = 1\nmemory_mb = 1\n";
  for (const char* addr : {"127.0.0.1:6817", "127.3.4.5:1", "[::1]:6817", "localhost:6817"}) {
    auto c = ParseConfig("[controller]\nagent_address = \"" + std::string(addr) + "\"\n" + base,
                         "t.toml");
    EXPECT_TRUE(c.ok()) << addr << ": " << c.status().ToString();
  }
  for (const char* addr : {"10.0.0.10:6817", "0.0.0.0:6817", "head.cluster:6817"}) {
    auto c = ParseConfig("[controller]\nagent_address = \"" + std::string(addr) + "\"\n" + base,
                         "t.toml");
    ASSERT_FALSE(c.ok()) << addr;
    EXPECT_NE(c.status().message().find("insecure = true"), std::string::npos)
        << c.status().message();
    auto ok = ParseConfig(
        "[controller]\nagent_address = \"" + std::string(addr) + "\"\ninsecure = true\n" + base,
        "t.toml");
    EXPECT_TRUE(ok.ok()) << addr << ": " << ok.status().ToString();
    auto tls = ParseConfig(
        "[controller]\nagent_address = \"" + std::string(addr) + "\"\n" + kTlsSection + base,
        "t.toml");
    EXPECT_TRUE(tls.ok()) << addr << ": " << tls.status().ToString();
  }
}

TEST(ConfigTest, TlsNeedsEveryFileAndExpandsTheNodeName) {
  const std::string base = "[[nodes]]\nnames = \"gpu[01-02]\"\ncpus = 1\nmemory_mb = 1\n";
  auto c = ParseConfig(std::string(kTlsSection) + base, "t.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->tls.enabled());
  EXPECT_EQ(c->tls.controller_name, "musterctld");
  EXPECT_EQ(c->tls.NodeCertFile("gpu02"), "/etc/muster/tls/gpu02.crt");
  EXPECT_EQ(c->tls.NodeKeyFile("gpu01"), "/etc/muster/tls/gpu01.key");
  EXPECT_FALSE(ParseConfig(base, "t.toml")->tls.enabled());
  // Leaving one file out is an error naming it.
  std::string partial = kTlsSection;
  partial.erase(partial.find("node_key_file"));
  ExpectError(partial + base, "", "tls.node_key_file is missing");
  // A node may not carry the controller's certificate name.
  ExpectError(std::string(kTlsSection) + "controller_name = \"gpu01\"\n" + base, "",
              "controller's certificate name");
}

TEST(ConfigTest, PrivacyAndPartitionAccess) {
  const std::string base = "[[nodes]]\nnames = \"n1\"\n";
  auto c = ParseConfig("private_data = [\"jobs\"]\noperators = [\"opal\"]\n" + base +
                           "[[partition]]\nname = \"p\"\nnodes = \"n1\"\n"
                           "allowed_uids = [\"alice\", \"1002\"]\ndenied_uids = [\"bob\"]\n",
                       "t.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->private_data.jobs);
  EXPECT_FALSE(c->private_data.usage);
  EXPECT_EQ(c->operators, std::vector<std::string>{"opal"});
  EXPECT_EQ(c->partitions[0].allowed_uids, (std::vector<std::string>{"alice", "1002"}));
  EXPECT_EQ(c->partitions[0].denied_uids, std::vector<std::string>{"bob"});
  EXPECT_FALSE(ParseConfig(base, "t.toml")->private_data.jobs);
  auto all = ParseConfig("private_data = [\"usage\", \"accounts\", \"users\"]\n" + base, "t.toml");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_TRUE(all->private_data.usage && all->private_data.accounts && all->private_data.users);
  EXPECT_FALSE(all->private_data.jobs);
  ExpectError("private_data = [\"jobz\"]\n" + base, "1", "unknown value 'jobz'");
}

// Found by fuzzing: toml++ reached undefined behaviour on some invalid UTF-8.
TEST(ConfigTest, InvalidUtf8IsRefusedWithItsLine) {
  ExpectError("cluster_name = \"a\"\n[[nodes]]\nnames = \"n1\xff\xff\"\n", "3", "not valid UTF-8");
}

// Found by fuzzing: toml++ 3.3 reached undefined behaviour on a non-ASCII character where
// whitespace may stand. Valid TOML has them only in strings and comments, where they still work.
TEST(ConfigTest, NonAsciiOnlyInStringsAndComments) {
  auto ok = ParseConfig(
      "# caf\xc3\xa9\ncluster_name = \"caf\xc3\xa9\"\n[[nodes]]\nnames = \"n1\"\n", "t.toml");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->cluster_name, "caf\xc3\xa9");
  ExpectError("cluster_name = \"a\"\nem = \xc3\xa9\n", "2", "");  // the parser's own words
  ExpectError("x = \"\"\"a\\\n   \xc3\xa9\"\"\"\n", "2", "where TOML allows only ASCII");
}

TEST(ConfigTest, NodeNamesAreSafeAsPaths) {
  for (const char* bad : {"../etc", "a/b", ".hidden", "-rf", "n 1", "n\\x01"}) {
    EXPECT_FALSE(IsValidNodeName(bad)) << bad;
  }
  EXPECT_FALSE(IsValidNodeName(std::string(65, 'a')));
  for (const char* good : {"node1", "gpu-a100.r12_3", "N1"}) EXPECT_TRUE(IsValidNodeName(good));
  ExpectError("[[nodes]]\nnames = \"a/b\"\n", "", "node name 'a/b' is not valid");
}

TEST(ConfigTest, UnknownKeysAreErrorsWithTheirLine) {
  ExpectError("cluster_name = \"x\"\nfrobnicate = 1\n", "2", "unknown key 'frobnicate'");
  ExpectError("[controller]\nsocket = \"/x\"\nsockett = \"/y\"\n", "3", "controller.sockett");
  ExpectError("[[nodes]]\nnames = \"n1\"\ncpu = 4\n", "3", "nodes.cpu");
}

TEST(ConfigTest, BadValuesAreErrorsWithTheirLine) {
  ExpectError("[[nodes]]\nnames = \"n1\"\ncpus = \"four\"\n", "3",
              "nodes.cpus: expected a whole number");
  ExpectError("[[nodes]]\nnames = \"n1\"\ncpus = -4\n", "3", "out of range");
  ExpectError("[[nodes]]\nnames = \"n[1-\"\n", "2", "missing ']'");
  ExpectError("[[partition]]\nname = \"p\"\nmax_time = \"forever\"\n", "3", "partition.max_time");
  ExpectError("[scheduling]\nkill_grace_ms = 1.5\n", "2", "scheduling.kill_grace_ms");
  ExpectError("[scheduling]\norder = \"random\"\n", "2", "expected multifactor, fcfs");
  ExpectError("[scheduling]\nbackfill = \"easy\"\n", "2", "expected standard or strict");
  ExpectError("[scheduling]\nbackfill_order = \"random\"\n", "2",
              "expected priority, shortest or area");
  ExpectError("[scheduling]\nplacement = \"best\"\n", "2",
              "expected topology, first_fit or random");
  ExpectError("[scheduling]\nprotect_after_ms = 3600000\n", "2", "applies to a published order");
  ExpectError("cluster_name = \n", "1", "");  // TOML syntax error
  ExpectError("[[nodes]]\nnames = \"n1\"\nmig = [\"1g.10gb\"]\n", "3", "PROFILE:COUNT");
  ExpectError("[[nodes]]\nnames = \"n1\"\ngres = [\"nvme:0\"]\n", "3", "NAME[:TYPE]:COUNT");
  ExpectError("[[nodes]]\nnames = \"n1\"\ngres = [\"shard:4\"]\n", "3", "shards_per_gpu");
  ExpectError("[agent]\njob_state_dir = \"run/muster\"\n", "2",
              "agent.job_state_dir: expected an absolute path");
}

TEST(ConfigTest, CrossChecks) {
  auto c =
      ParseConfig("[[nodes]]\nnames = \"n1\"\n[[partition]]\nname = \"p\"\nnodes = \"n2\"\n", "x");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("names node 'n2'"), std::string::npos);
  c = ParseConfig("[[nodes]]\nnames = \"n1\"\n[[nodes]]\nnames = \"n1\"\n", "x");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("defined twice"), std::string::npos);
  c = ParseConfig("[scheduling]\nheartbeat_interval_ms = 5000\nnode_not_responding_ms = 1000\n",
                  "x");
  ASSERT_FALSE(c.ok());
}

TEST(ConfigTest, QueueOrderAndBackfillDefaultToMustersOwn) {
  auto c = ParseConfig("", "x");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->scheduling.order, "multifactor");
  EXPECT_EQ(c->scheduling.backfill, "standard");
  c = ParseConfig("[scheduling]\norder = \"wfp3\"\nbackfill = \"strict\"\n", "x");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->scheduling.order, "wfp3");
  EXPECT_EQ(c->scheduling.backfill, "strict");
  EXPECT_EQ(c->scheduling.protect_after_ms, 0u);
  c = ParseConfig("[scheduling]\norder = \"f1\"\nprotect_after_ms = 86400000\n", "x");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->scheduling.protect_after_ms, 86'400'000u);
}

TEST(ConfigTest, FirstPartitionIsDefaultWhenNoneSaysSo) {
  auto c =
      ParseConfig("[[nodes]]\nnames = \"n1\"\n[[partition]]\nname = \"a\"\nnodes = \"n1\"\n", "x");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->DefaultPartition()->name, "a");
}

TEST(ConfigTest, MissingFileIsNotFound) {
  auto c = LoadConfig("/nonexistent/muster.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace muster

namespace muster {
namespace {

TEST(ConfigTest, ShippedExampleConfigIsValid) {
  auto c = LoadConfig(std::string(MUSTER_SOURCE_DIR) + "/packaging/config/muster.toml.example");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->nodes.size(), 128u);
  EXPECT_EQ(c->DefaultPartition()->name, "gpu");
  EXPECT_EQ(c->agent.job_state_dir, "/run/musterd") << "as musterd.service's RuntimeDirectory";
}

constexpr const char* kTwoControllers = R"(
[controller]
socket = "/run/muster/musterctld.sock"
state_dir = "/var/lib/muster"
api_address = "head:6819"
etcd_endpoints = ["127.0.0.1:2379"]
etcd_ca_file = "/etc/muster/tls/etcd/ca.crt"
etcd_cert_file = "/etc/muster/tls/etcd/client.crt"
etcd_key_file = "/etc/muster/tls/etcd/client.key"
leader_lease_s = 2

[[controllers]]
name = "ctl1"
agent_address = "127.0.0.1:7001"

[[controllers]]
name = "ctl2"
agent_address = "127.0.0.2:7001"
api_address = "127.0.0.2:6819"
socket = "/tmp/ctl2.sock"
state_dir = "/tmp/ctl2"

[[nodes]]
names = "n1"
cpus = 1

[[partition]]
name = "p"
nodes = "n1"
)";

TEST(ConfigTest, ControllersOfAHotStandby) {
  auto c = ParseConfig(kTwoControllers, "ha.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->controller.leader_lease_s, 2u);
  EXPECT_EQ(c->controller.etcd_endpoints, std::vector<std::string>{"127.0.0.1:2379"});
  EXPECT_EQ(ControllerAgentAddresses(*c),
            (std::vector<std::string>{"127.0.0.1:7001", "127.0.0.2:7001"}));
  EXPECT_EQ(ControllerApiAddresses(*c), (std::vector<std::string>{"head:6819", "127.0.0.2:6819"}));
  EXPECT_EQ(ControllerSocketPaths(*c),
            (std::vector<std::string>{"/run/muster/musterctld.sock", "/tmp/ctl2.sock"}));

  auto one = ConfigForController(*c, "ctl1");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->controller.agent_address, "127.0.0.1:7001");
  EXPECT_EQ(one->controller.state_dir, "/var/lib/muster");
  EXPECT_EQ(one->controller.api_address, "head:6819");
  auto two = ConfigForController(*c, "ctl2");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->controller.agent_address, "127.0.0.2:7001");
  EXPECT_EQ(two->controller.state_dir, "/tmp/ctl2");
  EXPECT_EQ(two->controller.socket_path, "/tmp/ctl2.sock");
  EXPECT_EQ(two->controller.api_address, "127.0.0.2:6819");
  auto stranger = ConfigForController(*c, "ctl3");
  EXPECT_EQ(stranger.status().code(), StatusCode::kNotFound);
  EXPECT_NE(stranger.status().message().find("ctl1, ctl2"), std::string::npos);

  // Without [[controllers]]: the one controller of [controller].
  auto single = ParseConfig(kGood, "test.toml");
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(ControllerAgentAddresses(*single), std::vector<std::string>{"127.0.0.1:0"});
  EXPECT_TRUE(ControllerApiAddresses(*single).empty());
  EXPECT_EQ(ConfigForController(*single, "anything")->controller.state_dir, "/tmp/state");
}

TEST(ConfigTest, AControllerGoesByItsHostsNameOrItsFirstLabel) {
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  const std::string full = host;
  const std::string label = full.substr(0, full.find('.'));
  Config c;
  EXPECT_EQ(DefaultControllerName(c), full);
  c.controllers.push_back({.name = label, .agent_address = "127.0.0.1:7001"});
  EXPECT_EQ(DefaultControllerName(c), label);
  c.controllers.front().name = full;
  EXPECT_EQ(DefaultControllerName(c), full);
}

TEST(ConfigTest, ControllersMistakesAreRefused) {
  const std::string base = kTwoControllers;
  auto refused = [&](const std::string& from, const std::string& to, const std::string& says) {
    std::string text = base;
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    auto c = ParseConfig(text, "ha.toml");
    ASSERT_FALSE(c.ok()) << "accepted with " << to;
    EXPECT_NE(c.status().message().find(says), std::string::npos) << c.status().ToString();
  };
  refused("etcd_endpoints = [\"127.0.0.1:2379\"]", "", "need controller.etcd_endpoints");
  refused("name = \"ctl2\"", "name = \"ctl1\"", "listed twice");
  refused("name = \"ctl2\"", "", "needs a name");
  refused("agent_address = \"127.0.0.2:7001\"", "agent_address = \"127.0.0.1:7001\"",
          "two [[controllers]] have agent_address");
  refused("agent_address = \"127.0.0.2:7001\"", "", "expected host:port");
  refused("agent_address = \"127.0.0.2:7001\"", "agent_address = \"10.0.0.2:7001\"",
          "not a loopback address");
  refused("\"127.0.0.1:2379\"", "\"http://127.0.0.1:2379\"", "not host:port");
  refused("leader_lease_s = 2", "leader_lease_s = 0", "leader_lease_s");
  refused("leader_lease_s = 2", "etcd_prefix = \"muster\"", "start and end with '/'");
  // An etcd that answers anyone lets any local user stop or split the election.
  refused("etcd_ca_file = \"/etc/muster/tls/etcd/ca.crt\"", "", "go together");
  refused(
      "etcd_ca_file = \"/etc/muster/tls/etcd/ca.crt\"\netcd_cert_file = "
      "\"/etc/muster/tls/etcd/client.crt\"\netcd_key_file = \"/etc/muster/tls/etcd/client.key\"",
      "", "--client-cert-auth");
  refused("socket = \"/tmp/ctl2.sock\"", "sockets = \"/tmp/ctl2.sock\"", "sockets");
}

}  // namespace
}  // namespace muster
