#include "admin_scripts.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

#include "job_env.h"
#include "job_spool.h"
#include "muster/common/hostlist.h"
#include "muster/common/own_files.h"
#include "muster/common/strings.h"
#include "spawn.h"

namespace muster::agent {

namespace asio = boost::asio;

void RunAdminScript(AgentContext& ctx, const std::string& what, const std::string& program,
                    std::vector<std::string> env, uint32_t timeout_s,
                    std::function<void(const std::string&)> done) {
  // Checked at the agent's start and again at each run: it runs as root, maybe days later.
  if (Status st = CheckTrustedProgram(program); !st.ok()) {
    return done(what + " not run: " + st.message());
  }
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    return done(what + ": pipe: " + std::strerror(errno));
  }
  SpawnSpec sp;
  sp.argv = {program};
  // As root, with a clean environment: nothing of any user's leaks into the admin's script.
  sp.env = std::move(env);
  sp.env.push_back("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  sp.env.push_back("MUSTER_NODE=" + ctx.node());
  sp.env.push_back("MUSTER_CONF=" + ctx.options.config_path);
  sp.cwd = "/";
  sp.stdout_fd = out[1];
  sp.stderr_fd = out[1];
  auto spawned = ctx.launcher.Spawn(sp);
  ::close(out[1]);
  if (!spawned.ok()) {
    ::close(out[0]);
    return done(what + " failed: cannot run " + program + ": " + spawned.status().message());
  }
  struct Run {
    std::string output;
    bool eof = false, exited = false, timed_out = false;
    int status = 0;
  };
  auto run = std::make_shared<Run>();
  const pid_t pid = spawned->pid;
  auto finish = [run, what, timeout_s, done] {
    if (!run->eof || !run->exited) return;
    int code = 0, sig = 0;
    DecodeWaitStatus(run->status, &code, &sig);
    if (code == 0 && sig == 0 && !run->timed_out) return done("");
    // The reason is the first line with text, as Slurm's health check reports it.
    std::string first;
    for (const auto& line : Split(run->output, '\n')) {
      if (!Trim(line).empty()) {
        first = std::string(Trim(line)).substr(0, 200);
        break;
      }
    }
    if (run->timed_out) {
      first = what + " timed out after " + std::to_string(timeout_s) + "s";
    } else if (first.empty()) {
      first = sig ? what + " killed by signal " + std::to_string(sig)
                  : what + " exited with code " + std::to_string(code);
    }
    done(first);
  };
  // On the executor, so tests run the timeout on their virtual clock.
  ctx.executor.PostAfter(int64_t{timeout_s} * 1000, [run, pid, &launcher = ctx.launcher] {
    if (run->exited) return;
    run->timed_out = true;
    launcher.Kill(-pid, SIGKILL);
  });
  auto sd = std::make_shared<asio::posix::stream_descriptor>(ctx.io, out[0]);
  auto buf = std::make_shared<std::array<char, 4096>>();
  auto read = std::make_shared<std::function<void()>>();
  *read = [sd, buf, run, read, finish] {
    sd->async_read_some(asio::buffer(*buf), [sd, buf, run, read, finish](auto ec, size_t n) {
      if (run->output.size() < 65536) run->output.append(buf->data(), n);
      if (ec) {
        run->eof = true;
        *read = nullptr;
        finish();
        return;
      }
      (*read)();
    });
  };
  (*read)();
  ctx.WatchExit(pid, spawned->pidfd, [run, finish](int status) {
    run->exited = true;
    run->status = status;
    finish();
  });
}

void RunRebootProgram(AgentContext& ctx, const v1::RebootNode& order) {
  const std::string marker = ctx.options.job_state_dir + "/reboot-issued";
  auto failed = [&ctx, marker](const std::string& error) {
    std::error_code ignored;
    std::filesystem::remove(marker, ignored);  // a failed reboot may be asked for again
    spdlog::error("node={} cannot reboot: {}", ctx.node(), error);
    v1::AgentMessage m;
    m.mutable_reboot_failed()->set_error(error);
    ctx.Send(m);
  };
  const std::string& program = ctx.options.config.agent.reboot_program;
  if (program.empty()) return failed("no [agent] reboot_program on this node");
  const std::string& boot = ctx.inventory.boot_id();
  const std::string mark = boot + " " + std::to_string(order.issued_ms()) + "\n";
  if (!boot.empty() && order.issued_ms() != 0 && !ctx.options.job_state_dir.empty()) {
    std::ifstream in(marker);
    std::string seen((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (seen == mark) {
      spdlog::info("node={} this reboot was already started in this boot; not run again",
                   ctx.node());
      return;
    }
    if (!WriteFileCloexec(marker, mark, 0600)) {
      spdlog::warn(
          "node={} cannot remember this reboot in {} ({}): an order repeated in this boot "
          "would run it again",
          ctx.node(), marker, std::strerror(errno));
    }
  }
  ++ctx.counters.reboots_issued;
  const std::string reason = order.reason();
  spdlog::warn("node={} rebooting ({}): running {}", ctx.node(), reason, program);
  constexpr uint32_t kRebootProgramTimeoutS = 300;
  RunAdminScript(ctx, "reboot program", program, {"MUSTER_REBOOT_REASON=" + reason.substr(0, 1024)},
                 kRebootProgramTimeoutS, [failed](const std::string& error) {
                   if (!error.empty()) failed(error);
                 });
}

std::vector<std::string> AdminScriptEnv(const v1::LaunchJob& l, const std::string& node,
                                        const std::string& visible_devices,
                                        const std::string& cgroup) {
  std::vector<std::string> names;
  for (const auto& na : l.allocation().nodes()) names.push_back(na.node());
  std::vector<std::string> env = {
      "SLURM_JOB_ID=" + std::to_string(l.job_id()),
      "SLURM_JOBID=" + std::to_string(l.job_id()),
      "SLURM_JOB_USER=" + l.spec().user(),
      "SLURM_JOB_UID=" + std::to_string(l.spec().uid()),
      "SLURM_JOB_GID=" + std::to_string(l.spec().gid()),
      "SLURM_JOB_NAME=" + l.spec().name(),
      "SLURM_JOB_NODELIST=" + CompressHostlist(names),
      "SLURM_JOB_PARTITION=" + l.allocation().partition(),
      "SLURM_CLUSTER_NAME=" + l.cluster_name(),
      "SLURMD_NODENAME=" + node,
      "SLURM_JOB_GPUS=" + GpuList(l),
      "CUDA_VISIBLE_DEVICES=" + visible_devices,
      "MUSTER_JOB_CGROUP=" + cgroup,
  };
  return env;
}

void HealthCheck::Start() {
  asio::post(ctx_.io, [this] { Run(); });
}

void HealthCheck::Run() {
  if (ctx_.stopping) return;
  const AgentConfig& c = ctx_.options.config.agent;
  timer_.expires_after(std::chrono::seconds(c.health_check_interval_s));
  timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) Run();
  });
  if (running_) return;  // the last one has not finished: it has its own timeout
  running_ = true;
  RunAdminScript(ctx_, "health check", c.health_check_program, {}, c.health_check_timeout_s,
                 [this](const std::string& error) {
                   running_ = false;
                   Done(error);
                 });
}

void HealthCheck::Done(const std::string& error) {
  v1::NodeHealth h;
  h.set_ok(error.empty());
  h.set_reason(error);
  if (!last_ || last_->ok() != h.ok() || last_->reason() != h.reason()) {
    if (h.ok()) {
      spdlog::info("node={} health check passes", ctx_.node());
    } else {
      spdlog::error("node={} health check failed: {}", ctx_.node(), h.reason());
    }
  }
  last_ = h;
  v1::AgentMessage m;
  *m.mutable_node_health() = h;
  ctx_.Send(m);
}

}  // namespace muster::agent
