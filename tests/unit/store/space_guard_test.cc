// The state store's guard against a full disk: the reserve (new work refused), its hysteresis,
// the floor (nothing written), and the real thing on a small tmpfs: the RocksDB store refuses
// before RocksDB ever meets ENOSPC (Debian's build aborts on it), opens again once space is back,
// and keeps everything committed.
#include "muster/store/space_guard.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "muster/store/state_store.h"

namespace muster::store {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

TEST(SpaceGuardTest, RefusesNewWorkBelowTheReserveAndEveryWriteBelowTheFloor) {
  uint64_t free = 500 * kMiB;
  SpaceGuard g("/state", 80 * kMiB, [&free](const std::string& dir) -> Result<uint64_t> {
    EXPECT_EQ(dir, "/state");
    return free;
  });
  EXPECT_TRUE(g.RoomForNewWork().ok());
  EXPECT_TRUE(g.RoomForWrite().ok());
  EXPECT_FALSE(g.low());

  free = 79 * kMiB;
  Status s = g.RoomForNewWork();
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "the controller's state directory /state is nearly full (79 MiB free, 90 MiB "
            "needed): new jobs are refused until space is freed; running jobs go on");
  EXPECT_TRUE(g.low());
  EXPECT_TRUE(g.RoomForWrite().ok()) << "the reserve is there to be written into";

  // Hysteresis: back at the reserve is not enough, an eighth more is.
  free = 85 * kMiB;
  EXPECT_FALSE(g.RoomForNewWork().ok());
  free = 90 * kMiB;
  EXPECT_TRUE(g.RoomForNewWork().ok());
  EXPECT_FALSE(g.low());

  free = 20 * kMiB - 1;  // below the floor (a quarter of the reserve)
  s = g.RoomForWrite();
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "the controller's state directory /state is nearly full (19 MiB free, 20 MiB "
            "needed): nothing more can be written safely");
  free = 512 * 1024;
  EXPECT_NE(g.RoomForWrite().message().find("(512 KiB free"), std::string::npos);
}

TEST(SpaceGuardTest, NoReserveMeansNoChecksAndAnUnreadableDiskIsAnError) {
  int looked = 0;
  SpaceGuard off("/state", 0, [&looked](const std::string&) -> Result<uint64_t> {
    ++looked;
    return uint64_t{0};
  });
  EXPECT_TRUE(off.RoomForNewWork().ok());
  EXPECT_TRUE(off.RoomForWrite().ok());
  EXPECT_EQ(looked, 0);

  SpaceGuard gone("/nonexistent/muster-state", 1);
  Status s = gone.RoomForWrite();
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("cannot read the free space of state_dir /nonexistent/muster-state"),
            std::string::npos)
      << s.message();
}

// Runs `body` in a child process with a private mount namespace and a fresh tmpfs of `mib` MiB
// at `dir`; the body's non-empty answer is the failure. 77: no mount namespace here (not root,
// or a sandbox that forbids it).
int InPrivateTmpfs(const std::string& dir, int mib, const std::function<std::string()>& body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      ::_exit(77);
    }
    std::filesystem::create_directories(dir);
    const std::string size = "size=" + std::to_string(mib) + "m";
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, size.c_str()) != 0) ::_exit(77);
    const std::string failure = body();
    if (!failure.empty()) std::fprintf(stderr, "FAILED: %s\n", failure.c_str());
    std::fflush(nullptr);
    ::_exit(failure.empty() ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Fills the filesystem of `dir` until `leave` bytes are free (a file written in 64 KiB pieces).
void FillUntil(const std::string& dir, uint64_t leave) {
  std::ofstream f(dir + "/filler", std::ios::binary | std::ios::app);
  const std::string piece(64 * 1024, 'x');
  while (true) {
    auto free = SpaceGuard::StatFree(dir);
    if (!free.ok() || *free <= leave + piece.size()) break;
    f.write(piece.data(), static_cast<std::streamsize>(piece.size()));
    f.flush();
  }
}

TEST(SpaceGuardTest, TheRocksDbStoreStopsShortOfAFullTmpfsAndComesBack) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("muster-space-test-" + std::to_string(::getpid()));
  const int rc = InPrivateTmpfs(dir, 24, [&]() -> std::string {
    const std::string state = dir + "/state";
    const StoreOptions opts{.reserve_bytes = 8 * kMiB};
    v1::JobRecord job;
    job.mutable_spec()->set_name(std::string(2000, 'n'));
    auto commit_job = [&](StateStore& s, uint64_t id) {
      job.set_id(id);
      Mutation m;
      m.PutJob(job);
      return s.Commit(m, Durability::kSync);
    };
    {
      auto store = OpenRocksDbStateStore(state, opts);
      if (!store.ok()) return "open: " + store.status().ToString();
      if (Status s = commit_job(**store, 1); !s.ok()) return "commit 1: " + s.ToString();
      if (!(*store)->RoomForNewWork().ok()) return "low on an empty tmpfs";

      FillUntil(dir, 5 * kMiB);  // below the reserve (8), above the floor (2)
      Status room = (*store)->RoomForNewWork();
      if (room.code() != StatusCode::kResourceExhausted) return "not low: " + room.ToString();
      if (Status s = commit_job(**store, 2); !s.ok())
        return "commit in the reserve: " + s.ToString();

      FillUntil(dir, 1 * kMiB);  // below the floor: refused before RocksDB is asked
      Status s = commit_job(**store, 3);
      if (s.code() != StatusCode::kResourceExhausted) return "below the floor: " + s.ToString();
    }
    // A restart on the full disk is refused with the reason, not an abort inside RocksDB.
    FillUntil(dir, 1 * kMiB);  // closing may have let go of a log
    auto refused = OpenRocksDbStateStore(state, opts);
    if (refused.ok()) return "opened below the floor";
    if (refused.status().message().find("cannot open the state store: the controller's state "
                                        "directory") == std::string::npos) {
      return "open below the floor: " + refused.status().ToString();
    }
    std::filesystem::remove(dir + "/filler");
    auto store = OpenRocksDbStateStore(state, opts);
    if (!store.ok()) return "open after freeing space: " + store.status().ToString();
    if (!(*store)->RoomForNewWork().ok()) return "still low after freeing space";
    auto loaded = (*store)->LoadAll();
    if (!loaded.ok()) return "load: " + loaded.status().ToString();
    if (loaded->jobs.size() != 2 || loaded->jobs[0].id() != 1 || loaded->jobs[1].id() != 2) {
      return "expected jobs 1 and 2 after the restart, found " +
             std::to_string(loaded->jobs.size());
    }
    return "";
  });
  std::error_code ec;
  std::filesystem::remove(dir, ec);  // the mount point, empty once its namespace is gone
  if (rc == 77) GTEST_SKIP() << "no private mount namespace with a tmpfs here";
  EXPECT_EQ(rc, 0) << "see FAILED above";
}

}  // namespace
}  // namespace muster::store
