// Attacker's suite: srun --bcast. The destination is a path the user chooses, in directories the
// user can change, and the agent runs as root: the nodes write it as the job's user, never
// through a symbolic link, and refuse a path that climbs out with "..", whatever srun sends. A
// user who plants a link at the destination (to a file they could not otherwise reach, or one
// they could) gets a failed step, and the link's target stays as it was. A hard link planted there
// (by anyone, in a shared sticky directory without fs.protected_hardlinks) is replaced, never
// written into: the file it names stays as it was.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "harness/cluster_test.h"

namespace muster::testing {
namespace {

namespace fs = std::filesystem;

TEST_F(ClusterTest, ABcastDestinationIsNeverWrittenThroughALinkNorOutsideItsPath) {
  auto id = cluster_->Submit("#!/bin/sh\nsleep 60\n", Gang(2, 1));
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::RUNNING, 10'000);
  auto c = cluster_->Client();
  ASSERT_TRUE(c.ok());
  const fs::path dir = fs::path(cluster_->dir()) / "bcast";
  fs::create_directories(dir / "private");
  const std::string program = (dir / "private" / "prog").string();
  std::ofstream(program) << "#!/bin/sh\necho \"ran $0\"\n";
  fs::permissions(program, fs::perms::owner_all);
  client::StepOptions o;
  o.shape.set_job_id(*id);
  o.shape.set_ntasks(2);
  o.argv = {"prog"};
  o.environment = {"PATH=/usr/bin:/bin"};
  o.work_dir = dir.string();
  o.pmi = false;
  o.stdin_mode = v1::StepLaunchRequest::STDIN_NONE;
  o.bcast_program = program;

  // Each node writes its own copy, and runs it: the test can tell a working --bcast.
  o.bcast_dest = (dir / "out").string() + "/";
  fs::create_directories(dir / "out");
  StepRun run = RunCapturing(*c, o);
  ASSERT_TRUE(run.rc.ok()) << run.rc.status().ToString() << run.err;
  EXPECT_EQ(*run.rc, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("ran " + o.bcast_dest + "slurm_bcast_"), std::string::npos) << run.out;
  size_t copies = 0;
  for (const auto& e : fs::directory_iterator(dir / "out")) copies += e.is_regular_file();
  EXPECT_EQ(copies, 2u) << "one copy for each node";

  // A link planted at the destination, to a file the writer could write (only O_NOFOLLOW stands
  // in the way) and to one it could not: neither is written through.
  for (const bool writable : {true, false}) {
    const fs::path target = dir / (writable ? "mine" : "readonly");
    std::ofstream(target) << "precious\n";
    if (!writable) fs::permissions(target, fs::perms::owner_read);
    const fs::path link = dir / (writable ? "link-mine" : "link-readonly");
    fs::create_symlink(target, link);
    o.bcast_dest = link.string();
    run = RunCapturing(*c, o);
    ASSERT_TRUE(run.rc.ok()) << run.rc.status().ToString() << run.err;
    EXPECT_EQ(*run.rc, 1) << run.out << run.err;
    EXPECT_EQ(run.out.find("ran"), std::string::npos) << "nothing runs: " << run.out;
    EXPECT_NE(run.err.find(link.string() + " is a symbolic link"), std::string::npos) << run.err;
    EXPECT_EQ(Read(target.string()), "precious\n");
    EXPECT_TRUE(fs::is_symlink(link));
  }

  // A hard link at the destination to another of the user's files: each node writes a new file
  // and renames it over the name, so the file the link named is not touched.
  const fs::path mine = dir / "mine-too", planted = dir / "planted";
  std::ofstream(mine) << "precious\n";
  fs::create_hard_link(mine, planted);
  o.bcast_dest = planted.string();
  run = RunCapturing(*c, o);
  ASSERT_TRUE(run.rc.ok()) << run.rc.status().ToString() << run.err;
  EXPECT_EQ(*run.rc, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("ran " + planted.string()), std::string::npos) << run.out;
  EXPECT_EQ(Read(mine.string()), "precious\n");
  EXPECT_EQ(Read(planted.string()), Read(program));
  EXPECT_EQ(fs::hard_link_count(mine), 1u);

  // A client of the user's own may send what srun would refuse: the nodes refuse it too.
  o.bcast_dest = (dir / "out" / ".." / "escaped").string();
  run = RunCapturing(*c, o);
  ASSERT_TRUE(run.rc.ok()) << run.rc.status().ToString() << run.err;
  EXPECT_EQ(*run.rc, 1);
  EXPECT_NE(run.err.find("has a '..' component"), std::string::npos) << run.err;
  EXPECT_FALSE(fs::exists(dir / "escaped"));
}

}  // namespace
}  // namespace muster::testing
