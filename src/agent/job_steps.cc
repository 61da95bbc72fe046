// JobSupervisor: the steps it hands to muster-stepd. A supervisor process holds a step's client
// connection, tasks and I/O, so the step lives on when the agent restarts; the agent starts it,
// keeps its pid and start time in the job's state, signals the step's tasks through the pids the
// supervisor records, and reports the step's end to the controller from the supervisor's record
// (or as killed, when the supervisor died without one), also after a restart.
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "job_supervisor.h"
#include "step_supervisor.h"

namespace muster::agent {

namespace asio = boost::asio;

namespace {

template <class Msg>
bool ReadRecord(const std::string& path, Msg* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream bytes;
  bytes << in.rdbuf();
  return out->ParseFromString(bytes.str());
}

// The process groups of one step's tasks, from its supervisor's record.
std::vector<pid_t> TaskGroupsOf(const std::string& job_dir, uint32_t step) {
  std::vector<pid_t> groups;
  v1::StepTaskPids pids;
  if (!ReadRecord(StepRecordPath(job_dir, step, "tasks"), &pids)) return groups;
  for (int32_t p : pids.pids()) {
    if (p > 1) groups.push_back(p);  // never init's group, whatever the record says
  }
  return groups;
}

}  // namespace

Status JobSupervisor::SuperviseStep(LocalJob& job, const v1::StepSupervisorSetup& setup,
                                    int client_fd) {
  const uint64_t id = job.launch.job_id();
  const uint32_t step = setup.request().step_id();
  const std::string setup_path = StepRecordPath(job.dir, step, "setup");
  if (!WriteFileCloexec(setup_path, setup.SerializeAsString(), 0600)) {
    const int e = errno;
    ::close(client_fd);
    return ErrnoStatus("cannot write " + setup_path, e);
  }
  SpawnSpec sp;
  sp.argv = {ctx_.options.step_supervisor, setup_path};
  sp.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  sp.cwd = "/";
  sp.stdin_fd = client_fd;  // the supervisor's fd 0: the client's connection
  sp.stdout_fd = STDERR_FILENO;
  sp.stderr_fd = STDERR_FILENO;  // its log lines go where the agent's go
  if (!job.cgroup.empty()) {
    sp.cgroup_fd = ::open(job.cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  auto spawned = ctx_.launcher.Spawn(sp);
  ::close(client_fd);
  if (sp.cgroup_fd >= 0) ::close(sp.cgroup_fd);
  if (!spawned.ok()) {
    ::unlink(setup_path.c_str());
    return Internal("cannot start the step supervisor " + ctx_.options.step_supervisor + ": " +
                    spawned.status().message());
  }
  job.supervised_steps[step] = {spawned->pid, ctx_.launcher.StartTime(spawned->pid)};
  job.children.insert(spawned->pid);
  if (Status st = SaveState(job); !st.ok()) {
    spdlog::error("job={} node={} step={}: {}; the step will not be re-adopted after a restart", id,
                  ctx_.node(), step, st.ToString());
  }
  WatchStepSupervisor(id, step, spawned->pidfd, /*our_child=*/true);
  return Status::Ok();
}

void JobSupervisor::WatchStepSupervisor(uint64_t job_id, uint32_t step_id, int pidfd,
                                        bool our_child) {
  auto sd = std::make_shared<asio::posix::stream_descriptor>(ctx_.io, pidfd);
  sd->async_wait(asio::posix::stream_descriptor::wait_read,
                 [this, sd, job_id, step_id, our_child](boost::system::error_code ec) {
                   if (ec == asio::error::operation_aborted) return;
                   LocalJob* job = Find(job_id);
                   if (!job) return;
                   auto it = job->supervised_steps.find(step_id);
                   if (it == job->supervised_steps.end()) return;
                   ctx_.launcher.Reap(it->second.pid, our_child);
                   StepSupervisorEnded(job_id, step_id);
                 });
}

void JobSupervisor::StepSupervisorEnded(uint64_t job_id, uint32_t step_id) {
  LocalJob* job = Find(job_id);
  if (!job) return;
  auto it = job->supervised_steps.find(step_id);
  if (it == job->supervised_steps.end()) return;
  const pid_t pid = it->second.pid;
  job->supervised_steps.erase(it);
  job->children.erase(pid);
  const v1::StepEnded end = EndOf(*job, step_id, pid);
  if (Status st = SaveState(*job); !st.ok()) {
    spdlog::error("job={} node={} {}", job_id, ctx_.node(), st.ToString());
  }
  v1::AgentMessage m;
  *m.mutable_step_ended() = end;
  ctx_.Send(m);
  PublishJobIds();
  CheckClean(job_id);
}

v1::StepEnded JobSupervisor::EndOf(const LocalJob& job, uint32_t step_id, pid_t supervisor) {
  const uint64_t job_id = job.launch.job_id();
  const std::string path = StepRecordPath(job.dir, step_id, "end");
  v1::StepEnded end;
  if (ReadRecord(path, &end) && end.job_id() == job_id && end.step_id() == step_id) return end;
  // Killed before it could say how the step ended (the job's end, an admin, the OOM killer):
  // whatever of its tasks is left goes too.
  spdlog::warn("job={} node={} step={}: its supervisor (pid {}) ended without a record", job_id,
               ctx_.node(), step_id, supervisor);
  for (pid_t g : TaskGroupsOf(job.dir, step_id)) ctx_.launcher.Kill(-g, SIGKILL);
  end.Clear();
  end.set_job_id(job_id);
  end.set_step_id(step_id);
  end.set_run(job.run());
  end.set_exit_code(1);
  end.set_killed(true);
  if (!WriteFileCloexec(path, end.SerializeAsString(), 0600)) {
    spdlog::error("job={} node={} cannot write {}: {}", job_id, ctx_.node(), path,
                  std::strerror(errno));
  }
  return end;
}

std::vector<pid_t> JobSupervisor::SupervisedTaskGroups(const LocalJob& job) const {
  std::vector<pid_t> groups;
  for (const auto& [step, proc] : job.supervised_steps) {
    for (pid_t g : TaskGroupsOf(job.dir, step)) groups.push_back(g);
  }
  return groups;
}

void JobSupervisor::ReadoptSteps(LocalJob& job, const v1::AgentJobState& state) {
  const uint64_t id = job.launch.job_id();
  for (const v1::StepSupervisorState& s : state.steps()) {
    if (s.pid() <= 1) continue;
    int pidfd = -1;
    if (s.start() != 0 && ctx_.launcher.StartTime(s.pid()) == s.start()) {
      pidfd = ctx_.launcher.OpenPidfd(s.pid());
    }
    if (pidfd < 0) {
      // Ended while the agent was away: its end (recorded, or killed) goes out with ReportAll.
      EndOf(job, s.step_id(), s.pid());
      spdlog::info("job={} node={} step={} ended while the agent was away", id, ctx_.node(),
                   s.step_id());
      continue;
    }
    job.supervised_steps[s.step_id()] = {s.pid(), s.start()};
    job.children.insert(s.pid());
    WatchStepSupervisor(id, s.step_id(), pidfd, /*our_child=*/false);
    spdlog::info("job={} node={} step={} re-adopted (supervisor pid {})", id, ctx_.node(),
                 s.step_id(), s.pid());
  }
}

std::vector<v1::StepEnded> JobSupervisor::RecordedStepEnds(const LocalJob& job) const {
  std::vector<v1::StepEnded> ends;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(job.dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step", 0) != 0 || entry.path().extension() != ".end") continue;
    v1::StepEnded end;
    if (!ReadRecord(entry.path().string(), &end) || end.job_id() != job.launch.job_id() ||
        end.run() != job.run()) {
      continue;  // another job's, or an earlier run's (its steps are settled)
    }
    if (job.supervised_steps.count(end.step_id())) continue;  // recorded just before it exits
    ends.push_back(std::move(end));
  }
  return ends;
}

void JobSupervisor::ReportStepEnds(const LocalJob& job) const {
  // Ends reported while no session was up were dropped; the controller ignores repeats.
  for (const v1::StepEnded& end : RecordedStepEnds(job)) {
    v1::AgentMessage m;
    *m.mutable_step_ended() = end;
    ctx_.Send(m);
  }
}

}  // namespace muster::agent
