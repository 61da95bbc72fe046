#include "muster/keeper/task_spec.h"

namespace muster::keeper {
namespace {

// execve's arrays are of char* but it never writes through them.
std::vector<char*> Pointers(const std::vector<std::string>& strings) {
  std::vector<char*> p;
  p.reserve(strings.size() + 1);
  for (const auto& s : strings) p.push_back(const_cast<char*>(s.c_str()));
  p.push_back(nullptr);
  return p;
}

const char* OrNull(const std::optional<std::string>& s) { return s ? s->c_str() : nullptr; }

}  // namespace

void FillChildArgs(const TaskSpec& task, ChildArrays* arrays, ChildArgs* args) {
  arrays->argv = Pointers(task.argv);
  arrays->envp = Pointers(task.env);
  arrays->groups.assign(task.groups.begin(), task.groups.end());
  args->path = task.path.c_str();
  args->argv = arrays->argv.data();
  args->envp = arrays->envp.data();
  args->cwd = task.cwd.c_str();
  args->change_user = task.change_user;
  args->uid = task.uid;
  args->gid = task.gid;
  args->groups = arrays->groups.data();
  args->ngroups = arrays->groups.size();
  args->stdout_path = task.stdout_path.c_str();
  args->stderr_path = OrNull(task.stderr_path);
  args->stdout_fd = task.stdout_fd;
  args->stderr_fd = task.stderr_fd;
  args->output_flags = task.output_flags;
  args->stdin_fd = task.stdin_fd;
  args->stdin_path = OrNull(task.stdin_path);
  args->tty_path = OrNull(task.tty_path);
  args->cgroup_procs_fd = task.cgroup_procs_fd;
  args->cpu_mask = task.cpu_mask.empty() ? nullptr : task.cpu_mask.data();
  args->cpu_mask_bytes = task.cpu_mask.size() * sizeof(uint64_t);
  args->limits = task.limits.empty() ? nullptr : task.limits.data();
  args->nlimits = task.limits.size();
}

}  // namespace muster::keeper
