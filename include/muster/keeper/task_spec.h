// The task a child starts (ChildMain) as plain data, and the ChildArgs made from it: the agent's
// Spawn and the muster-keeper program (which receives one in its KeeperSpec) fill their
// ChildArgs here. Runs in the parent, before any clone: it allocates, unlike the child's code.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "muster/keeper/child.h"

namespace muster::keeper {

struct TaskSpec {
  std::string path;  // the program, already looked up in the task's PATH
  std::vector<std::string> argv;
  std::vector<std::string> env;  // KEY=VALUE
  std::string cwd;               // "": the parent's
  bool change_user = false;
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;
  std::string stdout_path;
  std::optional<std::string> stderr_path;  // none: with stdout
  std::optional<std::string> stdin_path;   // none: /dev/null
  std::optional<std::string> tty_path;     // none: no terminal
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int cgroup_procs_fd = -1;
  int output_flags = 0;
  // The CPUs the task is bound to, bit N of word N/64 for CPU N (srun --cpu-bind; a batch
  // script's, the CPUs --core-spec leaves to its job); empty: the parent's affinity.
  std::vector<uint64_t> cpu_mask;
  // Resource limits set just before the exec (--propagate), already clamped to the node's.
  std::vector<ResourceLimitSetting> limits;
};

// What a ChildArgs points to besides the TaskSpec's own strings.
struct ChildArrays {
  std::vector<char*> argv;  // nullptr-terminated, as execve takes them
  std::vector<char*> envp;
  std::vector<gid_t> groups;
};

// Points `args` at `task` and at `arrays` (filled here), which must both outlive every use of
// `args` unchanged. pmi_fd, report_fd, stage and err are left as they were.
void FillChildArgs(const TaskSpec& task, ChildArrays* arrays, ChildArgs* args);

}  // namespace muster::keeper
