#include "muster/common/strings.h"

#include <gtest/gtest.h>

namespace muster {
namespace {

TEST(JsonQuoteTest, EscapesOnlyWhatJsonRequires) {
  EXPECT_EQ(JsonQuote(""), "\"\"");
  EXPECT_EQ(JsonQuote("plain /path é"), "\"plain /path é\"");
  EXPECT_EQ(JsonQuote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonQuote("\n\r\t"), "\"\\n\\r\\t\"");
  EXPECT_EQ(JsonQuote(std::string("x\x01y\x1f", 4)), "\"x\\u0001y\\u001f\"");
  std::string out = "[";
  AppendJsonQuoted(out, "k");
  EXPECT_EQ(out, "[\"k\"");
}

}  // namespace
}  // namespace muster
