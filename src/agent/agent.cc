// Agent: builds its parts, starts them in order, and stops them (keeping or ending the jobs).
// Every part runs on the agent's one io thread; the controller link runs its own thread and
// posts what it receives there.
#include "muster/agent/agent.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>
#include <utility>
#include <vector>

#include "admin_scripts.h"
#include "agent_context.h"
#include "controller_session.h"
#include "discovery.h"
#include "gpu_health.h"
#include "inventory.h"
#include "io_executor.h"
#include "job_spool.h"
#include "job_supervisor.h"
#include "muster/common/clock.h"
#include "muster/common/node_keys.h"
#include "muster/common/own_files.h"
#include "muster/common/strings.h"
#include "muster/common/version.h"
#include "muster/metrics/metrics_server.h"
#include "step_service.h"

namespace muster::agent {

namespace asio = boost::asio;
namespace fs = std::filesystem;

namespace {

// A helper program (muster-stepd, muster-keeper): beside this musterd (a build tree, a local
// cluster), else in PREFIX/libexec/muster for a musterd in PREFIX/sbin (an install anywhere),
// else where the package puts it; "none" when none exists.
std::string FindHelper(const std::string& name) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& p : {self.parent_path() / name,
                              self.parent_path().parent_path() / "libexec" / "muster" / name}) {
      if (::access(p.c_str(), X_OK) == 0) return p.string();
    }
  }
  const std::string packaged = "/usr/libexec/muster/" + name;
  if (::access(packaged.c_str(), X_OK) == 0) return packaged;
  return "none";
}

// The boot id (one line); "" when unreadable (a reboot of such a node is never seen done: it
// times out, drained).
std::string ReadBootId(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  line = std::string(Trim(line));
  if (line.empty()) spdlog::warn("cannot read this host's boot id from {}", path);
  return line.substr(0, 64);
}

}  // namespace

class Agent::Impl {
 public:
  explicit Impl(AgentOptions o)
      : options_(std::move(o)),
        launcher_(options_.launcher ? options_.launcher
                                    : std::shared_ptr<Launcher>(NewProcessLauncher())),
        ctx_(options_, io_, io_executor_, *SystemClock::Get(), *launcher_) {}

  Status Start();
  void Detach();
  void Shutdown();

  std::string step_address() const {
    std::lock_guard<std::mutex> l(mu_);
    return step_address_;
  }
  size_t num_jobs() const { return jobs_ ? jobs_->JobIdsSnapshot().size() : 0; }
  int metrics_port() const { return metrics_port_; }
  uint64_t refused_commands() const { return session_ ? session_->refused_commands() : 0; }
  bool PostToLoop(std::function<void()> fn) {
    std::lock_guard<std::mutex> l(mu_);
    if (!started_ || stopped_) return false;
    asio::post(io_, std::move(fn));
    return true;
  }

  AgentOptions options_;
  std::unique_ptr<ControllerLink> link_;

 private:
  // Defaults from the configuration and the host.
  void ResolveOptions(const OsInventory& os);
  // Once, and only when started: stops the controller link (job ends caused by our own stop are
  // not job results).
  bool BeginStop();
  size_t RunOnIo(const std::function<size_t()>& fn);
  void StopAccepting();  // io thread: no heartbeats, checks or new steps
  void StopIoThread();
  // [agent] metrics_address: /metrics, read on the io thread.
  Status ServeMetrics();
  std::string MetricsText() const;

  std::shared_ptr<Launcher> launcher_;
  asio::io_context io_;
  IoExecutor io_executor_{io_};
  AgentContext ctx_;
  GpuHealthSource gpu_source_;
  std::unique_ptr<JobSpool> spool_;
  std::unique_ptr<JobSupervisor> jobs_;
  std::unique_ptr<HealthCheck> health_;
  std::unique_ptr<ControllerSession> session_;
  std::unique_ptr<StepService> steps_;
  std::unique_ptr<GpuHealthWatch> gpu_watch_;
  std::unique_ptr<metrics::MetricsServer> metrics_;
  int metrics_port_ = 0;
  int64_t start_time_ms_ = 0;
  std::unique_ptr<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::thread io_thread_;

  mutable std::mutex mu_;
  std::string step_address_;  // mu_
  bool started_ = false;      // mu_
  bool stopped_ = false;      // mu_
};

void Agent::Impl::ResolveOptions(const OsInventory& os) {
  AgentOptions& o = options_;
  if (o.node_name.empty()) o.node_name = os.hostname;
  if (o.spool_dir.empty()) o.spool_dir = o.config.agent.spool_dir + "/" + o.node_name;
  if (o.job_state_dir.empty()) {
    o.job_state_dir = o.config.agent.job_state_dir.empty()
                          ? o.spool_dir
                          : o.config.agent.job_state_dir + "/" + o.node_name;
  }
  if (o.step_address.empty()) o.step_address = o.config.agent.step_address;
  if (o.controller_address.empty()) {
    for (const std::string& a : ControllerAgentAddresses(o.config)) {
      o.controller_address += (o.controller_address.empty() ? "" : ",") + a;
    }
  }
  // A test's launcher starts nothing real: its steps run in the agent unless it names the program.
  if (o.step_supervisor.empty())
    o.step_supervisor = o.launcher ? "none" : FindHelper("muster-stepd");
  if (o.step_supervisor == "none") o.step_supervisor.clear();
  if (o.keeper_program.empty()) o.keeper_program = FindHelper("muster-keeper");
  if (o.keeper_program == "none") o.keeper_program.clear();
}

Status Agent::Impl::Start() {
  AgentOptions& o = options_;
  const OsInventory os = ProbeOs();
  ResolveOptions(os);
  if (!IsValidNodeName(o.node_name)) {
    return InvalidArgument("node name '" + o.node_name +
                           "' is not valid (letters, digits, '.', '_' and '-', at most 64)");
  }
  if (o.step_supervisor.empty()) {
    spdlog::warn("node={} no muster-stepd: steps run inside the agent and end when it stops",
                 o.node_name);
  } else {
    spdlog::info("node={} steps run under {}", o.node_name, o.step_supervisor);
  }
  if (o.keeper_program.empty()) {
    spdlog::info("node={} no muster-keeper: batch scripts are kept by copies of the agent",
                 o.node_name);
  }
  const std::vector<std::string> controllers = Split(o.controller_address, ',');
  if (controllers.empty() ||
      std::find(controllers.begin(), controllers.end(), "") != controllers.end()) {
    return InvalidArgument("controller address '" + o.controller_address +
                           "' is not host:port[,host:port...]");
  }
  std::optional<ControllerLinkTls> tls;
  std::string node_key;
  if (o.config.tls.enabled()) {
    auto id = LoadNodeTlsIdentity(o.config.tls, o.node_name);
    if (!id.ok()) return id.status();
    tls = ControllerLinkTls{std::move(*id), o.config.tls.controller_name};
  } else {
    if (!std::all_of(controllers.begin(), controllers.end(), IsLoopbackAddress) &&
        !o.config.controller.insecure) {
      return FailedPrecondition("controller address " + o.controller_address +
                                " is not a loopback address and [tls] is not configured; "
                                "configure [tls], or set insecure = true under [controller] on a "
                                "network only the cluster's hosts reach");
    }
    if (!o.controller_link && !o.config.node_auth.enabled()) {
      return FailedPrecondition(
          "without [tls], this agent must prove which node it is: set key_file under "
          "[node_auth] (keys made by `muster certs --node-keys`), or configure [tls]");
    }
    if (!o.controller_link) {  // a test's own link proves nothing
      auto key = LoadNodeKey(o.config.node_auth, o.node_name);
      if (!key.ok()) return key.status();
      node_key = std::move(*key);
    }
    // Said at every start: a development setup, not a production one.
    spdlog::warn(
        "node={} talks to the controller at {} without TLS: it proves its node with its key, but "
        "what it exchanges (jobs' scripts and environments) is not encrypted. Use [tls] in "
        "production",
        o.node_name, o.controller_address);
  }
  // The job-state base first: on a shared tmpfs another user may have made it (or a link) before
  // us, and nothing of ours goes inside until it is known to be ours.
  std::vector<std::string> own_dirs;
  if (!o.config.agent.job_state_dir.empty() &&
      o.job_state_dir == o.config.agent.job_state_dir + "/" + o.node_name) {
    own_dirs.push_back(o.config.agent.job_state_dir);
  }
  own_dirs.push_back(o.spool_dir);
  own_dirs.push_back(o.job_state_dir);
  for (const std::string& dir : own_dirs) {
    std::error_code ec;
    if (!fs::exists(dir, ec)) {
      fs::create_directories(dir, ec);
      if (ec) return Internal("cannot create " + dir + ": " + ec.message());
      fs::permissions(dir, fs::perms(0755), ec);  // ours alone, whatever the umask
    }
    if (Status st = CheckOwnDirectory(dir); !st.ok()) {
      return FailedPrecondition("refusing to use " + dir + ": " + st.message() +
                                "; musterd keeps only its own files there");
    }
  }
  MUSTER_ASSIGN_OR_RETURN(Discovered found, Discover(o, os));
  ctx_.inventory = std::move(found.inventory);
  gpu_source_ = std::move(found.health);
  ctx_.cgroups = JobCgroups::Detect(o.config.agent.cgroup_root, o.node_name);
  ctx_.inventory.set_isolation(ctx_.cgroups.description());
  ctx_.inventory.set_boot_id(ReadBootId(o.boot_id_file));
  // The admin's programs run as root: none may be one another user could change.
  const AgentConfig& ac = o.config.agent;
  for (const auto& [key, program] :
       {std::pair{"reboot_program", &ac.reboot_program}, std::pair{"prolog", &ac.prolog},
        std::pair{"epilog", &ac.epilog},
        std::pair{"health_check_program", &ac.health_check_program}}) {
    if (program->empty()) continue;
    if (Status st = CheckTrustedProgram(*program); !st.ok()) {
      return FailedPrecondition(std::string("agent.") + key + ": " + st.message());
    }
  }
  ctx_.inventory.set_can_reboot(!ac.reboot_program.empty());
  ctx_.inventory.set_reboot_once_per_boot(true);  // RunRebootProgram's marker
  if (ctx_.cgroups.enabled()) {
    spdlog::info("node={} isolation: {}", o.node_name, ctx_.cgroups.description());
  } else {
    spdlog::warn("node={} isolation: {}", o.node_name, ctx_.cgroups.description());
  }

  spool_ = std::make_unique<JobSpool>(o.spool_dir, o.job_state_dir);
  jobs_ = std::make_unique<JobSupervisor>(ctx_, *spool_);
  health_ = std::make_unique<HealthCheck>(ctx_);
  ctx_.instance_id = RandomHex(8);
  session_ = std::make_unique<ControllerSession>(ctx_, *jobs_, *spool_, *health_, ctx_.instance_id);
  steps_ = std::make_unique<StepService>(ctx_, *jobs_);
  gpu_watch_ = std::make_unique<GpuHealthWatch>(ctx_, gpu_source_);
  MUSTER_RETURN_IF_ERROR(steps_->Listen(o.step_address, os.hostname));
  start_time_ms_ = SystemClock::Get()->NowMs();
  MUSTER_RETURN_IF_ERROR(ServeMetrics());  // before `started_`: a failure leaves nothing to stop
  {
    std::lock_guard<std::mutex> l(mu_);
    step_address_ = steps_->address();
    started_ = true;
  }
  ctx_.inventory.set_step_address(steps_->address());

  ControllerLink::Callbacks cb;
  cb.make_register = [this] { return session_->MakeRegister(); };
  cb.on_connected = [this](const v1::RegisterResponse& resp) {
    asio::post(io_, [this, resp] { session_->OnConnected(resp); });
  };
  cb.on_message = [this](v1::ControllerMessage m) {
    asio::post(io_, [this, m = std::move(m)] { session_->OnMessage(m); });
  };
  cb.on_disconnected = [this] { asio::post(io_, [this] { session_->OnDisconnected(); }); };
  cb.is_stale = [this](uint64_t epoch) { return session_->IsStale(epoch); };
  link_ = o.controller_link
              ? o.controller_link(o.controller_address, o.node_name, session_->instance_id(),
                                  std::move(cb))
              : NewGrpcControllerLink(controllers, o.node_name, session_->instance_id(),
                                      std::move(tls), std::move(node_key), std::move(cb));
  ctx_.send = [this](const v1::AgentMessage& m) { link_->Send(m); };

  session_->LoadEpoch();
  jobs_->Readopt();
  work_ = std::make_unique<asio::executor_work_guard<asio::io_context::executor_type>>(
      io_.get_executor());
  if (!ctx_.inventory.gpus().empty()) gpu_watch_->Start();
  if (!o.config.agent.health_check_program.empty()) health_->Start();
  io_thread_ = std::thread([this] { io_.run(); });
  link_->Start();
  spdlog::info("musterd node={} started: cpus={} memory_mb={} gpus={} ({}) steps={} controller={}",
               o.node_name, ctx_.inventory.cpus(), ctx_.inventory.memory_mb(),
               ctx_.inventory.gpus_size(), ctx_.inventory.gpu_source(), steps_->address(),
               o.controller_address);
  return Status::Ok();
}

bool Agent::Impl::BeginStop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopped_) return false;
    stopped_ = true;
    if (!started_) return false;
  }
  link_->Stop();
  if (metrics_) metrics_->Close();  // the io thread still runs: Close waits on it
  return true;
}

Status Agent::Impl::ServeMetrics() {
  const AgentConfig& a = options_.config.agent;
  if (a.metrics_address.empty()) return Status::Ok();
  MUSTER_ASSIGN_OR_RETURN(std::string token, metrics::ReadMetricsToken(a.metrics_token_file));
  metrics_ = std::make_unique<metrics::MetricsServer>(
      io_, "musterd", std::move(token), [this](std::function<void(std::string)> done) {
        asio::post(io_, [this, done = std::move(done)] { done(MetricsText()); });
      });
  auto port = metrics_->Listen(a.metrics_address);
  if (!port.ok()) {
    metrics_.reset();
    return port.status();
  }
  metrics_port_ = *port;
  spdlog::info("musterd node={} serves /metrics on port {}", options_.node_name, metrics_port_);
  return Status::Ok();
}

std::string Agent::Impl::MetricsText() const {
  AgentMetrics m;
  m.node = options_.node_name;
  m.version = kVersion;
  m.start_time_ms = start_time_ms_;
  m.counters = ctx_.counters;
  for (const auto& [id, job] : jobs_->jobs()) {
    std::string phase = PhaseName(job->phase());  // "timed out" -> timed_out, as labels go
    std::replace(phase.begin(), phase.end(), ' ', '_');
    ++m.jobs_by_phase[phase];
    m.steps += static_cast<uint32_t>(job->supervised_steps.size());
    m.job_cgroups += !job->cgroup.empty();
  }
  m.cgroups = ctx_.cgroups.enabled();
  m.connected = link_ && link_->connected();
  m.epoch = session_->epoch();
  m.commands_refused = session_->refused_commands();
  if (health_->last()) m.health_check = health_->last()->ok() ? 1 : 0;
  {
    std::lock_guard<std::mutex> l(ctx_.mu);
    m.gpus.assign(ctx_.inventory.gpus().begin(), ctx_.inventory.gpus().end());
  }
  return AgentMetricsText(m);
}

size_t Agent::Impl::RunOnIo(const std::function<size_t()>& fn) {
  std::promise<size_t> p;
  asio::post(io_, [&] { p.set_value(fn()); });
  return p.get_future().get();
}

void Agent::Impl::StopAccepting() {
  ctx_.stopping = true;
  session_->Stop();
  gpu_watch_->Stop();
  health_->Stop();
  steps_->Close();
}

void Agent::Impl::StopIoThread() {
  work_.reset();
  io_.stop();
  if (io_thread_.joinable()) io_thread_.join();
}

void Agent::Impl::Detach() {
  if (!BeginStop()) return;
  const size_t kept = RunOnIo([this] {
    StopAccepting();
    return jobs_->Detach();
  });
  StopIoThread();
  spdlog::info(
      "musterd node={} stopped; {} batch script(s) and step(s) keep running and are re-adopted "
      "at the next start",
      options_.node_name, kept);
}

void Agent::Impl::Shutdown() {
  if (!BeginStop()) return;
  size_t live = RunOnIo([this] {
    StopAccepting();
    return jobs_->TerminateAll();
  });
  for (int i = 0; i < 40 && live > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    live = RunOnIo([this] { return jobs_->LiveChildren(); });
  }
  RunOnIo([this] {
    jobs_->KillAll();
    return size_t{0};
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the exit watchers reap
  StopIoThread();
  // The node's cgroup directory goes too when nothing is left in it (best effort).
  if (ctx_.cgroups.enabled()) {
    ::rmdir(ctx_.cgroups.base().c_str());
    // A named group shared by a cluster's agents goes with the last of them.
    const std::string& root = options_.config.agent.cgroup_root;
    if (!root.empty() && root[0] != '/' && root != "none") {
      const std::string parent = ctx_.cgroups.base().substr(0, ctx_.cgroups.base().rfind('/'));
      ::rmdir(parent.c_str());
    }
  }
  spdlog::info("musterd node={} stopped", options_.node_name);
}

// ---------------------------------------------------------------------------------------------

Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Agent::~Agent() { Shutdown(); }

Result<std::unique_ptr<Agent>> Agent::Create(AgentOptions options) {
  return std::unique_ptr<Agent>(new Agent(std::make_unique<Impl>(std::move(options))));
}

Status Agent::Start() {
  // Writing a task's stdin after it closed it must be an error, not a signal that ends us.
  ::signal(SIGPIPE, SIG_IGN);
  return impl_->Start();
}

Result<std::string> Agent::Probe(AgentOptions o) {
  const OsInventory os = ProbeOs();
  if (o.node_name.empty()) o.node_name = os.hostname;
  if (o.spool_dir.empty()) o.spool_dir = o.config.agent.spool_dir + "/" + o.node_name;
  MUSTER_ASSIGN_OR_RETURN(Discovered found, Discover(o, os));
  return DescribeInventory(found.inventory);
}

void Agent::Stop() {
  if (impl_->options_.config.agent.kill_jobs_on_stop) {
    Shutdown();
  } else {
    Detach();
  }
}
void Agent::Shutdown() { impl_->Shutdown(); }
void Agent::Detach() { impl_->Detach(); }
const std::string& Agent::node_name() const { return impl_->options_.node_name; }
std::string Agent::step_address() const { return impl_->step_address(); }
bool Agent::connected() const { return impl_->link_ && impl_->link_->connected(); }
size_t Agent::num_jobs() const { return impl_->num_jobs(); }
bool Agent::PostToLoop(std::function<void()> fn) { return impl_->PostToLoop(std::move(fn)); }
uint64_t Agent::refused_commands() const { return impl_->refused_commands(); }
int Agent::metrics_port() const { return impl_->metrics_port(); }
void Agent::SetSilentForTest(bool silent) {
  if (impl_->link_) impl_->link_->SetPausedForTest(silent);
}

}  // namespace muster::agent
