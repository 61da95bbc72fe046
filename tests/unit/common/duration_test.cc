#include "muster/common/duration.h"

#include <gtest/gtest.h>

namespace muster {
namespace {

constexpr int64_t kS = 1000, kM = 60 * kS, kH = 60 * kM, kD = 24 * kH;

TEST(TimeLimitTest, AcceptsEverySlurmForm) {
  EXPECT_EQ(*ParseTimeLimit("10"), 10 * kM);                        // M
  EXPECT_EQ(*ParseTimeLimit("10:30"), 10 * kM + 30 * kS);           // M:S
  EXPECT_EQ(*ParseTimeLimit("2:03:04"), 2 * kH + 3 * kM + 4 * kS);  // H:M:S
  EXPECT_EQ(*ParseTimeLimit("1-12"), kD + 12 * kH);                 // D-H
  EXPECT_EQ(*ParseTimeLimit("1-2:30"), kD + 2 * kH + 30 * kM);      // D-H:M
  EXPECT_EQ(*ParseTimeLimit("2-0:0:5"), 2 * kD + 5 * kS);           // D-H:M:S
  EXPECT_EQ(*ParseTimeLimit("0:02"), 2 * kS);
  EXPECT_EQ(*ParseTimeLimit("UNLIMITED"), 0);
  EXPECT_EQ(*ParseTimeLimit("infinite"), 0);
}

TEST(TimeLimitTest, RejectsGarbage) {
  for (const char* bad : {"", "abc", "1:2:3:4", "1-", "-5", "1-2:3:4:5", "1h", "0", "0:00"}) {
    auto r = ParseTimeLimit(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
}

TEST(TimeLimitTest, FormatsLikeSqueue) {
  EXPECT_EQ(FormatDuration(0), "0:00");
  EXPECT_EQ(FormatDuration(65 * kS), "1:05");
  EXPECT_EQ(FormatDuration(kH + 2 * kM + 3 * kS), "1:02:03");
  EXPECT_EQ(FormatDuration(kD + kH), "1-01:00:00");
  EXPECT_EQ(FormatDuration(59 * kM + 59 * kS + 999), "59:59");
  EXPECT_EQ(FormatDuration(12 * kH + 5 * kS), "12:00:05");
  EXPECT_EQ(FormatDuration(123 * kD + 23 * kH + 59 * kM), "123-23:59:00");
  EXPECT_EQ(FormatDuration(-5 * kS), "0:00");
}

TEST(MemoryTest, ParsesUnits) {
  EXPECT_EQ(*ParseMemoryMb("100"), 100u);
  EXPECT_EQ(*ParseMemoryMb("4G"), 4096u);
  EXPECT_EQ(*ParseMemoryMb("4g"), 4096u);
  EXPECT_EQ(*ParseMemoryMb("2048K"), 2u);
  EXPECT_EQ(*ParseMemoryMb("1T"), 1024u * 1024u);
  EXPECT_EQ(*ParseMemoryMb("512MB"), 512u);
  EXPECT_FALSE(ParseMemoryMb("lots").ok());
  EXPECT_FALSE(ParseMemoryMb("-1G").ok());
}

TEST(DurationTest, ParsesConfigDurations) {
  EXPECT_EQ(*ParseDurationMs("500ms"), 500);
  EXPECT_EQ(*ParseDurationMs("30s"), 30 * kS);
  EXPECT_EQ(*ParseDurationMs("5m"), 5 * kM);
  EXPECT_FALSE(ParseDurationMs("5 parsecs").ok());
}

TEST(DurationTest, ValuesThatWouldOverflowAreRefused) {
  EXPECT_FALSE(ParseMemoryMb("18014398509481984T").ok());
  EXPECT_FALSE(ParseMemoryMb("1099511627777").ok());
  EXPECT_EQ(*ParseMemoryMb("1099511627776"), uint64_t{1} << 40);
  EXPECT_FALSE(ParseTimeLimit("18446744073709551615-00:00:00").ok());
  EXPECT_FALSE(ParseDurationMs("999999999999999999d").ok());
  EXPECT_FALSE(ParseDurationMs("9223372036854775807s").ok());
  EXPECT_EQ(*ParseDurationMs("2d"), 2 * 86'400'000LL);
}

}  // namespace
}  // namespace muster
