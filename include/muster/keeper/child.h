// The code that runs between a fork and an exec, shared by the agent (muster/agent's Spawn) and
// the muster-keeper program: the task's child (identity, session, cgroup, I/O, then execve) and
// the keeper that starts a batch script, waits for it, records how it ended and ends what it left.
// Raw system calls only: the child shares its parent's memory (CLONE_VM | CLONE_VFORK), and the
// keeper may run in a copy of a multi-threaded agent.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace muster::keeper {

// Where starting a task failed (ChildArgs::stage, KeeperReport::stage); 0: it exec'd.
namespace stages {
enum Stage {
  kSetsid = 1,
  kCgroup,
  kGroups,
  kGid,
  kUid,
  kChdir,
  kStdin,
  kStdout,
  kStderr,
  kExec,
  kPmi,
  kAffinity
};
}  // namespace stages
using stages::Stage;

// One resource limit the child sets on itself just before its exec (sbatch/srun --propagate):
// prlimit64 with RLIM_INFINITY as UINT64_MAX. The parent clamped it to the node's hard limit;
// the child applies it after dropping privileges, so the kernel refuses any raise anyway.
struct ResourceLimitSetting {
  int resource;
  uint64_t soft;
  uint64_t hard;
};

// Everything the child needs, prepared by the parent. The child shares the parent's memory
// (CLONE_VM | CLONE_VFORK, as posix_spawn does), so it never copies the agent's address space;
// it may only make raw system calls, and reports a failure by writing stage/err here.
// The fd number a task finds its PMI socket at (PMI_FD): the first after stdin, stdout, stderr.
inline constexpr int kPmiFd = 3;

struct ChildArgs {
  const char* path;
  char* const* argv;
  char* const* envp;
  const char* cwd;
  bool change_user;
  uid_t uid;
  gid_t gid;
  const gid_t* groups;
  size_t ngroups;
  const char* stdout_path;
  const char* stderr_path;  // nullptr: same as stdout
  int stdout_fd, stderr_fd;
  int output_flags;
  int stdin_fd;
  const char* stdin_path;  // nullptr: /dev/null
  const char* tty_path;    // nullptr: no terminal
  int cgroup_procs_fd;     // fallback for kernels without CLONE_INTO_CGROUP: move in by writing "0"
  int pmi_fd = -1;         // the task inherits it as kPmiFd (its PMI_FD); -1: none
  // The CPUs the task is bound to (sched_setaffinity, srun --cpu-bind): a cpu_set_t-style bit
  // mask of cpu_mask_bytes bytes; nullptr: the parent's affinity is kept.
  const void* cpu_mask = nullptr;
  size_t cpu_mask_bytes = 0;
  // Limits set just before the exec, after the user and the I/O (a low NOFILE must not stop the
  // child opening its files); one that cannot be set leaves the inherited (node's) limit.
  const ResourceLimitSetting* limits = nullptr;
  size_t nlimits = 0;
  int report_fd = -1;  // a child in its own memory (clone3 without CLONE_VM) reports failure here
  volatile int stage = 0;
  volatile int err = 0;
};

// What a keeper needs. It runs either in a copy of the agent's address space (a fork without
// glibc's fork handlers) or as the muster-keeper program, and like the task's child it makes raw
// system calls only.
struct KeeperArgs {
  ChildArgs* child;
  char* task_stack_top;
  // The exit record is written relative to its directory (the agent checked that only it can
  // write there), never through a link: unlinkat, then openat O_EXCL|O_NOFOLLOW, then renameat.
  int exit_dir_fd;
  const char* exit_tmp;   // a name in that directory
  const char* exit_name;  // ditto
  int report_fd;
};

// What the keeper tells the agent through the report pipe once the task has exec'd (or failed).
struct KeeperReport {
  int32_t pid;
  int32_t stage;
  int32_t err;
};

// A helper program's start (muster-keeper) from a child sharing its parent's memory: signals
// reset, the listed descriptors made inheritable in the child's own table, then execve. On
// failure `err` is set and the child exits 127.
struct ExecArgs {
  const char* path;
  char* const* argv;
  char* const* envp;
  const int* inherit_fds;
  int ninherit;
  volatile int err = 0;
};
int ExecMain(void* exec_args);

// The task's child: signals reset, a session of its own, the cgroup, its CPUs, the user, the
// directory, stdin/stdout/stderr, then execve. Exits 127 with `stage`/`err` (and a report on
// report_fd) set when a step fails. Never returns.
int ChildMain(void* child_args);

// The keeper (KeeperArgs): a session of its own, a subreaper deaf to signals, the task started
// through ChildMain and reported on report_fd, its wait status written to the exit record, then
// whatever the task left behind killed. Exits; never returns.
int KeeperMain(void* keeper_args);

}  // namespace muster::keeper
