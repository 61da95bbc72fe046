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
TEST(StringsTest, FindsTheFirstByteThatBreaksUtf8) {
  EXPECT_EQ(FindInvalidUtf8("plain ascii"), std::string_view::npos);
  EXPECT_EQ(FindInvalidUtf8("h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), std::string_view::npos);
  EXPECT_EQ(FindInvalidUtf8("ab\xff"), 2u);            // never a UTF-8 byte
  EXPECT_EQ(FindInvalidUtf8("a\x80"), 1u);             // a lone continuation byte
  EXPECT_EQ(FindInvalidUtf8("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(FindInvalidUtf8("\xe0\x80\xaf"), 0u);      // overlong, three bytes
  EXPECT_EQ(FindInvalidUtf8("x\xed\xa0\x80"), 1u);     // a surrogate
  EXPECT_EQ(FindInvalidUtf8("\xf4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("ok\xe2\x82"), 2u);        // cut short
}

}  // namespace muster
