// crash_harness: the controller never loses or doubles anything, checked the hard way. Concurrent
// clients submit, cancel, hold and release jobs and drain and resume nodes on a running local
// cluster (`muster local up`) while the harness kills its controller with SIGKILL at random
// moments (during recovery too) and starts it again. After every round it compares what the
// clients were told with what the controller holds:
//   - every acknowledged submission exists exactly once (each carries a unique name), one whose
//     answer was lost at most once, and no job exists that no client asked for;
//   - ids are unique, increase per client, and an id acknowledged by a restarted controller is
//     above every id an earlier one acknowledged;
//   - no GPU is held by two jobs (a running job holds its allocation, a finished one the nodes
//     that have not reported it clean);
//   - a job running at the kill runs on after it with the same start and allocation, or ended on
//     its own or by a cancel a client sent: never requeued, failed or lost;
//   - the last acknowledged hold and release of each job, and drain and resume of each node,
//     still hold; a cancelled job is not pending.
// With --failover (a cluster made by `muster local up --standby`), each round stops the leading
// controller instead, with SIGKILL or (every other round) SIGSTOP, and the standby must serve:
// the time from the stop to its first answer is the takeover time. A frozen leader is thawed once
// the standby serves and must then stop on its own (it lost its lease: fenced); the stopped one
// is started again as the standby and the next round waits until it is in sync.
// At the end, with every job over: no job ran twice (each job appends its id to a shared file as
// it starts), every job that started did so once, accounting has each job once with the start
// the live view had, and an acknowledged cancel ended its job CANCELLED (unless it had ended
// before the answer came).
//   usage: crash_harness --cluster DIR --musterctld PATH [--rounds N] [--clients N] [--seed N]
//                        [--max-kill-delay-ms MS] [--summary FILE] [--failover]
// Exit 0: no violation; 1: violations (each printed); 2: usage or setup error.
#include "crash_harness.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "crash_invariants.h"
#include "muster/client/controller_client.h"
#include "muster/common/procfs.h"

namespace muster::bench::crash {

// A transport failure leaves the outcome unknown (the controller may have acted before it died);
// any other error is the controller's answer.
Outcome OutcomeOf(const Status& st) {
  if (st.ok()) return Outcome::kAcked;
  const StatusCode c = st.code();
  return c == StatusCode::kUnavailable || c == StatusCode::kDeadlineExceeded ? Outcome::kUnknown
                                                                             : Outcome::kRefused;
}

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::optional<ControllerClient> Harness::Connect() const {
  // A standby cluster: whichever controller's socket answers, as the CLI does.
  auto c = o_.failover ? ControllerClient::ConnectTo(config_) : ControllerClient::Connect(socket_);
  if (!c.ok()) return std::nullopt;
  return std::move(*c);
}

pid_t Harness::ControllerPid() const {
  std::ifstream in(o_.cluster + "/run/musterctld.pid");
  pid_t pid = 0;
  in >> pid;
  return pid;
}

bool Harness::KillController(pid_t pid) {
  if (::kill(pid, SIGKILL) != 0) return false;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    if (pid == own_child_) {
      int status = 0;
      if (::waitpid(pid, &status, 0) == pid) return true;
    } else if (!muster::ProcessAlive(pid)) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// musterctld in the background, its output appended to `log`; `name`: --name (a standby's).
pid_t Harness::SpawnController(const std::string& log, const std::string& name) const {
  const std::string conf = o_.cluster + "/muster.toml";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int in = ::open("/dev/null", O_RDONLY);
    if (out >= 0) ::dup2(out, 1), ::dup2(out, 2);
    if (in >= 0) ::dup2(in, 0);
    if (name.empty()) {
      ::execl(o_.musterctld.c_str(), o_.musterctld.c_str(), "--config", conf.c_str(), nullptr);
    } else {
      ::execl(o_.musterctld.c_str(), o_.musterctld.c_str(), "--config", conf.c_str(), "--name",
              name.c_str(), nullptr);
    }
    _exit(127);
  }
  return pid;
}

pid_t Harness::StartController() {
  const pid_t pid = SpawnController(o_.cluster + "/log/musterctld.log", "");
  if (pid > 0) {
    own_child_ = pid;
    // `muster local down` stops what the pid file names.
    std::ofstream(o_.cluster + "/run/musterctld.pid") << pid << "\n";
  }
  return pid;
}

// Milliseconds from start to the first answered request; nullopt if it died or never answered.
std::optional<double> Harness::WaitServing(pid_t pid) {
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      own_child_ = 0;
      return std::nullopt;
    }
    if (auto c = Connect()) {
      if (c->ControllerInfo().ok()) {
        return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return std::nullopt;
}

std::string Harness::Script(std::mt19937_64& rng) const {
  static const char* kSleeps[] = {"0", "0.2", "0.5", "1", "2"};
  std::ostringstream s;
  s << "#!/bin/sh\n"
    << "echo \"$SLURM_JOB_ID\" >> " << runs_log_ << "\n"
    << "sleep " << kSleeps[rng() % 5] << "\n";
  return s.str();
}

void Harness::Submit(int index, ControllerClient& c, std::mt19937_64& rng, bool* broken) {
  ClientLedger& l = ledgers_[index];
  static const uint32_t kGpus[] = {0, 1, 2, 4, 8};
  v1::SubmitJobRequest req;
  v1::JobSpec* s = req.mutable_spec();
  Submission sub;
  sub.name = "crash-c" + std::to_string(index) + "-" + std::to_string(l.subs.size());
  sub.hold = rng() % 10 == 0;
  s->set_name(sub.name);
  s->set_script(Script(rng));
  s->set_work_dir(o_.cluster + "/work");
  s->set_stdout_pattern("/dev/null");
  s->add_environment("PATH=/usr/bin:/bin");
  s->set_hold(sub.hold);
  if (rng() % 6 == 0) {  // a 2-node gang
    s->set_nodes(2);
    s->set_gpus_per_node(8);
  } else if (rng() % 5 == 0) {  // a small job array, waiting as one record until its tasks start
    sub.tasks = 2 + static_cast<uint32_t>(rng() % 5);
    s->set_array("0-" + std::to_string(sub.tasks - 1) + (rng() % 2 ? "%2" : ""));
    s->set_nodes(1);
    s->set_gpus_per_node(kGpus[rng() % 4]);
  } else {
    s->set_nodes(1);
    s->set_gpus_per_node(kGpus[rng() % 5]);
  }
  sub.gen_sent = gen_.load();
  auto resp = c.SubmitJob(req);
  sub.gen_after = gen_.load();
  sub.outcome = OutcomeOf(resp.status());
  if (resp.ok()) sub.id = resp->job_id();
  if (sub.outcome == Outcome::kUnknown) *broken = true;
  if (sub.outcome == Outcome::kRefused) {
    Violation("submission " + sub.name + " refused: " + resp.status().ToString());
  }
  if (sub.id) l.open.insert(sub.id);
  if (sub.id && sub.hold) l.held.insert(sub.id);
  l.subs.push_back(std::move(sub));
}

// The first error among a cancel's or update's results (one per job; a job array's id gets one
// per record), or "" when every one succeeded.
template <typename Response>
std::string Refusal(const Response& resp) {
  if (resp.results_size() == 0) return "no result";
  for (const auto& r : resp.results()) {
    if (r.code() != 0) return r.message();
  }
  return "";
}

void Harness::JobOp(int index, ControllerClient& c, char kind, uint64_t id, bool* broken) {
  Status st;
  std::string refusal;
  if (kind == 'c') {
    v1::CancelJobRequest r;
    r.add_job_ids(id);
    auto resp = c.CancelJob(r);
    st = resp.status();
    if (resp.ok()) refusal = Refusal(*resp);
  } else {
    v1::UpdateJobRequest r;
    r.add_job_ids(id);
    r.set_action(kind == 'h' ? v1::UpdateJobRequest::HOLD : v1::UpdateJobRequest::RELEASE);
    auto resp = c.UpdateJob(r);
    st = resp.status();
    if (resp.ok()) refusal = Refusal(*resp);
  }
  Outcome out = OutcomeOf(st);
  if (out == Outcome::kAcked && !refusal.empty()) out = Outcome::kRefused;
  if (out == Outcome::kUnknown) *broken = true;
  ClientLedger& l = ledgers_[index];
  l.job_ops[id].push_back({kind, out, WallMs()});
  if (kind == 'h' && out == Outcome::kAcked) l.held.insert(id);
  if (kind != 'h' && out == Outcome::kAcked) l.held.erase(id);
}

void Harness::NodeOp(int index, ControllerClient& c, const std::string& node, bool* broken) {
  auto& ops = ledgers_[index].node_ops[node];
  // Drain, then resume, then drain: a node is never left drained for long.
  const bool drain = ops.empty() || ops.back().kind == 'u' || ops.back().outcome != Outcome::kAcked;
  v1::UpdateNodeRequest r;
  r.set_nodes(node);
  r.set_action(drain ? v1::UpdateNodeRequest::DRAIN : v1::UpdateNodeRequest::RESUME);
  if (drain) r.set_reason("crash harness");
  auto resp = c.UpdateNode(r);
  const Outcome out = OutcomeOf(resp.status());
  if (out == Outcome::kUnknown) *broken = true;
  ops.push_back({drain ? 'd' : 'u', out});
}

// Learns which of its jobs are over, so that a client keeps only a few unfinished.
void Harness::Refresh(int index, ControllerClient& c, bool* broken) {
  ClientLedger& l = ledgers_[index];
  if (l.open.empty()) return;
  v1::ListJobsRequest r;
  for (uint64_t id : l.open) r.add_job_ids(id);
  r.set_brief(true);
  auto resp = c.ListJobs(r);
  if (!resp.ok()) {
    if (OutcomeOf(resp.status()) == Outcome::kUnknown) *broken = true;
    return;
  }
  // A job array is open while any of its tasks is.
  std::set<uint64_t> listed, active;
  for (const auto& j : resp->jobs()) {
    const uint64_t id = j.has_array() ? j.array().array_job_id() : j.id();
    listed.insert(id);
    if (!IsFinal(j.state())) active.insert(id);
  }
  for (uint64_t id : listed) {
    if (!active.count(id)) l.open.erase(id), l.held.erase(id);
  }
}

void Harness::Client(int index) {
  std::mt19937_64 rng(o_.seed * 1000 + static_cast<uint64_t>(index));
  ClientLedger& l = ledgers_[index];
  std::optional<ControllerClient> conn;
  std::vector<std::string> my_nodes;
  for (size_t n = static_cast<size_t>(index); n < nodes_.size();
       n += static_cast<size_t>(o_.clients)) {
    my_nodes.push_back(nodes_[n]);
  }
  uint64_t ops = 0;
  while (!stop_.load()) {
    gate_.Checkpoint();
    if (stop_.load()) break;
    if (!conn) conn = Connect();
    if (!conn) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    bool broken = false;
    const unsigned pick = static_cast<unsigned>(rng() % 100);
    const std::vector<uint64_t> open(l.open.begin(), l.open.end());
    const uint64_t any = open.empty() ? 0 : open[rng() % open.size()];
    const std::vector<uint64_t> held(l.held.begin(), l.held.end());
    const uint64_t a_held = held.empty() ? 0 : held[rng() % held.size()];
    // A node of its own it drained (or may have); at the cap, it is resumed before anything.
    std::string drained;
    for (const std::string& n : my_nodes) {
      const auto it = l.node_ops.find(n);
      if (it != l.node_ops.end() && it->second.back().kind == 'd') drained = n;
    }
    if (a_held && (l.open.size() >= 12 || pick < 8)) {
      JobOp(index, *conn, 'r', a_held, &broken);
    } else if (!drained.empty() && l.open.size() >= 12) {
      NodeOp(index, *conn, drained, &broken);
    } else if (++ops % 8 == 0 || l.open.size() >= 12) {
      Refresh(index, *conn, &broken);
      if (l.open.size() >= 12 && !broken) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    } else if (pick < 60) {
      Submit(index, *conn, rng, &broken);
    } else if (pick < 70 && any) {
      JobOp(index, *conn, 'c', any, &broken);
    } else if (pick < 80 && any) {
      JobOp(index, *conn, 'h', any, &broken);
    } else if (pick < 85 && any) {
      JobOp(index, *conn, 'r', any, &broken);
    } else if (!my_nodes.empty()) {
      NodeOp(index, *conn, my_nodes[rng() % my_nodes.size()], &broken);
    }
    if (broken) conn.reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 25));
  }
  // Whatever a client left held or drained is released by the end's cleanup.
  gate_.Stopped();
}

void Harness::Report(size_t found) {
  const auto& all = checker_.violations();
  for (size_t i = all.size() - found; i < all.size(); ++i) Violation(all[i]);
}

void Harness::Violation(const std::string& what) {
  std::fprintf(stderr, "VIOLATION: %s\n", what.c_str());
  violations_.push_back(what);
}

bool Harness::ListAll(Jobs* jobs) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto c = Connect();
    if (c) {
      // Accounting has every job, finished ones beyond the live view's retention too; the live
      // view adds allocations and holds.
      v1::ListAccountingRequest acct;
      v1::ListJobsRequest live;
      live.set_include_finished(true);
      auto a = c->ListAccounting(acct);
      auto l = a.ok() ? c->ListJobs(live) : a.status();
      if (a.ok() && l.ok()) {
        jobs->clear();
        for (const auto& j : a->jobs()) {
          if (!jobs->emplace(j.id(), j).second)
            Violation("accounting has job " + std::to_string(j.id()) + " twice");
        }
        std::set<uint64_t> seen;
        for (const auto& j : l->jobs()) {
          if (!seen.insert(j.id()).second) {
            Violation("the job list has job " + std::to_string(j.id()) + " twice");
          }
          (*jobs)[j.id()] = j;
        }
        return true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  Violation("the controller did not list its jobs");
  return false;
}

void Harness::CheckRound(int round, const Jobs& running_at_kill) {
  Jobs jobs;
  if (!ListAll(&jobs)) return;
  std::map<std::string, bool> drained;
  if (auto c = Connect()) {
    auto nodes = c->ListNodes({});
    if (nodes.ok()) {
      for (const auto& n : nodes->nodes()) drained[n.name()] = n.drain();
    }
  }
  Report(checker_.Round("round " + std::to_string(round) + ": ", ledgers_, jobs, running_at_kill,
                        drained));
}

// Releases what the clients held, resumes their nodes and waits for every job to end.
bool Harness::DrainQueue(int timeout_s) {
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  while (Clock::now() < deadline) {
    auto c = Connect();
    if (!c) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    // One node at a time: a resume naming a node that is not drained is refused whole, and a
    // gang that needs the drained ones would wait for ever.
    for (const std::string& node : nodes_) {
      v1::UpdateNodeRequest resume;
      resume.set_nodes(node);
      resume.set_action(v1::UpdateNodeRequest::RESUME);
      (void)c->UpdateNode(resume);
    }
    auto live = c->ListJobs({});
    if (live.ok()) {
      if (live->jobs().empty()) return true;
      v1::UpdateJobRequest release;
      release.set_action(v1::UpdateJobRequest::RELEASE);
      for (const auto& j : live->jobs()) {
        if (j.hold()) release.add_job_ids(j.id());
      }
      if (release.job_ids_size() > 0) (void)c->UpdateJob(release);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

void Harness::CheckEnd() {
  Jobs jobs;
  if (!ListAll(&jobs)) return;
  std::map<uint64_t, int> runs;
  std::ifstream in(runs_log_);
  for (uint64_t id; in >> id;) ++runs[id];
  Report(checker_.End(ledgers_, jobs, runs));
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

int Harness::Run() {
  if (o_.failover) {
    auto config = muster::LoadConfig(o_.cluster + "/muster.toml");
    if (!config.ok() || config->controllers.size() != 2) {
      std::fprintf(stderr, "crash_harness: --failover needs `muster local up --standby` in %s\n",
                   o_.cluster.c_str());
      return 2;
    }
    config_ = std::move(*config);
  }
  {
    auto c = Connect();
    if (!c) {
      std::fprintf(stderr, "crash_harness: no controller at %s\n", socket_.c_str());
      return 2;
    }
    auto nodes = c->ListNodes({});
    if (!nodes.ok()) {
      std::fprintf(stderr, "crash_harness: %s\n", nodes.status().ToString().c_str());
      return 2;
    }
    for (const auto& n : nodes->nodes()) nodes_.push_back(n.name());
  }
  std::mt19937_64 rng(o_.seed);
  std::vector<std::thread> clients;
  for (int i = 0; i < o_.clients; ++i) clients.emplace_back([this, i] { Client(i); });
  const auto began = Clock::now();
  for (int round = 1; round <= o_.rounds; ++round) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(rng() % static_cast<uint64_t>(o_.max_kill_delay_ms + 1)));
    Jobs running_at_kill;
    if (auto c = Connect()) {
      v1::ListJobsRequest r;
      r.add_states(v1::RUNNING);
      if (auto l = c->ListJobs(r); l.ok()) {
        for (const auto& j : l->jobs()) running_at_kill.emplace(j.id(), j);
      }
    }
    if (o_.failover) {
      if (!FailoverRound(round, rng)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 500));
      gate_.Pause();
      CheckRound(round, running_at_kill);
      gate_.Resume();
      std::printf(
          "round %d: %s leader, standby served in %.0f ms, %zu running then; %zu "
          "violations\n",
          round, round % 2 == 0 ? "froze the" : "killed the", restart_ms_.back(),
          running_at_kill.size(), violations_.size());
      std::fflush(stdout);
      continue;
    }
    const pid_t victim = ControllerPid();
    if (victim <= 0 || !KillController(victim)) {
      Violation("round " + std::to_string(round) + ": cannot kill the controller (pid " +
                std::to_string(victim) + ")");
      break;
    }
    // Sometimes a restart is killed again before it serves: recovery must survive that too.
    std::optional<double> served;
    for (int attempt = 0; attempt < 3 && !served; ++attempt) {
      ++gen_;
      const pid_t pid = StartController();
      if (pid <= 0) break;
      if (attempt == 0 && rng() % 5 == 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 150'000));
        if (KillController(pid)) {
          ++killed_in_recovery_;
          continue;
        }
      }
      served = WaitServing(pid);
    }
    if (!served) {
      Violation("round " + std::to_string(round) + ": the restarted controller never served");
      break;
    }
    restart_ms_.push_back(*served);
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 500));
    gate_.Pause();
    CheckRound(round, running_at_kill);
    gate_.Resume();
    uint32_t pending = 0, running = 0;
    if (auto c = Connect()) {
      if (auto info = c->ControllerInfo(); info.ok()) {
        pending = info->jobs_pending(), running = info->jobs_running();
      }
    }
    std::printf(
        "round %d: restart served in %.0f ms, %zu running at the kill; now %u pending, %u "
        "running; %zu violations\n",
        round, *served, running_at_kill.size(), pending, running, violations_.size());
    std::fflush(stdout);
  }
  stop_ = true;
  gate_.Resume();
  for (auto& t : clients) t.join();
  const double rounds_s = std::chrono::duration<double>(Clock::now() - began).count();
  if (!DrainQueue(300)) Violation("jobs still unfinished 300 s after the last round");
  CheckEnd();

  uint64_t acked = 0, unknown = 0;
  for (const ClientLedger& l : ledgers_) {
    for (const Submission& s : l.subs) {
      acked += s.outcome == Outcome::kAcked;
      unknown += s.outcome == Outcome::kUnknown;
    }
  }
  char summary[1024];
  std::snprintf(summary, sizeof summary,
                "{\"rounds\": %d, \"clients\": %d, \"seed\": %llu, \"violations\": %zu, "
                "\"submissions_acked\": %llu, \"submissions_unanswered\": %llu, "
                "\"killed_during_recovery\": %d, \"failover\": %s, \"frozen_rounds\": %d, "
                "\"restart_ms_median\": %.1f, "
                "\"restart_ms_p99\": %.1f, \"restart_ms_max\": %.1f, \"rounds_s\": %.1f}\n",
                o_.rounds, o_.clients, static_cast<unsigned long long>(o_.seed), violations_.size(),
                static_cast<unsigned long long>(acked), static_cast<unsigned long long>(unknown),
                killed_in_recovery_, o_.failover ? "true" : "false", frozen_rounds_,
                Percentile(restart_ms_, 0.5), Percentile(restart_ms_, 0.99),
                Percentile(restart_ms_, 1.0), rounds_s);
  std::fputs(summary, stdout);
  if (!o_.summary.empty()) std::ofstream(o_.summary) << summary;
  return violations_.empty() ? 0 : 1;
}

}  // namespace muster::bench::crash

using muster::bench::crash::Harness;
using muster::bench::crash::Options;

int main(int argc, char** argv) {
  Options o;
  o.seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "crash_harness: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    try {
      if (a == "--cluster")
        o.cluster = value();
      else if (a == "--musterctld")
        o.musterctld = value();
      else if (a == "--rounds")
        o.rounds = std::stoi(value());
      else if (a == "--clients")
        o.clients = std::stoi(value());
      else if (a == "--seed")
        o.seed = std::stoull(value());
      else if (a == "--max-kill-delay-ms")
        o.max_kill_delay_ms = std::stoi(value());
      else if (a == "--summary")
        o.summary = value();
      else if (a == "--failover")
        o.failover = true;
      else {
        std::fprintf(stderr, "crash_harness: unknown option %s\n", a.c_str());
        return 2;
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "crash_harness: bad value for %s\n", a.c_str());
      return 2;
    }
  }
  if (o.cluster.empty() || o.musterctld.empty() || o.rounds < 1 || o.rounds > 100'000 ||
      o.clients < 1 || o.clients > 64 || o.max_kill_delay_ms < 0) {
    std::fprintf(stderr,
                 "usage: crash_harness --cluster DIR --musterctld PATH [--rounds N] [--clients N] "
                 "[--seed N] [--max-kill-delay-ms MS] [--summary FILE] [--failover]\n");
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  std::printf("crash_harness: seed %llu\n", static_cast<unsigned long long>(o.seed));
  return Harness(o).Run();
}
