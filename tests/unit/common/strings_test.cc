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

// What another user chose is shown, never obeyed: no new line in a log or a table row, no
// cursor movement, no colour, no 8-bit CSI; plain UTF-8 is left alone.
TEST(StringsTest, PrintableEscapesEveryControlAndEveryNonUtf8Byte) {
  EXPECT_EQ(Printable("train résumé 学習 🚀"), "train résumé 学習 🚀");
  EXPECT_EQ(Printable("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(Printable("\x1b[2J\x1b]0;pwned\x07"), "\\x1b[2J\\x1b]0;pwned\\x07");
  EXPECT_EQ(Printable("del\x7f"), "del\\x7f");
  EXPECT_EQ(Printable("c1\xc2\x9b"
                      "31m"),
            "c1\\xc2\\x9b31m");  // U+009B, CSI
  EXPECT_EQ(Printable("raw\x9b"
                      "31m"),
            "raw\\x9b31m");  // not UTF-8
  EXPECT_EQ(Printable("latin1 caf\xe9!"), "latin1 caf\\xe9!");
  EXPECT_EQ(Printable("cut \xe5\xad"), "cut \\xe5\\xad");
  EXPECT_EQ(Printable(std::string("nul\0x", 5)), "nul\\x00x");
}

}  // namespace muster
