// The programs srun runs on its own host around a step (--prolog, --epilog): running one, and
// the environment it gets.
#include "host_program.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "muster/client/step_client.h"

namespace muster::client {

Result<int> RunHostProgram(const std::string& exe, const std::vector<std::string>& args,
                           const std::vector<std::string>& env) {
  // Everything the child needs is made before fork: it only execs (or says why it cannot).
  std::vector<std::string> words{exe};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<std::string> vars = env;
  std::vector<char*> argv, envp;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  for (std::string& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  // The exec's errno comes back through a close-on-exec pipe; nothing comes when it worked.
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(p[0]);
    ::close(p[1]);
    return ErrnoStatus("fork", e);
  }
  if (pid == 0) {
    ::execve(argv[0], argv.data(), envp.data());
    const int e = errno;
    (void)!::write(p[1], &e, sizeof e);
    ::_exit(127);
  }
  ::close(p[1]);
  int exec_errno = 0;
  ssize_t n;
  while ((n = ::read(p[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
  }
  ::close(p[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoStatus("waitpid", errno);
  }
  if (n == static_cast<ssize_t>(sizeof exec_errno)) {
    return ErrnoStatus("cannot run " + exe, exec_errno, StatusCode::kFailedPrecondition);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<std::string> HostProgramEnv(const std::vector<std::string>& srun_env,
                                        const v1::CreateStepResponse& step,
                                        const std::string& nodelist,
                                        const std::string& tasks_per_node, const char* context) {
  const std::string jid = std::to_string(step.job_id());
  const std::string sid = std::to_string(step.step_id());
  const std::string tasks = std::to_string(step.total_tasks());
  const std::vector<std::pair<std::string, std::string>> vars = {
      {"SLURM_JOB_ID", jid},
      {"SLURM_JOBID", jid},
      {"SLURM_STEP_ID", sid},
      {"SLURM_STEPID", sid},
      {"SLURM_STEP_NODELIST", nodelist},
      {"SLURM_STEP_NUM_NODES", std::to_string(step.nodes_size())},
      {"SLURM_STEP_NUM_TASKS", tasks},
      {"SLURM_STEP_TASKS_PER_NODE", tasks_per_node},
      {"SLURM_NTASKS", tasks},
      {"SLURM_NPROCS", tasks},
      {"SLURM_SCRIPT_CONTEXT", context},
  };
  std::vector<std::string> env;
  for (const std::string& e : srun_env) {
    const std::string name = e.substr(0, e.find('='));
    if (std::none_of(vars.begin(), vars.end(), [&](const auto& v) { return v.first == name; })) {
      env.push_back(e);
    }
  }
  for (const auto& [k, v] : vars) env.push_back(k + "=" + v);
  return env;
}

}  // namespace muster::client
