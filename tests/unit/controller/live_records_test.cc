// The checks every live change of an account, QoS or reservation starts with.
#include "live_records.h"

#include <gtest/gtest.h>

namespace muster::controller {
namespace {

TEST(LiveChangeTest, AddsNeedANewNameChangesAnExistingOneTheConfigDoesNotHold) {
  const std::string src = "/etc/muster/muster.toml";
  EXPECT_TRUE(CheckLiveChange(v1::ACCOUNT_OP_ADD, "qos", "gold", false, false, src).ok());
  Status dup = CheckLiveChange(v1::ACCOUNT_OP_ADD, "qos", "gold", true, false, src);
  EXPECT_EQ(dup.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(dup.message(), "qos gold exists");
  for (v1::AccountOp op : {v1::ACCOUNT_OP_MODIFY, v1::ACCOUNT_OP_REMOVE}) {
    EXPECT_TRUE(CheckLiveChange(op, "account", "physics", true, false, src).ok());
    Status missing = CheckLiveChange(op, "account", "physics", false, false, src);
    EXPECT_EQ(missing.code(), StatusCode::kNotFound);
    EXPECT_EQ(missing.message(), "account physics does not exist");
    Status config = CheckLiveChange(op, "account", "physics", true, true, src);
    EXPECT_EQ(config.code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(config.message(), "account physics is defined in " + src + "; change it there");
  }
  EXPECT_EQ(
      CheckLiveChange(static_cast<v1::AccountOp>(99), "reservation", "m", true, false, "").code(),
      StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace muster::controller
