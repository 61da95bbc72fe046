// The real Launcher: spawn.h's fork/exec, /proc (common/procfs.h), pidfds.
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "muster/agent/launcher.h"
#include "muster/common/procfs.h"
#include "spawn.h"

namespace muster::agent {
namespace {

class ProcessLauncher final : public Launcher {
 public:
  Result<Spawned> Spawn(const SpawnSpec& spec) override { return agent::Spawn(spec); }
  void Kill(pid_t pid, int sig) override { ::kill(pid, sig); }
  bool GroupAlive(pid_t pgid) override {
    return ::kill(-pgid, 0) == 0 && GroupHasLiveProcess(pgid);
  }
  std::vector<pid_t> Descendants(pid_t root) override { return DescendantsOf(root); }
  uint64_t StartTime(pid_t pid) override {
    auto s = ReadProcStat(pid);
    return s ? s->start_time : 0;
  }
  int OpenPidfd(pid_t pid) override { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }
  int Reap(pid_t pid, bool our_child) override {
    int status = 0;
    pid_t r;
    do {
      r = ::waitpid(pid, &status, our_child ? 0 : WNOHANG);
    } while (r < 0 && errno == EINTR);
    return r == pid ? status : -1;
  }
  std::vector<gid_t> GroupsOf(const std::string& user, gid_t gid) override {
    return agent::GroupsOf(user, gid);
  }
};

}  // namespace

std::unique_ptr<Launcher> NewProcessLauncher() { return std::make_unique<ProcessLauncher>(); }

}  // namespace muster::agent
