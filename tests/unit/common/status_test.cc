#include "muster/common/status.h"

#include <gtest/gtest.h>

namespace muster {
namespace {

Result<int> Half(int x) {
  if (x % 2) return InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  MUSTER_ASSIGN_OR_RETURN(int h, Half(x));
  MUSTER_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status Check(int x) {
  MUSTER_RETURN_IF_ERROR_PREPEND(Quarter(x).status(), "checking " + std::to_string(x));
  return Status::Ok();
}

TEST(StatusTest, MacrosPropagateAndPrepend) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().message(), "odd: 3");
  Status s = Check(6);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "checking 6: odd: 3");
  EXPECT_EQ(s.ToString(), "INVALID_ARGUMENT: checking 6: odd: 3");
  EXPECT_TRUE(Check(8).ok());
}

}  // namespace
}  // namespace muster
