#include "muster/common/status.h"

#include <gtest/gtest.h>

#include "muster/common/framing.h"

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

TEST(FramingTest, HeaderRoundTripAndLimits) {
  std::string f = EncodeFrame(7, "hello");
  ASSERT_EQ(f.size(), 13u);
  uint32_t len = 0, type = 0;
  ASSERT_TRUE(DecodeFrameHeader(f.data(), &len, &type).ok());
  EXPECT_EQ(len, 5u);
  EXPECT_EQ(type, 7u);
  const char too_small[8] = {0, 0, 0, 3, 0, 0, 0, 1};
  EXPECT_FALSE(DecodeFrameHeader(too_small, &len, &type).ok());
  const char too_big[8] = {0x7f, 0, 0, 0, 0, 0, 0, 1};
  EXPECT_FALSE(DecodeFrameHeader(too_big, &len, &type).ok());
}

TEST(FramingTest, SplitsHostPort) {
  std::string h;
  uint16_t p = 0;
  ASSERT_TRUE(SplitHostPort("127.0.0.1:6817", &h, &p).ok());
  EXPECT_EQ(h, "127.0.0.1");
  EXPECT_EQ(p, 6817);
  ASSERT_TRUE(SplitHostPort("[::1]:80", &h, &p).ok());
  EXPECT_EQ(h, "::1");
  EXPECT_FALSE(SplitHostPort("nocolon", &h, &p).ok());
  EXPECT_FALSE(SplitHostPort("h:99999", &h, &p).ok());
}

}  // namespace
}  // namespace muster
