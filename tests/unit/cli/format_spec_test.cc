// The format language squeue and sinfo share.
#include "format_spec.h"

#include <gtest/gtest.h>

#include "sinfo_format.h"

namespace muster::cli {
namespace {

std::string Line(const std::string& format, bool trim = false) {
  auto items = ParseFormatSpec(format, "ijx");
  EXPECT_TRUE(items.ok()) << items.status().ToString();
  std::string out;
  RenderLine(
      *items,
      [](char l) {
        return l == 'i' ? std::string("1234567") : l == 'j' ? std::string("job") : std::string();
      },
      trim, out);
  return out;
}

TEST(FormatSpecTest, FieldsWidthsAndLiterals) {
  EXPECT_EQ(Line("%i %j"), "1234567 job\n");
  EXPECT_EQ(Line("%.10i|%5j|"), "   1234567|job  |\n") << "'.' right-justifies, else left";
  EXPECT_EQ(Line("%3i"), "123\n") << "too long: cut, as squeue and sinfo cut";
  EXPECT_EQ(Line("100%% %j"), "100% job\n") << "%% is a literal percent sign";
  EXPECT_EQ(Line("%j%%"), "job%\n");
  EXPECT_EQ(Line("%5j   ", /*trim=*/true), "job\n") << "sinfo drops trailing blanks";
  EXPECT_EQ(Line("%5j   ", /*trim=*/false), "job     \n") << "squeue keeps them";
}

TEST(FormatSpecTest, ErrorsSayWhatIsWrong) {
  auto bad = ParseFormatSpec("%i %q", "ijx");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("%q is not supported (supported: %i %j %x)"),
            std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(ParseFormatSpec("%.12", "ijx").ok()) << "ends inside a field";
  EXPECT_FALSE(ParseFormatSpec("%", "ijx").ok());
  EXPECT_FALSE(ParseFormatSpec("%99999999999i", "ijx").ok()) << "no column of gigabytes";
}

TEST(FormatSpecTest, AppendColumnPadsAndCuts) {
  std::string out;
  AppendColumn(out, "abc", 5, true);
  AppendColumn(out, "abcdef", 4, false);
  AppendColumn(out, "xy", 0, false);
  EXPECT_EQ(out, "  abcabcdxy");
}

// Each item as text: "L" for a left-justified letter of width W as "%WL", right as "%.WL", a
// literal in quotes.
std::string Shape(const std::vector<FormatItem>& items) {
  std::string out;
  for (const FormatItem& i : items) {
    if (!i.letter) {
      out += "'" + i.literal + "'";
      continue;
    }
    out += std::string("%") + (i.right ? "." : "") + (i.width ? std::to_string(i.width) : "") +
           i.letter;
  }
  return out;
}

TEST(FormatSpecTest, SinfoTakesEveryLetterOfItsManualPage) {
  for (char l : std::string("aAbBcCdDeEfFgGhHIlLmMnNoOpPrRsStTuUvVwXYZz")) {
    EXPECT_TRUE(ParseSinfoFormat(std::string("%") + l).ok()) << l;
  }
  auto bad = ParseSinfoFormat("%P %j");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("%j is not supported"), std::string::npos);
  // %all: every field, '|' between them, beside what else the format has.
  auto all = ParseSinfoFormat("[%all]");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  const std::string shape = Shape(*all);
  EXPECT_EQ(shape.substr(0, 14), "'['%a'|'%A'|'%") << shape;
  EXPECT_EQ(shape.substr(shape.size() - 8), "'|'%z']'") << shape;
}

TEST(FormatSpecTest, SinfoLongFormatNamesWidthsAndSuffixes) {
  auto items = ParseSinfoLongFormat("partition,NodeList:.12,StateLong:5|,CPUs:,nodehost");
  ASSERT_TRUE(items.ok()) << items.status().ToString();
  EXPECT_EQ(Shape(*items), "%20P%.12N%5T'|'%20c%20n") << "names in any case, default width 20";
  ASSERT_TRUE(ParseSinfoLongFormat("Time,Available,Gres,Memory,Features,Reason,StateCompact").ok());
  EXPECT_EQ(Shape(*ParseSinfoLongFormat("timelimit,Priority,share")), "%20l%20p%20h")
      << "aliases: squeue's TimeLimit, Priority for PriorityTier, Share for OverSubscribe";
  auto bad = ParseSinfoLongFormat("Partition,JobID");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'JobID' is not supported (supported: All allocmem"),
            std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(ParseSinfoLongFormat("Nodes:0").ok()) << "a width of 0";
  EXPECT_FALSE(ParseSinfoLongFormat(",").ok()) << "no field";
}

TEST(FormatSpecTest, SinfoSortKeys) {
  auto keys = ParseSinfoSort("P,-m,+#P,N");
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ(*keys, (std::vector<std::string>{"+P", "-m", "+#P", "+N"}));
  EXPECT_FALSE(ParseSinfoSort("#N").ok()) << "# only orders partitions";
  EXPECT_FALSE(ParseSinfoSort("j").ok()) << "no such field";
  EXPECT_FALSE(ParseSinfoSort("PP").ok()) << "one letter a key";
  EXPECT_FALSE(ParseSinfoSort("").ok());
}

}  // namespace
// Another user's job name is a cell, not a command to the terminal: no new line, no escape
// sequence, whatever the column.
TEST(FormatSpecTest, ACellShowsControlCharactersInsteadOfObeyingThem) {
  std::string out;
  AppendColumn(out, "evil\x1b[2J\x1b]0;owned\x07", 0, false);
  EXPECT_EQ(out, "evil\\x1b[2J\\x1b]0;owned\\x07");
  out.clear();
  AppendColumn(out, "a\rb", 8, false);
  EXPECT_EQ(out, "a\\rb    ");
  out.clear();
  AppendColumn(out, "résumé", 0, false);
  EXPECT_EQ(out, "résumé");
}

}  // namespace muster::cli
