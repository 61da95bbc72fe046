#include "job_supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "admin_scripts.h"
#include "job_cpus.h"
#include "job_env.h"
#include "login_env.h"
#include "muster/common/clock.h"
#include "muster/common/output_pattern.h"
#include "muster/common/strings.h"
#include "resource_limits.h"
#include "spawn.h"

namespace muster::agent {

namespace asio = boost::asio;
namespace fs = std::filesystem;

namespace {
constexpr uint32_t kAnyRun = 0xffffffffu;
constexpr int kPollCleanMs = 50;
// After SIGKILL, processes that outlived their parent may linger as zombies of another reaper;
// give up waiting for them after this long (cgroups make this exact).
constexpr int kAfterKillMs = 1000;
}  // namespace

LocalJob* JobSupervisor::Find(uint64_t id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

bool JobSupervisor::Move(LocalJob& job, JobPhase to) {
  const JobPhase from = job.phase();
  if (job.MoveTo(to)) return true;
  spdlog::error("job={} node={} no move from {} to {}: ignored", job.launch.job_id(), ctx_.node(),
                PhaseName(from), PhaseName(to));
  return false;
}

void JobSupervisor::After(LocalJob& job, int64_t ms, uint64_t LocalJob::*gen,
                          std::function<void(LocalJob&)> fn) {
  const uint64_t id = job.launch.job_id(), serial = job.serial, at = job.*gen;
  ctx_.executor.PostAfter(ms, [this, id, serial, at, gen, fn = std::move(fn)] {
    LocalJob* j = Find(id);
    if (j && j->serial == serial && j->*gen == at) fn(*j);
  });
}

std::vector<uint64_t> JobSupervisor::RunningJobIds() const {
  std::vector<uint64_t> ids;
  for (const auto& [id, j] : jobs_) ids.push_back(id);
  return ids;
}

std::vector<uint64_t> JobSupervisor::JobIdsSnapshot() const {
  std::lock_guard<std::mutex> l(mu_);
  return job_ids_;
}

std::vector<uint64_t> JobSupervisor::LostJobIdsSnapshot() const {
  std::lock_guard<std::mutex> l(mu_);
  return lost_job_ids_;
}

std::vector<v1::AdoptedJob> JobSupervisor::AdoptedJobsSnapshot() const {
  std::lock_guard<std::mutex> l(mu_);
  return adopted_;
}

void JobSupervisor::Signal(const v1::SignalJob& s) {
  LocalJob* job = Find(s.job_id());
  if (!job || job->run() != s.run() || job->Ending() || s.signal() <= 0 || s.signal() >= 65) {
    return;
  }
  if (s.steps() && s.batch()) {
    SignalJob(*job, s.signal());
    return;
  }
  if (s.steps()) SignalSteps(*job, s.signal());
  if (s.batch()) SignalBatchShell(*job, s.signal());
}

void JobSupervisor::SignalSteps(LocalJob& job, int sig) {
  for (pid_t g : job.step_pgids) ctx_.launcher.Kill(-g, sig);
  for (pid_t g : SupervisedTaskGroups(job)) ctx_.launcher.Kill(-g, sig);
}

// The shell alone, not what it runs in the foreground (as Slurm's scancel -b and --signal=B:):
// a script traps the signal and decides what its commands hear.
void JobSupervisor::SignalBatchShell(LocalJob& job, int sig) {
  if (job.task_pid > 0 && !job.batch_exited()) ctx_.launcher.Kill(job.task_pid, sig);
}

void JobSupervisor::Suspend(const v1::SuspendJob& s) {
  LocalJob* job = Find(s.job_id());
  if (!job || job->run() != s.run() || job->batch_exited()) return;
  if (s.resume() && s.suspended_ms() < 0) return;
  if (job->phase() == JobPhase::kProlog) {
    // Nothing of it runs yet: it starts stopped, or with the longer limit.
    job->suspend_at_start = !s.resume();
    if (s.resume()) job->launch.set_suspended_ms(s.suspended_ms());
    return;
  }
  // The controller repeats its word after a reconnect, and a job past its limit or ending is
  // not stopped again: nothing to do then. A resume of a running job only moves its limit (the
  // controller's count of time suspended).
  const bool was = job->phase() == JobPhase::kSuspended;
  if (!was && job->phase() != JobPhase::kRunning) return;
  if (!s.resume() && was) return;
  if (!s.resume() || was) Move(*job, s.resume() ? JobPhase::kRunning : JobPhase::kSuspended);
  if (s.resume()) job->launch.set_suspended_ms(s.suspended_ms());
  // Recorded first: an agent restarted in between acts on what it finds.
  if (Status st = SaveState(*job); !st.ok()) {
    spdlog::error("job={} node={} {}", s.job_id(), ctx_.node(), st.ToString());
  }
  ++job->limit_timers;  // its limit clock stops, or starts again from the new limit
  if (!s.resume()) {
    SignalJob(*job, SIGSTOP);
    spdlog::info("job={} node={} suspended", s.job_id(), ctx_.node());
    return;
  }
  if (was) SignalJob(*job, SIGCONT);
  ArmTimeLimit(*job);
  spdlog::info("job={} node={} resumed; time limit extended by {} ms", s.job_id(), ctx_.node(),
               s.suspended_ms());
}

void JobSupervisor::ReportAll() {
  for (const auto& [id, job] : jobs_) {
    if (job->Runs()) {
      v1::AgentMessage m;
      m.mutable_job_started()->set_job_id(id);
      m.mutable_job_started()->set_run(job->run());
      ctx_.Send(m);
    }
    if (job->batch_exited()) {
      v1::AgentMessage m;
      *m.mutable_batch_exited() = *job->exit;
      ctx_.Send(m);
    }
    ReportStepEnds(*job);
  }
}

size_t JobSupervisor::Detach() {
  size_t kept = 0;
  for (auto& [id, job] : jobs_) {
    // Steps run here in the agent talk to their client through this process: they cannot
    // outlive it. Those under muster-stepd do.
    for (pid_t g : job->step_pgids) ctx_.launcher.Kill(-g, SIGKILL);
    kept += job->supervised_steps.size();
    ++job->limit_timers;
    ++job->end_timers;
    kept += job->keeper > 0 && !job->batch_exited();
  }
  return kept;
}

size_t JobSupervisor::TerminateAll() {
  for (auto& [id, job] : jobs_) {
    SignalJob(*job, SIGCONT);
    SignalJob(*job, SIGTERM);
  }
  return LiveChildren();
}

size_t JobSupervisor::LiveChildren() const {
  size_t n = 0;
  for (const auto& [id, job] : jobs_) n += job->children.size();
  return n;
}

void JobSupervisor::KillAll() {
  for (auto& [id, job] : jobs_) {
    SignalJob(*job, SIGKILL);
    std::error_code ec;
    fs::remove_all(job->dir, ec);
  }
}

void JobSupervisor::WatchBatch(LocalJob& job, int pidfd, bool our_child) {
  const uint64_t id = job.launch.job_id();
  const pid_t keeper = job.keeper;
  auto sd = std::make_shared<asio::posix::stream_descriptor>(ctx_.io, pidfd);
  sd->async_wait(asio::posix::stream_descriptor::wait_read,
                 [this, sd, id, keeper, our_child](boost::system::error_code ec) {
                   if (ec == asio::error::operation_aborted) return;
                   // An adopted keeper is usually someone else's child (init's); reaping is then
                   // not ours to do, and the launcher only tries.
                   ctx_.launcher.Reap(keeper, our_child);
                   LocalJob* j = Find(id);
                   if (!j || j->keeper != keeper) return;
                   j->children.erase(keeper);
                   BatchEnded(id);
                 });
}

void JobSupervisor::BatchEnded(uint64_t id) {
  LocalJob* j = Find(id);
  if (!j || j->batch_exited()) return;
  int code = 0, sig = 0;
  auto status = ReadExitFile(j->dir + "/exit");
  if (status.ok()) {
    DecodeWaitStatus(*status, &code, &sig);
  } else {
    // The keeper was killed before the script ended: the status is unknowable.
    spdlog::error("job={} node={} the batch script's keeper died without recording its end ({})",
                  id, ctx_.node(), status.status().message());
    sig = SIGKILL;
  }
  v1::BatchExited& exit = j->exit.emplace();
  exit.set_job_id(id);
  exit.set_exit_code(code);
  exit.set_signal(sig);
  exit.set_timed_out(j->timed_out);
  exit.set_run(j->run());
  spdlog::info("job={} node={} batch script exited code={} signal={}{}", id, ctx_.node(), code, sig,
               j->timed_out ? " (time limit)" : "");
  v1::AgentMessage m;
  *m.mutable_batch_exited() = exit;
  ctx_.Send(m);
  CheckClean(id);
}

JobCgroups::Limits JobSupervisor::CgroupLimits(const LocalJob& job) const {
  const v1::LaunchJob& l = job.launch;
  JobCgroups::Limits lim;
  const v1::NodeAllocation* me = nullptr;
  for (const auto& na : l.allocation().nodes()) {
    if (na.node() == ctx_.node()) me = &na;
  }
  if (!me) return lim;
  lim.memory_mb = me->mem_mb();
  // CPU ids are the controller's view of this node; they bind only if this machine has each of
  // them (its numbering may have holes: a count of CPUs would pass ids it lacks, and refuse ids it
  // has). Those left by --core-spec are this machine's.
  std::vector<uint32_t> ids = job.cpus;
  if (ids.empty()) ids.assign(me->cpu_ids().begin(), me->cpu_ids().end());
  auto online = OnlineCpus();
  const bool fits = online.ok() && AllOnline(ids, *online);
  if (fits) {
    lim.cpus = std::move(ids);
    for (const auto& n : ctx_.inventory.numa_nodes()) {
      for (uint32_t c : n.cpus()) {
        if (std::find(lim.cpus.begin(), lim.cpus.end(), c) != lim.cpus.end()) {
          lim.mems.push_back(static_cast<int>(n.os_index()));
          break;
        }
      }
    }
  } else if (ctx_.cgroups.limits_cpus()) {
    spdlog::warn("job={} node={} {}: not pinned", l.job_id(), ctx_.node(),
                 online.ok() ? "CPUs " + FormatCpuList(ids) + " are not all on this machine (" +
                                   FormatCpuList(*online) + " online)"
                             : online.status().message());
  }
  return lim;
}

Status JobSupervisor::LimitGpuDevices(const LocalJob& job) {
  if (!ctx_.cgroups.limits_devices() || ctx_.inventory.gpus().empty()) return Status::Ok();
  std::vector<uint32_t> minors;
  for (uint32_t index : GpusTouched(job.launch, ctx_.inventory.gpus())) {
    const v1::GpuDevice* gpu = nullptr;
    for (const auto& g : ctx_.inventory.gpus()) {
      if (g.index() == index) gpu = &g;
    }
    if (!gpu || gpu->minor_number() < 0) {
      // Without the device's minor number the filter would lock the job out of its own GPU.
      spdlog::warn("job={} node={} gpu{} has no known /dev/nvidia minor: devices not filtered",
                   job.launch.job_id(), ctx_.node(), index);
      return Status::Ok();
    }
    minors.push_back(static_cast<uint32_t>(gpu->minor_number()));
  }
  return JobCgroups::LimitGpus(job.cgroup, minors);
}

Status JobSupervisor::SaveState(const LocalJob& job) {
  v1::AgentJobState st;
  *st.mutable_launch() = job.launch;
  st.set_keeper_pid(job.keeper > 0 ? job.keeper : 0);
  st.set_keeper_start(job.keeper_start);
  st.set_task_pid(job.task_pid > 0 ? job.task_pid : 0);
  st.set_cgroup(job.cgroup);
  st.set_suspended(job.phase() == JobPhase::kSuspended);
  for (const auto& [step, proc] : job.supervised_steps) {
    v1::StepSupervisorState* s = st.add_steps();
    s->set_step_id(step);
    s->set_pid(proc.pid);
    s->set_start(proc.start);
  }
  return spool_.SaveState(job.dir, st);
}

void JobSupervisor::Readopt() {
  std::set<uint64_t> lost;  // started here, but nothing left to re-adopt
  for (JobSpool::Left& left : spool_.Scan()) {
    if (!left.state) {
      lost.insert(left.job_id);
      continue;
    }
    const v1::AgentJobState& st = *left.state;
    const std::string& dir = left.dir;
    auto job = std::make_unique<LocalJob>();
    job->serial = ++serials_;
    const uint64_t id = st.launch().job_id();
    job->launch = st.launch();
    job->dir = dir;
    job->Readopted(st.suspended());
    job->adopted = true;
    job->keeper = st.keeper_pid() > 0 ? st.keeper_pid() : -1;
    job->keeper_start = st.keeper_start();
    // Only what this agent could have written: a process group of a process other than init,
    // the job's own cgroup under this node's base.
    job->task_pid = st.task_pid() > 1 ? st.task_pid() : -1;
    const std::string own_cgroup =
        ctx_.cgroups.enabled() ? ctx_.cgroups.base() + "/job_" + std::to_string(id) : "";
    if (!st.cgroup().empty() && st.cgroup() != own_cgroup) {
      spdlog::error("job={} node={} state names cgroup {}, not its own ({}): ignored", id,
                    ctx_.node(), st.cgroup(), own_cgroup.empty() ? "none" : own_cgroup);
    } else {
      job->cgroup = st.cgroup();
    }
    auto visible = VisibleDevices(job->launch, ctx_.inventory.gpus());
    job->visible_devices = visible.ok() ? *visible : "";
    if (job->task_pid > 0) job->pgids.insert(job->task_pid);
    LocalJob& j = *job;
    jobs_[id] = std::move(job);
    std::string how = "no batch script here";
    if (j.keeper > 0) {
      int pidfd = -1;
      if (j.keeper_start != 0 && ctx_.launcher.StartTime(j.keeper) == j.keeper_start) {
        pidfd = ctx_.launcher.OpenPidfd(j.keeper);
      }
      if (pidfd >= 0) {
        j.children.insert(j.keeper);
        WatchBatch(j, pidfd, /*our_child=*/false);
        how = "batch script running, keeper pid " + std::to_string(j.keeper);
      } else {
        how = "batch script ended while the agent was away";
        BatchEnded(id);  // reported when the session is up
      }
    }
    ReadoptSteps(j, st);
    if (!j.batch_exited() && j.phase() == JobPhase::kRunning) ArmTimeLimit(j);
    spdlog::info("job={} node={} re-adopted after an agent restart ({}; {} step(s) running)", id,
                 ctx_.node(), how, j.supervised_steps.size());
  }
  // Job cgroups no state file speaks for: their processes are unknown to us, so they end.
  for (const auto& [id, dir] : ctx_.cgroups.List()) {
    if (jobs_.count(id) && jobs_[id]->cgroup == dir) continue;
    const size_t n = JobCgroups::Pids(dir).size();
    spdlog::warn("node={} killing {} process(es) of job {} left in {} with no state to re-adopt",
                 ctx_.node(), n, id, dir);
    JobCgroups::Kill(dir);
    for (int i = 0; i < 100 && !JobCgroups::Empty(dir); ++i) ::usleep(10'000);
    JobCgroups::Remove(dir).IgnoreError();
    if (!jobs_.count(id)) lost.insert(id);
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    lost_job_ids_.assign(lost.begin(), lost.end());
  }
  PublishJobIds();
}

void JobSupervisor::PublishJobIds() {
  std::vector<uint64_t> ids;
  std::vector<v1::AdoptedJob> adopted;
  for (const auto& [id, j] : jobs_) {
    ids.push_back(id);
    if (!j->adopted) continue;
    v1::AdoptedJob& a = adopted.emplace_back();
    a.set_job_id(id);
    a.set_run(j->run());
    a.set_uid(j->launch.spec().uid());
    a.set_credential(j->launch.credential());
    // Steps still running, and those that ended while no agent was there to say so: their end
    // follows the registration (ReportAll), and must not be taken for a loss before it.
    for (const auto& [step, proc] : j->supervised_steps) a.add_running_steps(step);
    for (const v1::StepEnded& end : RecordedStepEnds(*j)) a.add_running_steps(end.step_id());
  }
  std::lock_guard<std::mutex> l(mu_);
  job_ids_ = std::move(ids);
  adopted_ = std::move(adopted);
}

void JobSupervisor::SignalJob(LocalJob& job, int sig) {
  for (pid_t g : job.pgids) ctx_.launcher.Kill(-g, sig);
  for (pid_t g : SupervisedTaskGroups(job)) ctx_.launcher.Kill(-g, sig);
  if (sig == SIGKILL) {
    // Step supervisors ignore the catchable signals; the end of the job ends them too.
    for (const auto& [step, proc] : job.supervised_steps) ctx_.launcher.Kill(proc.pid, SIGKILL);
  }
  if (!job.cgroup.empty()) {
    if (sig == SIGKILL) {
      JobCgroups::Kill(job.cgroup);
    } else {
      JobCgroups::Signal(job.cgroup, sig);
    }
  } else if (job.keeper > 0 && !job.batch_exited()) {
    // No cgroup: processes that left the process group are still the keeper's descendants
    // (it is their subreaper).
    for (pid_t p : ctx_.launcher.Descendants(job.keeper)) ctx_.launcher.Kill(p, sig);
  }
}

void JobSupervisor::Launch(const v1::LaunchJob& l) {
  if (ctx_.stopping) return;
  const uint64_t id = l.job_id();
  if (LocalJob* existing = Find(id)) {
    if (existing->run() == l.requeue_count()) {
      if (existing->Runs()) {  // a repeated launch: confirm again
        v1::AgentMessage m;
        m.mutable_job_started()->set_job_id(id);
        m.mutable_job_started()->set_run(l.requeue_count());
        ctx_.Send(m);
      }
      return;  // (or its prolog is still running: it answers when done)
    }
    spdlog::warn("job={} node={} new run {} while run {} is still here; killing the old one", id,
                 ctx_.node(), l.requeue_count(), existing->run());
    SignalJob(*existing, SIGKILL);
    jobs_.erase(id);
  }
  auto job = std::make_unique<LocalJob>();
  job->serial = ++serials_;
  job->launch = l;
  job->dir = spool_.JobDir(id);
  job->launch_received = std::chrono::steady_clock::now();
  LocalJob& j = *job;
  jobs_[id] = std::move(job);
  const v1::JobSpec& spec = l.spec();
  const bool root = ::geteuid() == 0;
  if (!root && spec.uid() != ::geteuid()) {
    return FailLaunch(id,
                      "musterd runs as uid " + std::to_string(::geteuid()) +
                          ", not root, so it cannot run jobs of uid " + std::to_string(spec.uid()),
                      false);
  }
  auto visible = VisibleDevices(l, ctx_.inventory.gpus());
  if (!visible.ok()) return FailLaunch(id, visible.status().message(), false);
  j.visible_devices = *visible;
  if (Status st = spool_.MakeJobDir(id); !st.ok()) return FailLaunch(id, st.message(), false);
  // -S/--core-spec, --thread-spec: never on the CPUs it set aside, nor on a guess at which.
  if (SetsCpusAside(spec)) {
    std::vector<uint32_t> held;
    for (const auto& na : l.allocation().nodes()) {
      if (na.node() == ctx_.node()) held.assign(na.cpu_ids().begin(), na.cpu_ids().end());
    }
    auto left = CpusLeftToJobHere(spec, held);
    if (!left.ok()) return FailLaunch(id, left.status().message(), false);
    j.cpus = std::move(*left);
  }
  bool cpuset = false;  // the job's CPUs are its cgroup's cpuset.cpus
  if (ctx_.cgroups.enabled()) {
    const JobCgroups::Limits limits = CgroupLimits(j);
    auto cg = ctx_.cgroups.Create(id, limits);
    if (!cg.ok()) return FailLaunch(id, cg.status().message(), false);
    j.cgroup = *cg;
    cpuset = ctx_.cgroups.limits_cpus() && !limits.cpus.empty();
    if (Status st = LimitGpuDevices(j); !st.ok()) return FailLaunch(id, st.message(), false);
  }
  if (!j.cpus.empty() && !cpuset) {
    // Its processes are bound to what is left (sched_setaffinity), which they may undo. Said, not
    // refused, as other limits this node cannot enforce are (GPU device files): the job holds
    // the node whole, so only this node's own system CPUs pay for it.
    spdlog::warn(
        "job={} node={} --core-spec/--thread-spec: no cpuset here ({}); the CPUs set aside are "
        "kept from the job only by binding it to {}, which its processes can undo",
        id, ctx_.node(),
        !ctx_.cgroups.enabled()       ? "no job cgroups"
        : !ctx_.cgroups.limits_cpus() ? "the cpuset controller is not delegated"
                                      : "its CPUs are not all online",
        FormatCpuList(j.cpus));
  }
  PublishJobIds();
  const std::string& prolog = ctx_.options.config.agent.prolog;
  if (prolog.empty()) return ReadUserEnvThenStart(id);
  const uint32_t run = j.run();
  RunAdminScript(
      ctx_, "prolog", prolog, AdminScriptEnv(j.launch, ctx_.node(), j.visible_devices, j.cgroup),
      ctx_.options.config.agent.prolog_timeout_s, [this, id, run](const std::string& error) {
        LocalJob* pj = Find(id);
        if (!pj || pj->run() != run) return;
        const std::string failure =
            error.empty() || StartsWith(error, "prolog") ? error : "prolog failed: " + error;
        if (!error.empty()) spdlog::error("job={} node={} {}", id, ctx_.node(), error);
        if (pj->phase() == JobPhase::kCancelledInProlog) {
          // The controller waits for JobCleaned, which carries a failure so that the node is
          // still drained.
          pj->prolog_error = failure;
          Move(*pj, JobPhase::kEnding);
          return CheckClean(id);
        }
        if (pj->phase() != JobPhase::kProlog) return;
        if (!failure.empty()) return FailLaunch(id, failure, /*node_fault=*/true);
        ReadUserEnvThenStart(id);
      });
}

void JobSupervisor::ReadUserEnvThenStart(uint64_t id) {
  LocalJob& j = *Find(id);
  if (!j.launch.batch_node() || !j.launch.spec().has_get_user_env()) return StartJob(id);
  const uint32_t run = j.run();
  ReadLoginEnv(
      ctx_, j.launch.spec(), j.cgroup, [this, id, run](Result<std::vector<std::string>> env) {
        LocalJob* pj = Find(id);
        if (!pj || pj->run() != run) return;
        if (env.ok()) {
          pj->login_env = std::move(*env);
        } else {
          // As slurmd: logged, and the job runs with what it was submitted with.
          spdlog::error(
              "job={} node={} _get_user_env: Unable to get user's local environment, running only "
              "with passed environment: {}",
              id, ctx_.node(), env.status().message());
        }
        if (pj->phase() == JobPhase::kCancelledInProlog) {
          Move(*pj, JobPhase::kEnding);
          return CheckClean(id);
        }
        if (pj->phase() != JobPhase::kProlog) return;
        StartJob(id);
      });
}

void JobSupervisor::FailLaunch(uint64_t id, const std::string& why, bool node_fault) {
  LocalJob* job = Find(id);
  if (!job) return;
  std::error_code ignored;
  fs::remove_all(job->dir, ignored);
  if (!job->cgroup.empty()) {
    JobCgroups::Kill(job->cgroup);
    JobCgroups::Remove(job->cgroup).IgnoreError();
  }
  spdlog::warn("job={} node={} launch failed: {}", id, ctx_.node(), why);
  v1::AgentMessage m;
  m.mutable_job_launch_failed()->set_job_id(id);
  m.mutable_job_launch_failed()->set_run(job->run());
  // Proto text must be UTF-8, and the reason names the user's paths (any bytes): escaped, or the
  // controller could not parse the message and would drop this node's whole session.
  m.mutable_job_launch_failed()->set_message(Printable(why));
  m.mutable_job_launch_failed()->set_node_fault(node_fault);
  ++ctx_.counters.launches_failed;
  ctx_.counters.launches_node_fault += node_fault;
  jobs_.erase(id);
  PublishJobIds();
  ctx_.Send(m);
}

void JobSupervisor::StartJob(uint64_t id) {
  LocalJob& j = *Find(id);
  const v1::LaunchJob& l = j.launch;
  const v1::JobSpec& spec = l.spec();
  const bool root = ::geteuid() == 0;
  if (l.batch_node()) {
    if (spec.script().rfind("#!", 0) != 0) {
      return FailLaunch(
          id, "the launch carries no batch script (the controller could not read it back)", false);
    }
    std::string script = j.dir + "/script";
    // Close-on-exec, so a process started meanwhile never holds it open for writing (which
    // would make executing it fail with ETXTBSY). A fresh file: one an earlier run of the job
    // left is the user's.
    ::unlink(script.c_str());
    if (!WriteFileCloexec(script, spec.script(), 0700)) {
      return FailLaunch(
          id, "cannot write the batch script to " + script + ": " + std::strerror(errno), false);
    }
    if (root && ::chown(script.c_str(), spec.uid(), spec.gid()) != 0) {
      return FailLaunch(id, "cannot hand the batch script to uid " + std::to_string(spec.uid()),
                        false);
    }
    PatternVars vars = PatternVarsOf(l);
    vars.node = ctx_.node();
    SpawnSpec sp;
    sp.argv.push_back(script);
    for (const auto& a : spec.script_args()) sp.argv.push_back(a);
    sp.env = BuildBatchEnv(l, ctx_.node(), ctx_.options.config_path, j.visible_devices,
                           j.login_env ? &*j.login_env : nullptr);
    // --propagate: the submitting shell's limits, never above the node's (resource_limits.h).
    ClampedLimits limits =
        ClampLimits({spec.propagated_limits().begin(), spec.propagated_limits().end()},
                    OwnHardLimit, JobMemoryBytes(spec));
    for (const std::string& note : limits.notes) {
      spdlog::warn("job={} node={} {}", id, ctx_.node(), note);
    }
    sp.limits = std::move(limits.set);
    sp.cwd = spec.work_dir();
    sp.change_user = root && spec.uid() != 0;
    sp.uid = spec.uid();
    sp.gid = spec.gid();
    if (sp.change_user) sp.groups = ctx_.launcher.GroupsOf(spec.user(), spec.gid());
    sp.stdout_path = ExpandOutputPattern(spec.stdout_pattern(), vars, spec.work_dir());
    sp.stderr_path = spec.stderr_pattern().empty()
                         ? sp.stdout_path
                         : ExpandOutputPattern(spec.stderr_pattern(), vars, spec.work_dir());
    if (spec.open_mode_append()) {  // --open-mode=append: a requeued run adds to what was there
      sp.append_output = true;
      sp.truncate_output = false;
    }
    // sbatch --input: opened by the script's user, as its output files are.
    if (!spec.stdin_pattern().empty()) {
      sp.stdin_path = ExpandOutputPattern(spec.stdin_pattern(), vars, spec.work_dir());
    }
    sp.cpus = j.cpus;  // what --core-spec leaves it, also without a cgroup's cpuset
    // A keeper waits for the script and records how it ended, so a restarted agent still knows.
    sp.exit_file = j.dir + "/exit";
    sp.keeper_program = ctx_.options.keeper_program;
    // Every process of the job starts in its cgroup (a write of "0" by the child itself).
    if (!j.cgroup.empty()) {
      sp.cgroup_fd = ::open(j.cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    auto spawned = ctx_.launcher.Spawn(sp);
    if (sp.cgroup_fd >= 0) ::close(sp.cgroup_fd);
    if (!spawned.ok()) return FailLaunch(id, spawned.status().message(), false);
    j.keeper = spawned->pid;
    j.keeper_start = ctx_.launcher.StartTime(spawned->pid);
    j.task_pid = spawned->task_pid;
    j.children.insert(j.keeper);
    j.pgids.insert(j.task_pid);
    WatchBatch(j, spawned->pidfd, /*our_child=*/true);
    spdlog::info("job={} node={} batch script started pid={} keeper={} user={}", id, ctx_.node(),
                 j.task_pid, j.keeper, spec.user());
  }
  Move(j, JobPhase::kRunning);
  if (j.suspend_at_start) Move(j, JobPhase::kSuspended);  // suspended while its prolog ran
  if (Status st = SaveState(j); !st.ok()) {
    // Not fatal: the job runs; it would only be lost if this agent restarted before it ends.
    spdlog::error("job={} node={} {}", id, ctx_.node(), st.ToString());
  }
  if (j.phase() == JobPhase::kSuspended) {
    SignalJob(j, SIGSTOP);
  } else {
    ArmTimeLimit(j);
  }
  ctx_.counters.Started(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - j.launch_received).count());
  v1::AgentMessage m;
  m.mutable_job_started()->set_job_id(id);
  m.mutable_job_started()->set_run(l.requeue_count());
  ctx_.Send(m);
}

// The agents enforce time limits themselves (the controller only records the end): SIGTERM at
// the limit, SIGKILL after the grace.
void JobSupervisor::ArmTimeLimit(LocalJob& job) {
  const v1::LaunchJob& l = job.launch;
  if (l.time_limit_ms() <= 0) return;
  const int64_t remaining = l.start_time_ms() + l.time_limit_ms() +
                            std::max<int64_t>(0, l.suspended_ms()) - ctx_.clock.NowMs();
  ++job.limit_timers;  // one limit at a time: the newest
  After(job, remaining, &LocalJob::limit_timers, [this](LocalJob& j) { OnTimeLimit(j); });
  const v1::JobSpec& spec = l.spec();
  // Every node's steps hear it; with B: only the batch shell, on its node.
  if (spec.signal() > 0 && spec.signal() < 65 && (l.batch_node() || !spec.signal_batch_only())) {
    // --signal=[B:]SIG@secs: the job hears SIG that long before its limit, to checkpoint.
    const int64_t warn_in = remaining - static_cast<int64_t>(spec.signal_time_s()) * 1000;
    After(job, warn_in, &LocalJob::limit_timers, [this](LocalJob& j) {
      if (j.phase() != JobPhase::kRunning || j.batch_exited()) return;
      const v1::JobSpec& sp = j.launch.spec();
      spdlog::info("job={} node={} signal {} before its time limit", j.launch.job_id(), ctx_.node(),
                   sp.signal());
      // B: the batch shell alone; otherwise the steps alone, as Slurm does.
      if (sp.signal_batch_only()) {
        SignalBatchShell(j, sp.signal());
      } else {
        SignalSteps(j, sp.signal());
      }
    });
  }
}

void JobSupervisor::OnTimeLimit(LocalJob& job) {
  if (job.batch_exited() || !Move(job, JobPhase::kTimedOut)) return;
  spdlog::info("job={} node={} reached its time limit; SIGTERM, SIGKILL after {} ms",
               job.launch.job_id(), ctx_.node(), job.launch.kill_grace_ms());
  job.timed_out = true;
  StartKill(job, job.launch.kill_grace_ms());
}

void JobSupervisor::StartKill(LocalJob& job, uint32_t grace_ms, int first_signal, bool batch_only) {
  SignalJob(job, SIGCONT);  // a stopped process cannot act on SIGTERM
  if (first_signal <= 0 || first_signal >= 65) first_signal = SIGTERM;
  if (batch_only && job.task_pid > 0 && !job.batch_exited()) {
    // --signal=B:SIG: the batch script is told (to checkpoint and end its steps itself).
    SignalBatchShell(job, first_signal);
  } else {
    SignalJob(job, first_signal);
  }
  if (job.kill != KillStage::kNone) return;  // the first grace holds
  job.kill = KillStage::kGrace;
  After(job, grace_ms, &LocalJob::end_timers, [this](LocalJob& j) {
    SignalJob(j, SIGKILL);
    j.kill = KillStage::kKilled;
    // Processes that outlived their parent may linger as zombies of another reaper.
    After(j, kAfterKillMs, &LocalJob::end_timers, [this](LocalJob& k) {
      k.kill = KillStage::kGivenUp;
      CheckClean(k.launch.job_id());
    });
    CheckClean(j.launch.job_id());
  });
}

void JobSupervisor::Terminate(const v1::TerminateJob& t) {
  LocalJob* job = Find(t.job_id());
  if (!job) {
    v1::AgentMessage m;
    m.mutable_job_cleaned()->set_job_id(t.job_id());
    m.mutable_job_cleaned()->set_run(t.run());
    ctx_.Send(m);
    return;
  }
  if (t.run() != kAnyRun && job->run() > t.run()) return;  // aimed at an older run
  if (!job->Ending()) {
    spdlog::info("job={} node={} terminating ({}): {}", t.job_id(), ctx_.node(),
                 PhaseName(job->phase()), t.reason());
    Move(*job,
         job->phase() == JobPhase::kProlog ? JobPhase::kCancelledInProlog : JobPhase::kEnding);
    ++job->limit_timers;
    StartKill(*job, t.kill_grace_ms(), t.signal(), t.signal_batch_only());
  }
  CheckClean(t.job_id());
}

void JobSupervisor::CheckClean(uint64_t id) {
  LocalJob* job = Find(id);
  // Only once the controller ended it, its prolog is back, and no epilog runs yet.
  if (!job || job->phase() != JobPhase::kEnding) return;
  bool groups_empty = true;
  if (!job->cgroup.empty()) {
    groups_empty = JobCgroups::Empty(job->cgroup);  // exact: daemonized processes included
  } else {
    for (pid_t g : job->pgids) {
      if (ctx_.launcher.GroupAlive(g)) groups_empty = false;
    }
  }
  if (!job->children.empty() || (!groups_empty && job->kill != KillStage::kGivenUp)) {
    if (job->poll_armed) return;
    job->poll_armed = true;
    After(*job, kPollCleanMs, &LocalJob::end_timers, [this](LocalJob& j) {
      j.poll_armed = false;
      CheckClean(j.launch.job_id());
    });
    return;
  }
  if (!groups_empty) {
    spdlog::warn("job={} node={} some processes survived SIGKILL (zombies?); releasing anyway", id,
                 ctx_.node());
  }
  const std::string& epilog = ctx_.options.config.agent.epilog;
  if (epilog.empty()) return Release(*job);
  // Every job this node took gets its epilog, also one ended during its prolog (the epilog
  // undoes what the prolog set up, and the admin's accounting expects one per job and node).
  Move(*job, JobPhase::kEpilog);
  const uint32_t run = job->run();
  RunAdminScript(ctx_, "epilog", epilog,
                 AdminScriptEnv(job->launch, ctx_.node(), job->visible_devices, job->cgroup),
                 ctx_.options.config.agent.epilog_timeout_s,
                 [this, id, run](const std::string& error) {
                   LocalJob* j = Find(id);
                   if (!j || j->run() != run || j->phase() != JobPhase::kEpilog) return;
                   j->epilog_error = error;
                   if (!error.empty()) spdlog::error("job={} node={} {}", id, ctx_.node(), error);
                   Release(*j);
                 });
}

void JobSupervisor::Release(LocalJob& job) {
  const uint64_t id = job.launch.job_id();
  std::error_code ec;
  fs::remove_all(job.dir, ec);
  if (!job.cgroup.empty()) {
    if (Status st = JobCgroups::Remove(job.cgroup); !st.ok()) {
      spdlog::warn("job={} node={} {}", id, ctx_.node(), st.message());
    }
  }
  if (job.launch.batch_node() && !job.batch_exited() && job.keeper < 0) {
    // Stopped before its script started (during the prolog): its end is still the job's end.
    v1::AgentMessage b;
    b.mutable_batch_exited()->set_job_id(id);
    b.mutable_batch_exited()->set_signal(SIGTERM);
    b.mutable_batch_exited()->set_timed_out(job.timed_out);
    b.mutable_batch_exited()->set_run(job.run());
    ctx_.Send(b);
  }
  v1::AgentMessage m;
  m.mutable_job_cleaned()->set_job_id(id);
  m.mutable_job_cleaned()->set_run(job.run());
  m.mutable_job_cleaned()->set_epilog_error(Printable(job.epilog_error));
  m.mutable_job_cleaned()->set_prolog_error(Printable(job.prolog_error));
  jobs_.erase(id);  // `job` is gone from here on
  PublishJobIds();
  ctx_.Send(m);
  spdlog::info("job={} node={} cleaned up", id, ctx_.node());
}

}  // namespace muster::agent
