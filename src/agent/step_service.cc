#include "step_service.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>

#include "muster/common/framing.h"
#include "muster/common/strings.h"
#include "muster/v1/agent.pb.h"
#include "step_grant.h"
#include "step_supervisor.h"

namespace muster::agent {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// The CPUs near GPU `gpu` (a node index as CUDA_VISIBLE_DEVICES names it) as a list: its CPU
// affinity, else its NUMA node's CPUs, from the inventory; "" when not known (a MIG UUID, a GPU
// without either).
std::string CpusNear(const AgentContext& ctx, const std::string& gpu) {
  const std::optional<uint64_t> index = ParseUint(gpu);
  if (!index) return "";
  std::lock_guard<std::mutex> lock(ctx.mu);
  for (const v1::GpuDevice& g : ctx.inventory.gpus()) {
    if (g.index() != *index) continue;
    if (!g.cpu_affinity().empty()) return g.cpu_affinity();
    for (const v1::NumaNode& n : ctx.inventory.numa_nodes()) {
      if (g.numa_node() < 0 || n.os_index() != static_cast<uint32_t>(g.numa_node())) continue;
      std::vector<std::string> cpus;
      for (uint32_t c : n.cpus()) cpus.push_back(std::to_string(c));
      return Join(cpus, ",");
    }
  }
  return "";
}

// A `muster run` connection until its request is checked: then a StepSupervisor takes it (the
// tasks, their I/O, the client) and this session ends.
class StepSession : public std::enable_shared_from_this<StepSession> {
 public:
  StepSession(AgentContext& ctx, JobSupervisor& jobs, tcp::socket socket, std::string peer,
              std::shared_ptr<StepService::Counts> counts)
      : ctx_(ctx),
        jobs_(jobs),
        socket_(std::move(socket)),
        deadline_(socket_.get_executor()),
        counts_(std::move(counts)),
        peer_(std::move(peer)) {
    ++counts_->sessions;
    ++counts_->unauthenticated;
    ++counts_->unauthenticated_from[peer_];
  }
  ~StepSession() {
    if (!handed_over_) --counts_->sessions;
    LeavePreAuth();
  }

  // The request must arrive in full within the deadline: until its credential is checked the
  // peer is anyone who can reach the port.
  void Start() {
    auto self = shared_from_this();
    // Listed as unproven: the port may push it out for a newer connection when full.
    serial_ = counts_->next_serial++;
    std::weak_ptr<StepSession> weak = self;
    counts_->unproven.emplace_back(serial_, [weak] {
      if (auto s = weak.lock()) {
        boost::system::error_code ignored;
        s->socket_.close(ignored);
      }
    });
    deadline_.expires_after(std::chrono::milliseconds(ctx_.options.step_request_deadline_ms));
    deadline_.async_wait([this, self](auto ec) {
      if (ec || authenticated_) return;
      boost::system::error_code ignored;
      socket_.close(ignored);
    });
    ReadRequest();
  }

 private:
  void ReadRequest() {
    Frame f;
    if (frames_.Pop(&f)) {
      deadline_.cancel();
      v1::StepLaunchRequest req;
      if (!req.ParseFromString(f.payload)) return Fail(InvalidArgument("bad step request"));
      if (Status s = HandOver(std::move(req)); !s.ok()) Fail(s);
      return;
    }
    auto self = shared_from_this();
    socket_.async_read_some(asio::buffer(chunk_), [this, self](auto ec, size_t n) {
      if (ec || !frames_.Append(chunk_.data(), n).ok()) return;  // gone, or not our protocol
      ReadRequest();
    });
  }

  // Checks the request against its job and grant, then gives the connection to the step's
  // supervisor.
  Status HandOver(v1::StepLaunchRequest req) {
    LocalJob* job = jobs_.Find(req.job_id());
    if (!job || !job->TakesSteps()) {
      return FailedPrecondition("job " + std::to_string(req.job_id()) + " does not run on " +
                                ctx_.node());
    }
    const int64_t now_ms = ctx_.clock.NowMs();
    MUSTER_ASSIGN_OR_RETURN(v1::StepGrant grant,
                            CheckStepCredential(req, job->launch, ctx_.node(), ctx_.step_key,
                                                now_ms, ctx_.instance_id));
    std::erase_if(job->started_steps, [&](const auto& s) { return s.second < now_ms; });
    if (!job->started_steps.emplace(req.step_id(), grant.expires_ms()).second) {
      return PermissionDenied("step " + std::to_string(req.step_id()) + " of job " +
                              std::to_string(req.job_id()) + " was started here already");
    }
    LeavePreAuth();
    job_id_ = req.job_id();
    step_id_ = req.step_id();
    run_ = req.run();
    if (req.argv().empty()) return InvalidArgument("no command given");
    MUSTER_RETURN_IF_ERROR(CheckStepWithinGrant(req, job->launch, ctx_.node()));

    v1::StepSupervisorSetup setup;
    // A step with GPUs of its own sees only those; otherwise all of the job's on this node.
    std::string visible = job->visible_devices;
    if (req.gpus_given()) {
      std::vector<std::string> ids;
      for (uint32_t g : req.gpu_indices()) ids.push_back(std::to_string(g));
      visible = Join(ids, ",");
    }
    // The step's own cgroup inside the job's: its leftovers end with it, not with the job.
    std::string step_cgroup;
    if (!job->cgroup.empty()) {
      step_cgroup = job->cgroup + "/step_" + std::to_string(req.step_id());
      if (::mkdir(step_cgroup.c_str(), 0755) != 0 && errno != EEXIST) {
        spdlog::warn("job={} step={} cannot create {}: {}; its tasks run in the job's cgroup",
                     job_id_, req.step_id(), step_cgroup, std::strerror(errno));
        step_cgroup = job->cgroup;
      }
    }
    boost::system::error_code peer_ec;
    const auto peer = socket_.remote_endpoint(peer_ec);
    setup.set_launch_host(peer_ec ? "" : peer.address().to_string());
    *setup.mutable_request() = std::move(req);
    *setup.mutable_launch() = job->launch;
    setup.set_node(ctx_.node());
    setup.set_config_path(ctx_.options.config_path);
    setup.set_visible_devices(visible);
    for (const std::string& gpu : Split(visible, ',', true))
      *setup.add_gpu_cpus() = CpusNear(ctx_, gpu);
    setup.set_job_cgroup(job->cgroup);
    setup.set_step_cgroup(step_cgroup);
    setup.set_client_bytes(frames_.TakeBytes());
    setup.set_job_dir(job->dir);

    if (!ctx_.options.step_supervisor.empty()) {
      // muster-stepd takes the connection: the step outlives this agent.
      const int fd = ::fcntl(socket_.native_handle(), F_DUPFD_CLOEXEC, 3);
      if (fd < 0) return ErrnoStatus("dup", errno);
      MUSTER_RETURN_IF_ERROR(jobs_.SuperviseStep(*job, setup, fd));
      deadline_.cancel();
      boost::system::error_code ignored;
      socket_.close(ignored);  // ours only: the supervisor holds its own copy
      return Status::Ok();
    }
    StepSupervisor::Hooks hooks;
    const uint64_t id = job_id_;
    hooks.task_started = [jobs = &jobs_, id](pid_t pid) {
      if (LocalJob* j = jobs->Find(id)) {
        j->children.insert(pid);
        j->pgids.insert(pid);
        j->step_pgids.insert(pid);
      }
    };
    hooks.task_done = [jobs = &jobs_, id](pid_t pid) {
      if (LocalJob* j = jobs->Find(id)) {
        j->children.erase(pid);
        jobs->CheckClean(id);
      }
    };
    // The same job (not a later run of it under the same id), still taking steps.
    hooks.job_takes_steps = [jobs = &jobs_, id, serial = job->serial] {
      LocalJob* j = jobs->Find(id);
      return j && j->serial == serial && j->TakesSteps();
    };
    // The step counts as a session of the port until it ends.
    auto counts = counts_;
    hooks.ended = [ctx = &ctx_, counts, counted = true](const v1::StepEnded& e) mutable {
      if (std::exchange(counted, false)) --counts->sessions;
      v1::AgentMessage m;
      *m.mutable_step_ended() = e;
      ctx->Send(m);
    };
    handed_over_ = true;
    deadline_.cancel();
    std::make_shared<StepSupervisor>(ctx_.io, ctx_.launcher, std::move(setup), std::move(socket_),
                                     std::move(hooks))
        ->Start();
    return Status::Ok();
  }

  // The request was refused: the client hears why; the controller hears of a step that was
  // accepted and then could not start.
  void Fail(const Status& s) {
    auto self = shared_from_this();
    auto frame =
        std::make_shared<std::string>(EncodeFrame(static_cast<uint32_t>(s.code()), s.message()));
    asio::async_write(socket_, asio::buffer(*frame), [this, self, frame](auto, size_t) {
      boost::system::error_code ignored;
      socket_.shutdown(tcp::socket::shutdown_both, ignored);
      socket_.close(ignored);
    });
    if (job_id_ == 0) return;
    v1::AgentMessage m;
    auto* e = m.mutable_step_ended();
    e->set_job_id(job_id_);
    e->set_step_id(step_id_);
    e->set_run(run_);
    e->set_exit_code(1);
    ctx_.Send(m);
  }

  // Counted as unproven no longer (authenticated, or gone); once.
  void LeavePreAuth() {
    if (authenticated_) return;
    authenticated_ = true;
    --counts_->unauthenticated;
    if (auto it = counts_->unauthenticated_from.find(peer_);
        it != counts_->unauthenticated_from.end() && --it->second <= 0) {
      counts_->unauthenticated_from.erase(it);
    }
    std::erase_if(counts_->unproven, [&](const auto& e) { return e.first == serial_; });
  }

  AgentContext& ctx_;
  JobSupervisor& jobs_;
  tcp::socket socket_;
  asio::steady_timer deadline_;
  std::shared_ptr<StepService::Counts> counts_;
  const std::string peer_;      // the client's address
  uint64_t serial_ = 0;         // in counts_->unproven
  bool authenticated_ = false;  // the request's credential matched its job's (or it is gone)
  bool handed_over_ = false;    // the step's supervisor holds the connection (and the count)
  FrameAssembler frames_{StepService::kMaxRequestBytes};
  std::array<char, 16 * 1024> chunk_;
  uint64_t job_id_ = 0;
  uint32_t step_id_ = 0;
  uint32_t run_ = 0;
};

}  // namespace

StepService::StepService(AgentContext& ctx, JobSupervisor& jobs)
    : ctx_(ctx), jobs_(jobs), acceptor_(ctx.io) {}

Status StepService::Listen(const std::string& step_address, const std::string& hostname) {
  std::string host;
  uint16_t port = 0;
  MUSTER_RETURN_IF_ERROR_PREPEND(SplitHostPort(step_address, &host, &port), "agent.step_address");
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (ec) return InvalidArgument("agent.step_address: '" + host + "' is not an IP address");
  tcp::endpoint ep(addr, port);
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return FailedPrecondition("cannot listen for steps on " + step_address + ": " + ec.message());
  }
  const uint16_t bound = acceptor_.local_endpoint().port();
  std::string advertised = addr.is_unspecified() ? hostname : host;
  if (addr.is_v6() && !addr.is_unspecified()) advertised = "[" + host + "]";
  address_ = advertised + ":" + std::to_string(bound);
  Accept();
  return Status::Ok();
}

void StepService::Accept() {
  acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec != asio::error::operation_aborted) Accept();
      return;
    }
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    const auto remote = socket.remote_endpoint(ignored);
    const std::string peer = ignored ? "?" : remote.address().to_string();
    const auto from = counts_->unauthenticated_from.find(peer);
    const bool peer_full = from != counts_->unauthenticated_from.end() &&
                           from->second >= kMaxUnauthenticatedPerAddress;
    if (counts_->sessions >= kMaxSessions || peer_full) {
      // Dropped at once: a flood of idle connections cannot hold the port's memory, and steps
      // already running are not affected.
      long dropped = 0;
      const bool log = refusals_.Allow(&dropped);
      if (dropped > 0) {
        spdlog::warn("node={} step port: {} more refusals not logged", ctx_.node(), dropped);
      }
      if (log) {
        spdlog::warn("node={} step port: refusing a connection from {}: {}", ctx_.node(), peer,
                     peer_full
                         ? "too many unproven connections from that address"
                         : "too many connections (" + std::to_string(counts_->sessions) + " open)");
      }
      socket.close(ignored);
      return Accept();
    }
    if (counts_->unauthenticated >= kMaxUnauthenticated && !counts_->unproven.empty()) {
      // Full of unproven connections: the oldest goes (its peer has had the longest to prove
      // itself), so that whoever holds them all cannot keep a real step out.
      auto oldest = std::move(counts_->unproven.front().second);
      counts_->unproven.pop_front();
      long dropped = 0;
      const bool log = refusals_.Allow(&dropped);
      if (dropped > 0) {
        spdlog::warn("node={} step port: {} more refusals not logged", ctx_.node(), dropped);
      }
      if (log) {
        spdlog::warn("node={} step port: {} unproven connections; closing the oldest", ctx_.node(),
                     counts_->unauthenticated);
      }
      oldest();
    }
    std::make_shared<StepSession>(ctx_, jobs_, std::move(socket), peer, counts_)->Start();
    Accept();
  });
}

void StepService::Close() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
}

}  // namespace muster::agent
