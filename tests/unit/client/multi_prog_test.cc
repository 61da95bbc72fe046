// srun --multi-prog: the configuration file's lines, each rank's command, and the errors that
// name the line at fault.
#include "muster/client/multi_prog.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace muster::client {
namespace {

using Commands = std::vector<std::vector<std::string>>;

Commands Expand(const std::string& text, uint32_t ntasks,
                const std::vector<std::string>& extra = {}) {
  auto c = ParseMultiProg(text, "silly.conf");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return {};
  auto commands = MultiProgCommands(*c, ntasks, extra);
  EXPECT_TRUE(commands.ok()) << commands.status().ToString();
  return commands.ok() ? *commands : Commands{};
}

std::string Error(const std::string& text, uint32_t ntasks) {
  auto c = ParseMultiProg(text, "silly.conf");
  if (!c.ok()) return c.status().message();
  auto commands = MultiProgCommands(*c, ntasks, {});
  EXPECT_FALSE(commands.ok());
  return commands.status().message();
}

// The man page's example.
TEST(MultiProgTest, TheManPagesExample) {
  const std::string text =
      "###################################################################\n"
      "# srun multiple program configuration file\n"
      "#\n"
      "# srun -n8 -l --multi-prog silly.conf\n"
      "###################################################################\n"
      "4-6       hostname\n"
      "1,7       echo  task:%t\n"
      "0,2-3     echo  offset:%o\n";
  EXPECT_EQ(Expand(text, 8), (Commands{{"echo", "offset:0"},
                                       {"echo", "task:1"},
                                       {"echo", "offset:1"},
                                       {"echo", "offset:2"},
                                       {"hostname"},
                                       {"hostname"},
                                       {"hostname"},
                                       {"echo", "task:7"}}));
}

TEST(MultiProgTest, StarTakesTheRestQuotesAndExtraArguments) {
  const std::string text =
      "0 /bin/sh -c 'echo rank %t is first'\n"
      "\n"
      "* ./worker \"--id=%t of many\" --offset=%o\n";
  EXPECT_EQ(Expand(text, 3, {"--extra"}),
            (Commands{{"/bin/sh", "-c", "echo rank %t is first", "--extra"},
                      {"./worker", "--id=1 of many", "--offset=0", "--extra"},
                      {"./worker", "--id=2 of many", "--offset=1", "--extra"}}));
}

TEST(MultiProgTest, MistakesNameTheLine) {
  EXPECT_NE(Error("0-1 a\n1 b\n", 2).find("line 2 names task 1, which line 1 names already"),
            std::string::npos);
  EXPECT_NE(Error("0 a\n", 2).find("no executable program specified for task 1"),
            std::string::npos);
  EXPECT_NE(Error("0-4 a\n", 2).find("line 1 names task 4, but the step has 2 task(s) (0-1)"),
            std::string::npos);
  EXPECT_NE(Error("# c\n3-1 a\n", 4).find("silly.conf line 2: the range 3-1 goes down"),
            std::string::npos);
  EXPECT_NE(Error("0\n", 1).find("line 1: no program for ranks 0"), std::string::npos);
  EXPECT_NE(Error("x a\n", 1).find("line 1: 'x' is not a list of task ranks"), std::string::npos);
  EXPECT_NE(Error("* a\n0 b\n", 1).find("line 2: '*' must be the last line"), std::string::npos);
  EXPECT_NE(Error("0 echo 'open\n", 1).find("line 1: a quote is not closed"), std::string::npos);
  EXPECT_NE(Error("# only a comment\n", 1).find("no line names a task"), std::string::npos);
}

TEST(MultiProgTest, ReadsARegularFileOnly) {
  namespace fs = std::filesystem;
  const fs::path p = fs::temp_directory_path() / ("multi-" + std::to_string(::getpid()) + ".conf");
  std::ofstream(p) << "* echo %t\n";
  auto c = ReadMultiProg(p.string());
  fs::remove(p);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->lines.size(), 1u);
  EXPECT_FALSE(ReadMultiProg("/nonexistent/file.conf").ok());
  EXPECT_NE(ReadMultiProg("/tmp").status().message().find("is not a file"), std::string::npos);
}

}  // namespace
}  // namespace muster::client
