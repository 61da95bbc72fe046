// ibnetdiscover -> leaf sets, over the captured DGX H100 SuperPOD fabric in tests/data/ib.
#include "muster/common/ibnetdiscover.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace muster {
namespace {

std::string SuperPod() {
  std::ifstream in(std::string(MUSTER_SOURCE_DIR) +
                   "/tests/data/ib/ibnetdiscover_dgx-h100-superpod_ndr-leaf-spine.out");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Ibnetdiscover, SuperPodLeavesSpinesAndRails) {
  auto f = ParseIbnetdiscover(SuperPod());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->switches.size(), 40u);
  EXPECT_EQ(f->spines(), 9u) << "the IBSPINE switches link to no host";
  EXPECT_EQ(f->leaves(), 31u);
  EXPECT_EQ(f->hca_ports, 582u);
  EXPECT_EQ(f->aggregation_nodes, 40u) << "one SHARP aggregation node per switch";
  EXPECT_EQ(f->unnamed_hcas, 69u) << "\"MT4129 ConnectX7 Mellanox Technologies\"";
  for (const auto& [guid, s] : f->switches) {
    EXPECT_EQ(s.leaf, s.name.find("IBLEAF") != std::string::npos) << s.name;
  }
  // Rail-optimized: each HCA of a host goes to a different leaf, so hosts group by leaf set.
  auto groups = f->Groups();
  const IbFabric::Group* su4 = nullptr;
  for (const auto& g : groups) {
    for (const auto& h : g.hosts) {
      if (h == "a08-p1-dgx-04-c01") su4 = &g;
    }
  }
  ASSERT_NE(su4, nullptr);
  EXPECT_EQ(su4->leaves, (std::vector<std::string>{"A09-P1-IBLEAF-01-04", "A09-P1-IBLEAF-02-04",
                                                   "A09-P1-IBLEAF-03-04", "A09-P1-IBLEAF-04-04"}));
  EXPECT_EQ(su4->hosts.size(), 17u);
  // Every named DGX sits in exactly one group, with the hosts of its own scalable unit.
  for (const auto& g : groups) {
    for (const auto& h : g.hosts) {
      if (h.find("-dgx-") == std::string::npos) continue;
      std::string unit = h.substr(h.find("-dgx-") + 5, 2);  // "04" in a08-p1-dgx-04-c01
      for (const auto& leaf : g.leaves) EXPECT_EQ(leaf.substr(leaf.size() - 2), unit) << h;
    }
  }
}

TEST(Ibnetdiscover, ConfigNamesEachLeafSetAsATopology) {
  auto f = ParseIbnetdiscover(SuperPod());
  ASSERT_TRUE(f.ok());
  std::string cfg = IbTopologyConfig(*f);
  EXPECT_NE(cfg.find("names = \"a07-p1-dgx-03-c[01-18]\"\ntopology = \"ib/leafset"),
            std::string::npos)
      << cfg;
  EXPECT_NE(cfg.find("69 HCA(s) had no host name"), std::string::npos);
}

TEST(Ibnetdiscover, NotIbnetdiscoverIsAnErrorWithTheLine) {
  auto bad = ParseIbnetdiscover("hello world\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 1"), std::string::npos);
  EXPECT_FALSE(ParseIbnetdiscover("# only a comment\n").ok());
  EXPECT_FALSE(ParseIbnetdiscover("[1]\t\"H-1\"[1]\n").ok()) << "a port outside a block";
}

}  // namespace
}  // namespace muster
