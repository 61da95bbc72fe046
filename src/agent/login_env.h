// --get-user-env on the node: the user's login environment, read by running their login shell as
// them (never as root) in a clean environment, with a timeout and a cap on what it prints. The
// batch script then starts from it with the submitted environment on top (Slurm's rule), or, when
// it cannot be read, from the submitted one alone, the failure logged as slurmd logs it
// ("Unable to get user's local environment, running only with passed environment").
//
// The parse and the command are pure; ReadLoginEnv runs on the io thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "agent_context.h"
#include "muster/agent/launcher.h"
#include "muster/common/status.h"
#include "muster/v1/common.pb.h"

namespace muster::agent {

// Slurm's default --get-user-env timeout, and the most a job may ask for.
inline constexpr uint32_t kDefaultLoginEnvTimeoutS = 8;
inline constexpr uint32_t kMaxLoginEnvTimeoutS = 120;
// What the shell may print before it is killed and the read fails.
inline constexpr size_t kMaxLoginEnvBytes = 1 << 20;

// The timeout a request gets: its own (at most kMaxLoginEnvTimeoutS), 0 meaning the default.
uint32_t LoginEnvTimeoutS(const v1::UserEnvRequest& req);

// The line the shell prints just before the environment: what a profile prints comes first.
inline constexpr std::string_view kLoginEnvMarker = "MUSTER_LOGIN_ENVIRONMENT_FOLLOWS\n";

// The shell's output: anything, the marker, then `env -0`'s NUL-separated NAME=value. Entries
// without a name, or whose name is not one (a shell's exported functions, BASH_FUNC_x%%), are
// dropped; without the marker, nothing is read.
std::vector<std::string> ParseLoginEnv(std::string_view output);

// Who the shell runs as, from the passwd entry (or the job's spec when there is none).
struct LoginUser {
  std::string name, home, shell;
  uint32_t uid = 0, gid = 0;
};

// The shell's process: `shell -l -c 'echo MARKER; exec /usr/bin/env -0'` (mode "S": without
// -l, not a login shell) in $HOME, with only HOME, USER, LOGNAME, SHELL and PATH set, stdin
// /dev/null, stderr discarded. Output, user and groups are the caller's to fill in.
SpawnSpec LoginEnvSpawn(const LoginUser& user, const std::string& mode);

// Runs the job's user's login shell, in the job's cgroup when it has one, and hands `done` its
// environment, or why it could not be read (a timeout, an exit, too much output). A timeout
// kills the cgroup's processes (without one, the shell's process group).
void ReadLoginEnv(AgentContext& ctx, const v1::JobSpec& spec, const std::string& cgroup,
                  std::function<void(Result<std::vector<std::string>>)> done);

}  // namespace muster::agent
