#include "muster/common/hostlist.h"

#include <gtest/gtest.h>

namespace muster {
namespace {

std::vector<std::string> Expand(const std::string& e) {
  auto r = ExpandHostlist(e);
  EXPECT_TRUE(r.ok()) << e << ": " << r.status().ToString();
  return r.ok() ? *r : std::vector<std::string>{};
}

TEST(HostlistTest, ExpandsRangesListsAndPadding) {
  EXPECT_EQ(Expand("node1"), (std::vector<std::string>{"node1"}));
  EXPECT_EQ(Expand("node[1-3]"), (std::vector<std::string>{"node1", "node2", "node3"}));
  EXPECT_EQ(Expand("gpu[001-003]"), (std::vector<std::string>{"gpu001", "gpu002", "gpu003"}));
  EXPECT_EQ(Expand("n[1-2,5],login"), (std::vector<std::string>{"n1", "n2", "n5", "login"}));
  EXPECT_EQ(Expand("n[8-11]"), (std::vector<std::string>{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(Expand("r[1-2]-n[01-02]"),
            (std::vector<std::string>{"r1-n01", "r1-n02", "r2-n01", "r2-n02"}));
  EXPECT_TRUE(Expand("").empty());
}

TEST(HostlistTest, RejectsMalformedExpressions) {
  for (const char* bad :
       {"node[1-", "node]1[", "node[3-1]", "node[a-b]", "node[1-2", "a,,b", "n[[1]]", "n[1-2 ]"}) {
    auto r = ExpandHostlist(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
      EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status().message();
    }
  }
}

TEST(HostlistTest, GuardsAgainstHugeRanges) {
  auto r = ExpandHostlist("n[0-999999999]", 1000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
}

TEST(HostlistTest, CompressesLikeSlurm) {
  EXPECT_EQ(CompressHostlist({"node1"}), "node1");
  EXPECT_EQ(CompressHostlist({"node1", "node2"}), "node[1-2]");
  EXPECT_EQ(CompressHostlist({"node1", "node2", "node5"}), "node[1-2,5]");
  EXPECT_EQ(CompressHostlist({"node5", "node1", "node2"}), "node[1-2,5]");
  EXPECT_EQ(CompressHostlist({"gpu001", "gpu002", "gpu010"}), "gpu[001-002,010]");
  EXPECT_EQ(CompressHostlist({"a1", "b1", "a2"}), "a[1-2],b1");
  EXPECT_EQ(CompressHostlist({"login", "n1"}), "login,n1");
  EXPECT_EQ(CompressHostlist({}), "");
}

TEST(HostlistTest, CompressIsTheInverseOfExpand) {
  for (const char* e : {"node[1-4]", "gpu[001-128]", "n[1-3,7,9-10]", "a[1-2],b[5-6]"}) {
    EXPECT_EQ(CompressHostlist(Expand(e)), e);
  }
}

TEST(HostlistTest, CompressesCounts) {
  EXPECT_EQ(CompressCounts({2, 2, 2, 1}), "2(x3),1");
  EXPECT_EQ(CompressCounts({16, 16, 16, 16}), "16(x4)");
  EXPECT_EQ(CompressCounts({1}), "1");
  EXPECT_EQ(CompressCounts({1, 2, 1}), "1,2,1");
}

// Found by fuzzing: names with NUL and control bytes came out of an expression.
TEST(HostlistTest, ControlCharactersAreRefused) {
  for (std::string expr :
       {std::string("n\x11[1-2]"), std::string("a\0b", 3), std::string("x\x7f")}) {
    auto r = ExpandHostlist(expr);
    ASSERT_FALSE(r.ok()) << "accepted a control character";
    EXPECT_NE(r.status().message().find("control character"), std::string::npos);
  }
}

}  // namespace
}  // namespace muster
