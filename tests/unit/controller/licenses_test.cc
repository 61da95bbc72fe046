// The cluster's licenses ([licenses], -L/--licenses): refused at submission when the cluster
// lacks them; held by running jobs, so that a job needing more than are free waits with reason
// Licenses and starts when they come back; counted again from the records after a restart.
#include <gtest/gtest.h>

#include "engine_fixture.h"

namespace muster::controller {
namespace {

class LicensesTest : public EngineTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    UseConfig("\n[licenses]\nmatlab = 2\nfluent = 1\n");
  }
  Result<uint64_t> SubmitWith(std::map<std::string, uint32_t> licenses, Caller who = Alice()) {
    v1::JobSpec s = Gang(1, 0);
    for (const auto& [name, count] : licenses) (*s.mutable_licenses())[name] = count;
    return Submit(s, who);
  }
};

TEST_F(LicensesTest, ALicenseTheClusterLacksIsRefusedAtSubmission) {
  auto unknown = SubmitWith({{"ansys", 1}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("Invalid license specification: the cluster has no "
                                            "license 'ansys' (it has fluent, matlab)"),
            std::string::npos)
      << unknown.status().message();
  auto too_many = SubmitWith({{"matlab", 3}});
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("matlab:3 (the cluster has 2)"), std::string::npos)
      << too_many.status().message();
  EXPECT_TRUE(SubmitWith({{"matlab", 2}, {"fluent", 1}}).ok());
}

TEST_F(LicensesTest, AJobWaitsForLicensesOthersHoldAndStartsWhenTheyAreBack) {
  auto first = SubmitWith({{"matlab", 2}});
  auto second = SubmitWith({{"matlab", 1}}, Bob());
  auto other = SubmitWith({{"fluent", 1}}, Bob());
  ASSERT_TRUE(first.ok() && second.ok() && other.ok());
  Pass();
  ASSERT_EQ(Job(*first).state(), v1::RUNNING);
  ASSERT_EQ(Job(*second).state(), v1::PENDING);
  EXPECT_EQ(Job(*second).reason(), "Licenses");
  EXPECT_EQ(Job(*other).state(), v1::RUNNING) << "another license is free";
  // A restart counts what running jobs hold from their records.
  Restart();
  AllUp();
  Pass();
  EXPECT_EQ(Job(*second).state(), v1::PENDING);
  EXPECT_EQ(Job(*second).reason(), "Licenses");
  Run(*first);
  const std::string node = Job(*first).nodes(0);
  Exited(*first, node, 0);
  Cleaned(*first, node);
  Pass();
  EXPECT_EQ(Job(*second).state(), v1::RUNNING) << Job(*second).reason_detail();
}

}  // namespace
}  // namespace muster::controller
