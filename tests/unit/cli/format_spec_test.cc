// The format language squeue and sinfo share.
#include "format_spec.h"

#include <gtest/gtest.h>

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
