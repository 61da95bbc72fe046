// srun --bcast on srun's side: the program found as execvp finds it, what cannot be sent whole
// refused before anything is allocated, each node's copy named as Slurm names it, and the bytes
// sent in bounded frames to every node that still takes them.
#include "muster/client/bcast.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "muster/common/framing.h"
#include "muster/common/job_limits.h"

namespace muster::client {
namespace {

namespace fs = std::filesystem;

std::string Or(const Result<std::string>& r, const std::string& otherwise) {
  return r.ok() ? *r : otherwise;
}

class BcastTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("muster-bcast-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "a");
    fs::create_directories(dir_ / "b");
  }
  void TearDown() override {
    fs::permissions(dir_ / "b", fs::perms::owner_all, fs::perm_options::add);
    fs::remove_all(dir_);
  }
  std::string File(const fs::path& p, const std::string& body, fs::perms mode) {
    std::ofstream(p, std::ios::binary) << body;
    fs::permissions(p, mode);
    return p.string();
  }
  fs::path dir_;
};

TEST_F(BcastTest, FindsTheProgramAsExecvpDoes) {
  const std::string exe = File(dir_ / "b" / "prog", "#!/bin/sh\n", fs::perms::owner_all);
  File(dir_ / "a" / "prog", "not executable", fs::perms::owner_read);  // skipped, as execvp does
  const std::string path = (dir_ / "a").string() + ":" + (dir_ / "b").string();
  auto found = FindProgram("prog", path);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, exe);
  // A name with a slash is taken as it is; one nowhere in PATH is named.
  EXPECT_EQ(Or(FindProgram("./x/prog", path), ""), "./x/prog");
  auto missing = FindProgram("no-such-prog", path);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("no-such-prog: no such program in PATH"),
            std::string::npos);
  // A directory of that name is not a program.
  fs::create_directories(dir_ / "a" / "dirprog");
  EXPECT_FALSE(FindProgram("dirprog", (dir_ / "a").string()).ok());
}

TEST_F(BcastTest, RefusesWhatCannotBeSentWhole) {
  const std::string ok = File(dir_ / "prog", "#!/bin/sh\necho hi\n", fs::perms::owner_all);
  auto src = OpenBcastSource(ok);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ(src->size, 18u);
  ::close(src->fd);

  auto dir = OpenBcastSource(dir_.string());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("is not a regular file"), std::string::npos)
      << dir.status().message();

  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0700), 0);
  auto f = OpenBcastSource(fifo);  // refused at once, not waited on
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("is not a regular file"), std::string::npos);

  // Over the bound (a sparse file: nothing is read to know its size).
  const std::string big = (dir_ / "big").string();
  {
    std::ofstream(big) << "";
    fs::resize_file(big, kMaxBcastBytes + 1);
  }
  auto b = OpenBcastSource(big);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(b.status().message().find("--bcast copies at most 1 GiB"), std::string::npos)
      << b.status().message();
  fs::resize_file(big, kMaxBcastBytes);
  auto at_bound = OpenBcastSource(big);
  ASSERT_TRUE(at_bound.ok()) << "exactly 1 GiB is taken";
  ::close(at_bound->fd);

  if (::geteuid() != 0) {  // root reads anything
    const std::string secret = File(dir_ / "secret", "x", fs::perms::owner_write);
    auto s = OpenBcastSource(secret);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.status().message().find("cannot read " + secret + ": Permission denied"),
              std::string::npos)
        << s.status().message();
  }
}

TEST_F(BcastTest, NamesEachNodesCopyAsSlurmDoes) {
  // DEST/ is a directory; DEST alone is the file; none: the step's directory.
  auto d = BcastDestination("/tmp/somedir/", "/home/u/work");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(BcastPathOnNode(*d, 42, 5, "node1"), "/tmp/somedir/slurm_bcast_42.5_node1");
  EXPECT_EQ(BcastPathOnNode(Or(BcastDestination("/tmp/mine", "/w"), ""), 42, 5, "node1"),
            "/tmp/mine");
  EXPECT_EQ(BcastPathOnNode(Or(BcastDestination("", "/home/u/work"), ""), 7, 0, "gpu03"),
            "/home/u/work/slurm_bcast_7.0_gpu03");
  EXPECT_EQ(Or(BcastDestination("bin/a.out", "/home/u/work"), ""), "/home/u/work/bin/a.out")
      << "relative to the step's directory, as Slurm's";
  auto up = BcastDestination("/tmp/../etc/x", "/w");
  ASSERT_FALSE(up.ok());
  EXPECT_NE(up.status().message().find("'..' component"), std::string::npos);
  EXPECT_FALSE(BcastDestination("../x", "/w").ok());
  EXPECT_FALSE(BcastDestination("/" + std::string(kMaxPathBytes, 'a'), "/w").ok());
}

// Every node gets every byte, in frames of type 5 no larger than kBcastChunk; a node that has
// spoken (it gave up) gets no more, and the others still get it all.
TEST_F(BcastTest, SendsTheProgramInBoundedFramesToEveryNodeStillTakingIt) {
  std::string body(kBcastChunk * 2 + 12345, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 7 + i / 1000);
  const std::string prog = File(dir_ / "prog", body, fs::perms::owner_all);
  auto src = OpenBcastSource(prog);
  ASSERT_TRUE(src.ok());
  int a[2], b[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, a), 0);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, b), 0);
  // Node b has said why it gave up before the first chunk.
  ASSERT_TRUE(WriteFrame(b[1], 9, "cannot create").ok());
  std::string got;
  std::thread reader([&] {
    for (;;) {
      auto f = ReadFrame(a[1], 5000);
      if (!f.ok()) break;
      EXPECT_EQ(f->type, 5u);
      EXPECT_LE(f->payload.size(), kBcastChunk);
      got += f->payload;
    }
  });
  std::vector<int> fds = {a[0], b[0]};
  Status s = SendBcast(*src, &fds, nullptr);
  ::close(a[0]);
  reader.join();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(got == body) << "node a got " << got.size() << " of " << body.size() << " bytes";
  EXPECT_EQ(fds[0], a[0]);
  EXPECT_EQ(fds[1], -1) << "the node that gave up gets no more";
  auto f = ReadFrame(b[1], 0);
  EXPECT_FALSE(f.ok()) << "nothing was sent to it";

  // Interrupted: stops before the next chunk.
  std::vector<int> none = {b[0]};
  s = SendBcast(*src, &none, [] { return true; });
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  ::close(src->fd);
  for (int fd : {a[1], b[0], b[1]}) ::close(fd);
}

}  // namespace
}  // namespace muster::client
