// Slurm's output file name patterns: expansion, and the limits a stored pattern must keep.
#include "muster/common/output_pattern.h"

#include <gtest/gtest.h>

#include "muster/common/job_limits.h"

namespace muster {
namespace {

TEST(OutputPatternTest, ExpandsSlurmPatterns) {
  PatternVars v;
  v.job_id = 42;
  v.job_name = "train";
  v.user = "alice";
  v.node = "node3";
  EXPECT_EQ(ExpandOutputPattern("", v, "/home/alice"), "/home/alice/slurm-42.out");
  EXPECT_EQ(ExpandOutputPattern("%x-%j.%u.%N.log", v, "/w"), "/w/train-42.alice.node3.log");
  EXPECT_EQ(ExpandOutputPattern("/abs/%A_%a.out", v, "/w"), "/abs/42_4294967294.out");
  EXPECT_EQ(ExpandOutputPattern("100%%-%5j", v, "/w/"), "/w/100%-00042");
  EXPECT_EQ(ExpandOutputPattern("%q", v, "/w"), "/w/%q");  // unknown: kept
  EXPECT_EQ(ExpandOutputPattern("out%", v, "/w"), "/w/out%");
}

// A pattern is user input that a root agent expands: its padding width is bounded when it is
// stored, and expansion cuts any width (of a record stored before the check) to the limit.
TEST(OutputPatternTest, HugePaddingWidthsAreRefusedAndNeverExpanded) {
  EXPECT_TRUE(CheckOutputPattern("/w/%5j-%x.%64a.out", "--output").ok());
  EXPECT_TRUE(CheckOutputPattern("100%%-done", "--output").ok());
  for (const char* bad : {"/tmp/%2000000000j", "/tmp/%65j", "/tmp/%999x", "%0000000001j"}) {
    Status st = CheckOutputPattern(bad, "--output");
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("padding width is at most 64"), std::string::npos) << st.message();
  }
  EXPECT_FALSE(CheckOutputPattern(std::string("/tmp/a\0b", 8), "--output").ok());
  EXPECT_FALSE(CheckOutputPattern("/" + std::string(kMaxPathBytes, 'a'), "--output").ok());

  PatternVars v;
  v.job_id = 42;
  const std::string huge = ExpandOutputPattern("/tmp/%2000000000j", v, "/w");
  EXPECT_EQ(huge, "/tmp/" + std::string(kMaxPatternWidth - 2, '0') + "42");
  const std::string many_digits = ExpandOutputPattern("%99999999999999999999999j", v, "/w");
  EXPECT_EQ(many_digits.size(), std::string("/w/").size() + kMaxPatternWidth);
}

}  // namespace
}  // namespace muster
