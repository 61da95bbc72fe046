#include "muster/sim/replay.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <unordered_map>

#include "muster/common/manual_executor.h"
#include "muster/controller/controller_runner.h"
#include "muster/store/state_store.h"

namespace muster::sim {
namespace {

using controller::Caller;
using controller::ControllerRunner;
using controller::Outgoing;

// The replay's agents say they are alive this often (virtual); the config it runs under lets a
// node be silent for much longer (see Replayer::Run).
constexpr int64_t kHeartbeatEveryMs = 10LL * 86'400'000;

// A node as the stand-in agents see it: what it has and what the jobs launched on it hold.
struct SimNode {
  std::string name;
  uint32_t cpus = 0, gpus = 0;
  uint32_t used_cpus = 0, used_gpus = 0;
  int32_t leaf = -1, domain = -1;  // indexes into Replayer::leaf_names_ / domain_names_
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> held;  // job -> (cpus, gpus)
};

// One job's current run, as its stand-in agents know it.
struct SimRun {
  size_t index = 0;  // into the trace
  uint32_t run = 0;
  int64_t start_ms = 0;
  bool ended = false;   // its batch script "exited" (or it was killed)
  bool placed = false;  // its placement has been looked at (first launch message)
};

class Replayer final : public controller::AgentSessions {
 public:
  Replayer(const Config& config, const std::vector<SimJob>& jobs, const ReplayOptions& options)
      : config_(config), jobs_(jobs), options_(options), executor_(&clock_) {}

  Result<ReplayResult> Run();
  void Deliver(std::vector<Outgoing> commands) override;

 private:
  Status Boot();
  void Submit(size_t index);
  void OnLaunch(size_t node, const v1::LaunchJob& launch);
  void OnTerminate(size_t node, const v1::TerminateJob& terminate);
  void EndRun(uint64_t job_id, uint32_t run);
  void Heartbeats();
  // Hands an agent's message to the engine on the strand (the replay is single-threaded: after
  // the command being delivered has been dealt with, as a real agent's reply would be).
  void Send(size_t node, v1::AgentMessage msg);
  void Record();
  uint64_t StrandedGpus() const;

  Config config_;
  const std::vector<SimJob>& jobs_;
  ReplayOptions options_;
  ManualClock clock_;
  ManualExecutor executor_;
  std::unique_ptr<ControllerRunner> runner_;
  int64_t t0_ms_ = 0;

  std::vector<SimNode> nodes_;
  std::unordered_map<std::string, size_t> node_index_;
  std::vector<std::string> leaf_names_, domain_names_;
  std::map<std::string, uint32_t> uids_;
  std::unordered_map<uint64_t, SimRun> runs_;  // engine job id -> its current run
  std::vector<uint64_t> job_ids_;              // trace index -> engine job id
  ReplayResult result_;
  size_t finished_ = 0;  // ended for good (or refused)
  size_t next_progress_ = 0;
  uint32_t queued_ = 0;
  uint32_t queued_whole_node_ = 0;  // of those, jobs that want all of a node's GPUs
  uint64_t busy_cpus_ = 0, busy_gpus_ = 0;
  uint32_t node_gpus_ = 0;  // GPUs of the largest node (what "whole node" means)
};

std::map<std::string, AccountTerms> Terms(const std::vector<AccountConfig>& accounts) {
  std::map<std::string, const AccountConfig*> by_name;
  std::map<std::string, uint64_t> siblings_shares;  // by parent
  for (const AccountConfig& a : accounts) {
    by_name[a.name] = &a;
    siblings_shares[a.parent] += a.shares;
  }
  std::map<std::string, AccountTerms> terms;
  for (const AccountConfig& a : accounts) {
    AccountTerms& t = terms[a.name];
    t.has_quota = !a.quotas.empty();
    for (const auto& [type, q] : a.quotas) t.guaranteed_gpus += q.guaranteed;
    // Down from the root; the controller has checked that the accounts form a tree, and the
    // walk stops after as many steps as there are accounts in any case.
    double share = 1;
    const AccountConfig* at = &a;
    for (size_t steps = 0; at && steps <= accounts.size(); ++steps) {
      share *= static_cast<double>(at->shares) /
               static_cast<double>(std::max<uint64_t>(siblings_shares[at->parent], 1));
      auto up = by_name.find(at->parent);
      at = up == by_name.end() ? nullptr : up->second;
    }
    t.share = share;
  }
  return terms;
}

bool WantsWholeNodes(const SimJob& j, uint32_t node_gpus) {
  if (node_gpus == 0 || j.gpus == 0) return false;
  const uint32_t nodes = j.nodes ? j.nodes : (j.gpus + node_gpus - 1) / node_gpus;
  return nodes > 1 || j.gpus >= node_gpus;
}

Status Replayer::Boot() {
  // Nodes never fall silent here: let them be silent for as long as the config can say, and
  // have the stand-ins heartbeat well within it.
  SchedulingConfig& s = config_.scheduling;
  s.heartbeat_interval_ms = 3'600'000;
  s.node_not_responding_ms = 4'000'000'000u;
  s.node_down_ms = 4'000'000'000u;
  // Everything is kept in memory: finished jobs leave the live table as in the daemon.
  config_.controller.mail_prog.clear();

  t0_ms_ = 1'000'000'000'000LL;  // 2001-09-09: any fixed origin; the metrics are relative
  clock_.SetMs(t0_ms_);
  controller::ControllerRunnerOptions o;
  o.config = config_;
  o.clock = &clock_;
  o.executor = &executor_;
  o.store = std::make_unique<store::InMemoryStateStore>();
  o.make_credential = [] { return std::string("sim"); };
  o.tick_ms = options_.tick_ms;
  MUSTER_ASSIGN_OR_RETURN(runner_, ControllerRunner::Create(std::move(o)));
  runner_->Start(this);
  executor_.RunUntilIdle();

  std::map<std::string, int32_t> leaves, domains;
  for (const NodeConfig& n : config_.nodes) {
    SimNode sn;
    sn.name = n.name;
    sn.cpus = n.cpus;
    sn.gpus = n.gpus;
    node_gpus_ = std::max(node_gpus_, n.gpus);
    if (!n.topology.empty()) {
      const std::string leaf = n.topology;
      auto [it, added] = leaves.try_emplace(leaf, static_cast<int32_t>(leaf_names_.size()));
      if (added) leaf_names_.push_back(leaf);
      sn.leaf = it->second;
    }
    if (!n.nvlink_domain.empty()) {
      auto [it, added] =
          domains.try_emplace(n.nvlink_domain, static_cast<int32_t>(domain_names_.size()));
      if (added) domain_names_.push_back(n.nvlink_domain);
      sn.domain = it->second;
    }
    result_.total_cpus += n.cpus;
    result_.total_gpus += n.gpus;
    node_index_.emplace(n.name, nodes_.size());
    nodes_.push_back(std::move(sn));

    v1::RegisterRequest r;
    r.set_instance_id(n.name + "-sim");
    v1::NodeInventory* inv = r.mutable_inventory();
    inv->set_name(n.name);
    inv->set_cpus(n.cpus);
    inv->set_memory_mb(n.memory_mb);
    for (uint32_t g = 0; g < n.gpus; ++g) {
      v1::GpuDevice* d = inv->add_gpus();
      d->set_index(g);
      d->set_type(n.gpu_type);
    }
    controller::Engine& e = runner_->engine();
    auto reg = e.RegisterNode(r, clock_.NowMs());
    if (!reg.ok()) return reg.status().Prepend("registering " + n.name);
    v1::Hello h;
    h.set_node(n.name);
    h.set_instance_id(n.name + "-sim");
    MUSTER_RETURN_IF_ERROR(e.AttachSession(h, clock_.NowMs()));
  }
  result_.total_nodes = static_cast<uint32_t>(nodes_.size());
  result_.accounts = Terms(config_.accounts);
  runner_->AfterEvent();
  executor_.RunUntilIdle();
  return Status::Ok();
}

void Replayer::Heartbeats() {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    v1::AgentMessage m;
    m.mutable_heartbeat()->set_seq(static_cast<uint64_t>(clock_.NowMs()));
    runner_->engine().OnAgentMessage(nodes_[i].name, m, clock_.NowMs());
  }
  runner_->AfterEvent();
  executor_.PostAfter(kHeartbeatEveryMs, [this] { Heartbeats(); });
}

void Replayer::Submit(size_t index) {
  const SimJob& j = jobs_[index];
  JobOutcome& out = result_.jobs[index];
  auto [uid_it, added] = uids_.try_emplace(j.user, 10'000 + static_cast<uint32_t>(uids_.size()));
  Caller caller{uid_it->second, uid_it->second, j.user.empty() ? "sim" : j.user, false};
  caller.origin = "sim";
  v1::SubmitJobRequest req;
  v1::JobSpec* spec = req.mutable_spec();
  spec->set_name("t" + std::to_string(j.trace_id));
  spec->set_script("#!/bin/sh\n");
  spec->set_work_dir("/");
  if (j.nodes > 0) spec->set_nodes(j.nodes);
  spec->set_ntasks(std::max<uint32_t>(1, j.procs));
  if (j.gpus > 0) {
    // Without a node count, as many of the largest nodes as its GPUs need.
    uint32_t nodes = j.nodes;
    if (nodes == 0) {
      nodes = node_gpus_ > 0
                  ? static_cast<uint32_t>((uint64_t{j.gpus} + node_gpus_ - 1) / node_gpus_)
                  : 1;
      spec->set_nodes(nodes);
    }
    spec->set_gpus_per_node(static_cast<uint32_t>((uint64_t{j.gpus} + nodes - 1) / nodes));
  }
  for (const std::string& t : j.gpu_types) spec->add_gpu_types(t);
  if (j.mem_mb > 0) spec->set_mem_per_node_mb(j.mem_mb);
  if (j.req_time_s > 0) spec->set_time_limit_ms(std::min(j.req_time_s, kMaxTraceSeconds) * 1000);
  if (!j.account.empty()) spec->set_account(j.account);
  auto r = runner_->engine().SubmitJob(caller, req, clock_.NowMs());
  if (!r.ok()) {
    out.refused = r.status().ToString();
    ++finished_;
    return;
  }
  job_ids_[index] = r->job_id();
  out.job_id = r->job_id();
  runs_[r->job_id()] = SimRun{index, 0, -1, false, false};
  ++queued_;
  if (WantsWholeNodes(j, node_gpus_)) ++queued_whole_node_;
}

void Replayer::Deliver(std::vector<Outgoing> commands) {
  for (Outgoing& c : commands) {
    auto it = node_index_.find(c.node);
    if (it == node_index_.end()) continue;
    if (c.message.has_launch_job()) {
      OnLaunch(it->second, c.message.launch_job());
    } else if (c.message.has_terminate_job()) {
      OnTerminate(it->second, c.message.terminate_job());
    }
  }
}

void Replayer::Send(size_t node, v1::AgentMessage msg) {
  runner_->Post([this, node, msg = std::move(msg)] {
    runner_->engine().OnAgentMessage(nodes_[node].name, msg, clock_.NowMs());
    runner_->AfterEvent();
  });
}

void Replayer::OnLaunch(size_t node, const v1::LaunchJob& l) {
  auto rit = runs_.find(l.job_id());
  if (rit == runs_.end() || l.node_id() >= static_cast<uint32_t>(l.allocation().nodes_size())) {
    return;
  }
  SimRun& run = rit->second;
  SimNode& n = nodes_[node];
  const v1::NodeAllocation& mine = l.allocation().nodes(static_cast<int>(l.node_id()));
  const uint32_t cpus = static_cast<uint32_t>(mine.cpu_ids_size());
  const uint32_t gpus = static_cast<uint32_t>(mine.gpu_indices_size());
  JobOutcome& out = result_.jobs[run.index];
  if (!run.placed || run.run != l.requeue_count()) {
    // The run's first launch message: where it went, and whether one leaf could have held it.
    run.placed = true;
    run.run = l.requeue_count();
    run.ended = false;
    run.start_ms = l.start_time_ms();
    uint32_t need_cpus = 0, need_gpus = 0, all_cpus = 0, all_gpus = 0;
    std::set<int32_t> leaves, domains;
    for (const v1::NodeAllocation& a : l.allocation().nodes()) {
      need_cpus = std::max<uint32_t>(need_cpus, static_cast<uint32_t>(a.cpu_ids_size()));
      need_gpus = std::max<uint32_t>(need_gpus, static_cast<uint32_t>(a.gpu_indices_size()));
      all_cpus += static_cast<uint32_t>(a.cpu_ids_size());
      all_gpus += static_cast<uint32_t>(a.gpu_indices_size());
      if (auto ni = node_index_.find(a.node()); ni != node_index_.end()) {
        leaves.insert(nodes_[ni->second].leaf);
        domains.insert(nodes_[ni->second].domain);
      }
    }
    out.start_ms = l.start_time_ms() - t0_ms_;
    // The account the engine charged: under a site's config a job that named none charges
    // its user's default account.
    out.account = l.spec().account();
    out.procs = all_cpus;
    out.gpus = all_gpus;
    out.nodes = static_cast<uint32_t>(l.allocation().nodes_size());
    out.leaves = leaves.count(-1) ? 0 : static_cast<uint32_t>(leaves.size());
    out.nvlink_domains = domains.count(-1) ? 0 : static_cast<uint32_t>(domains.size());
    if (out.nodes > 1) {
      std::vector<uint32_t> leaf_room(leaf_names_.size()), domain_room(domain_names_.size());
      for (const SimNode& s : nodes_) {
        if (s.cpus - s.used_cpus < need_cpus || s.gpus - s.used_gpus < need_gpus) continue;
        if (s.leaf >= 0) ++leaf_room[static_cast<size_t>(s.leaf)];
        if (s.domain >= 0) ++domain_room[static_cast<size_t>(s.domain)];
      }
      out.one_leaf_had_room = std::any_of(leaf_room.begin(), leaf_room.end(),
                                          [&](uint32_t k) { return k >= out.nodes; });
      out.one_domain_had_room = std::any_of(domain_room.begin(), domain_room.end(),
                                            [&](uint32_t k) { return k >= out.nodes; });
    }
    --queued_;
    if (WantsWholeNodes(jobs_[run.index], node_gpus_)) --queued_whole_node_;
  }
  n.held[l.job_id()] = {cpus, gpus};
  n.used_cpus += cpus;
  n.used_gpus += gpus;
  busy_cpus_ += cpus;
  busy_gpus_ += gpus;
  v1::AgentMessage started;
  started.mutable_job_started()->set_job_id(l.job_id());
  started.mutable_job_started()->set_run(l.requeue_count());
  Send(node, std::move(started));
  if (l.batch_node()) {
    const SimJob& j = jobs_[run.index];
    const int64_t runs_for = std::clamp<int64_t>(j.run_s, 0, kMaxTraceSeconds) * 1000;
    const bool killed = l.time_limit_ms() > 0 && runs_for > l.time_limit_ms();
    const int64_t after = killed ? l.time_limit_ms() : runs_for;
    const uint64_t id = l.job_id();
    const uint32_t which = l.requeue_count();
    executor_.PostAfter(after, [this, node, id, which, killed] {
      auto it = runs_.find(id);
      if (it == runs_.end() || it->second.run != which || it->second.ended) return;
      it->second.ended = true;
      JobOutcome& o = result_.jobs[it->second.index];
      o.end_ms = clock_.NowMs() - t0_ms_;
      o.killed_at_limit = killed;
      ++finished_;
      v1::AgentMessage m;
      v1::BatchExited* e = m.mutable_batch_exited();
      e->set_job_id(id);
      e->set_run(which);
      e->set_timed_out(killed);
      if (killed) e->set_signal(9);
      runner_->engine().OnAgentMessage(nodes_[node].name, m, clock_.NowMs());
      runner_->AfterEvent();
    });
  }
  Record();
}

void Replayer::OnTerminate(size_t node, const v1::TerminateJob& t) {
  SimNode& n = nodes_[node];
  auto held = n.held.find(t.job_id());
  if (held != n.held.end()) {
    n.used_cpus -= held->second.first;
    n.used_gpus -= held->second.second;
    busy_cpus_ -= held->second.first;
    busy_gpus_ -= held->second.second;
    auto rit = runs_.find(t.job_id());
    if (rit != runs_.end() && !rit->second.ended && rit->second.run == t.run()) {
      // Stopped before its time was up: preempted (the replay cancels nothing and loses no
      // node). Requeued, it waits again; preempted in mode cancel, it has ended.
      SimRun& run = rit->second;
      run.ended = true;
      run.placed = false;
      JobOutcome& o = result_.jobs[run.index];
      ++o.preemptions;
      o.preempted_runs.emplace_back(run.start_ms - t0_ms_, clock_.NowMs() - t0_ms_);
      const double secs = static_cast<double>(clock_.NowMs() - run.start_ms) / 1000.0;
      o.lost_gpu_seconds += secs * o.gpus;
      o.lost_cpu_seconds += secs * o.procs;
      v1::GetJobRequest q;
      q.set_job_id(t.job_id());
      auto job = runner_->engine().GetJob(Caller{0, 0, "root", true}, q);
      if (job.ok() && job->job().state() == v1::PENDING) {
        o.start_ms = -1;
        ++queued_;
        if (WantsWholeNodes(jobs_[run.index], node_gpus_)) ++queued_whole_node_;
      } else {
        o.end_ms = clock_.NowMs() - t0_ms_;
        ++finished_;
      }
    }
    n.held.erase(held);
  }
  v1::AgentMessage m;
  m.mutable_job_cleaned()->set_job_id(t.job_id());
  m.mutable_job_cleaned()->set_run(t.run());
  Send(node, std::move(m));
  Record();
}

uint64_t Replayer::StrandedGpus() const {
  if (queued_whole_node_ == 0) return 0;
  uint64_t stranded = 0;
  for (const SimNode& n : nodes_) {
    if (n.used_gpus > 0 && n.used_gpus < n.gpus) stranded += n.gpus - n.used_gpus;
  }
  return stranded;
}

void Replayer::Record() {
  const int64_t t = clock_.NowMs() - t0_ms_;
  Sample s{t, busy_cpus_, busy_gpus_, queued_, StrandedGpus()};
  auto& v = result_.samples;
  if (!v.empty() &&
      (v.back().t_ms == t || (options_.sample_every_ms > 0 &&
                              t - v.back().t_ms < options_.sample_every_ms && v.size() > 1))) {
    v.back() = s;
    return;
  }
  v.push_back(s);
}

Result<ReplayResult> Replayer::Run() {
  const auto began = std::chrono::steady_clock::now();
  for (size_t i = 1; i < jobs_.size(); ++i) {
    // The virtual clock only moves forward.
    if (jobs_[i].submit_s < jobs_[i - 1].submit_s) {
      return InvalidArgument("the jobs are not in submission order (job " +
                             std::to_string(jobs_[i].trace_id) + ")");
    }
  }
  MUSTER_RETURN_IF_ERROR(Boot());
  result_.jobs.resize(jobs_.size());
  job_ids_.assign(jobs_.size(), 0);
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const SimJob& j = jobs_[i];
    JobOutcome& o = result_.jobs[i];
    o.trace_id = j.trace_id;
    o.submit_ms = std::clamp<int64_t>(j.submit_s, 0, kMaxTraceSeconds) * 1000;
    o.procs = j.procs;
    o.gpus = j.gpus;
    o.nodes = j.nodes;
    o.req_time_ms = std::clamp<int64_t>(j.req_time_s, 0, kMaxTraceSeconds) * 1000;
    o.user = j.user;
    o.account = j.account;
  }
  executor_.PostAfter(kHeartbeatEveryMs, [this] { Heartbeats(); });
  const size_t total = jobs_.size();
  auto progress = [&] {
    if (options_.progress && finished_ >= next_progress_) {
      options_.progress(finished_, total, clock_.NowMs() - t0_ms_);
      next_progress_ = finished_ + std::max<size_t>(1, total / 100);
    }
  };
  size_t next = 0;
  int64_t idle_since = -1;  // nothing running and nothing left to submit, since (virtual ms)
  while (finished_ < total) {
    const int64_t due = executor_.next_due_ms();
    const int64_t arrival =
        next < total
            ? t0_ms_ + std::clamp<int64_t>(jobs_[next].submit_s, 0, kMaxTraceSeconds) * 1000
            : -1;
    if (arrival >= 0 && (due < 0 || arrival <= due)) {
      executor_.AdvanceMs(arrival - clock_.NowMs());
      while (next < total &&
             t0_ms_ + std::clamp<int64_t>(jobs_[next].submit_s, 0, kMaxTraceSeconds) * 1000 <=
                 clock_.NowMs())
        Submit(next++);
      Record();
      runner_->AfterEvent();
      executor_.RunUntilIdle();
    } else if (due >= 0) {
      executor_.AdvanceMs(due - clock_.NowMs());
    } else {
      break;
    }
    progress();
    if (next == total && busy_cpus_ == 0 && busy_gpus_ == 0) {
      // What still waits may never start (held by a limit that nothing will release): give the
      // controller a day to start it, then stop.
      if (idle_since < 0) idle_since = clock_.NowMs();
      if (clock_.NowMs() - idle_since > 86'400'000) break;
    } else {
      idle_since = -1;
    }
  }
  // What never started says why, in the engine's words.
  for (size_t i = 0; i < jobs_.size(); ++i) {
    JobOutcome& o = result_.jobs[i];
    if (o.job_id == 0 || o.end_ms >= 0) continue;
    v1::GetJobRequest q;
    q.set_job_id(o.job_id);
    auto j = runner_->engine().GetJob(Caller{0, 0, "root", true}, q);
    if (j.ok()) o.waiting = j->job().reason() + ": " + j->job().reason_detail();
  }
  runner_->Stop();
  for (const auto& t : runner_->stats().Snapshot()) {
    if (t.kind == "scheduler/pass") result_.passes = t.count;
  }
  result_.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  return std::move(result_);
}

}  // namespace

void QuietControllerLogs() { spdlog::set_level(spdlog::level::err); }

Result<ReplayResult> Replay(const Config& config, const std::vector<SimJob>& jobs,
                            const ReplayOptions& options) {
  Replayer r(config, jobs, options);
  return r.Run();
}

}  // namespace muster::sim
