// The controller under a full cluster's load, on this one machine: NODES simulated agents in this
// process (each with its own Register and Session stream, over CHANNELS TCP connections) heartbeat
// every heartbeat_interval_ms with jitter, run the jobs they are sent (JobStarted, then after a
// random run time BatchExited and JobCleaned, or JobCleaned when told to terminate), and
// reconnect with the real agent's jittered backoff; CLIENTS threads submit jobs over the Unix
// socket. The program starts musterctld itself and reports, as one JSON line:
//   register_all_s      start to every node registered
//   hb_only             controller CPU (cores) and RSS with heartbeats alone
//   loaded              the same with the clients submitting and jobs flowing; sdiag's timings
//                       (heartbeat handling p99, submit p99, pass p50/p99); the clients' submit
//                       latency p50/p99
//   reconnect           after the controller is killed and restarted: the first and last node
//                       back, the p50/p99 of each node's delay, and the most registrations in
//                       any 100 ms (the herd the backoff's jitter spreads)
//   usage: agent_load --musterctld PATH --dir DIR [--nodes 12500] [--channels 500]
//                     [--heartbeat-ms 5000] [--clients 50] [--submit-rate 10] [--phase-s 30]
//                     [--job-s 20-60] [--group-commit true|false]
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "muster/client/certificates.h"
#include "muster/client/controller_client.h"
#include "muster/common/node_keys.h"
#include "muster/credentials/node_proof.h"
#include "muster/v1/node.grpc.pb.h"

namespace {

namespace v1 = muster::v1;
using Clock = std::chrono::steady_clock;
using Ms = std::chrono::milliseconds;

struct Options {
  std::string musterctld, dir;
  uint32_t nodes = 12'500, channels = 500, heartbeat_ms = 5000, clients = 50;
  double submit_rate = 10;  // per client, per second
  uint32_t phase_s = 30, job_min_s = 20, job_max_s = 60;
  bool group_commit = true;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// ---------------------------------------------------------------------------------------------
// A timer wheel's poor cousin: one thread runs what falls due, in order.
class Timers {
 public:
  Timers() : thread_([this] { Run(); }) {}
  ~Timers() {
    {
      std::lock_guard l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void After(Clock::duration d, std::function<void()> fn) {
    std::lock_guard l(mu_);
    queue_.push({Clock::now() + d, seq_++, std::move(fn)});
    cv_.notify_one();
  }

 private:
  struct Item {
    Clock::time_point when;
    uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Item& o) const { return when != o.when ? when > o.when : seq > o.seq; }
  };
  void Run() {
    std::unique_lock l(mu_);
    while (!stop_) {
      if (queue_.empty()) {
        cv_.wait(l);
        continue;
      }
      if (queue_.top().when > Clock::now()) {
        cv_.wait_until(l, queue_.top().when);
        continue;
      }
      auto fn = std::move(const_cast<Item&>(queue_.top()).fn);
      queue_.pop();
      l.unlock();
      fn();
      l.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> queue_;
  uint64_t seq_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

class Load;

// One simulated agent: its jobs and its connection state; a Session reactor per connection.
struct SimNode {
  std::string name, instance;
  std::string key;  // its [node_auth] key
  v1::NodeRegistry::Stub* stub = nullptr;
  std::mutex mu;
  std::map<uint64_t, uint32_t> jobs;  // job -> run
  uint64_t seq = 0;
  int backoff_ms = 100;
  class Session* session = nullptr;  // under mu
  Clock::time_point lost_at{};       // when its last session broke (zero: never)
};

class Session final : public grpc::ClientBidiReactor<v1::AgentMessage, v1::ControllerMessage> {
 public:
  Session(Load* load, SimNode* node, uint64_t epoch, const std::string& ticket);
  void Send(v1::AgentMessage m) {
    std::lock_guard l(mu_);
    if (done_) return;
    out_.push_back(std::move(m));
    if (!writing_) {
      writing_ = true;
      StartWrite(&out_.front());
    }
  }
  void OnWriteDone(bool ok) override {
    std::lock_guard l(mu_);
    out_.pop_front();
    if (ok && !out_.empty()) {
      StartWrite(&out_.front());
    } else {
      writing_ = false;
    }
  }
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status&) override;

 private:
  Load* load_;
  SimNode* node_;
  grpc::ClientContext ctx_;
  v1::ControllerMessage in_;
  std::mutex mu_;
  std::deque<v1::AgentMessage> out_;
  bool writing_ = false, done_ = false;
};

class Load {
 public:
  explicit Load(Options o) : o_(std::move(o)), rng_(7) {}
  int Run();

  // ---- Called by sessions and timers. ----
  void Connected(SimNode* n) {
    std::lock_guard l(stats_mu_);
    ++registrations_;
    registered_.insert(n->name);
    if (n->lost_at != Clock::time_point{}) {
      reconnect_ms_.push_back(
          std::chrono::duration<double, std::milli>(Clock::now() - n->lost_at).count());
      reconnect_at_.push_back(Clock::now());
    }
  }
  void Lost(SimNode* n) {
    {
      std::lock_guard l(n->mu);
      n->session = nullptr;
      n->lost_at = Clock::now();
    }
    {
      std::lock_guard l(stats_mu_);
      registered_.erase(n->name);
    }
    Reconnect(n);
  }
  void Reconnect(SimNode* n) {
    int wait;
    {
      std::lock_guard l(n->mu);
      std::lock_guard r(rng_mu_);
      wait = std::uniform_int_distribution<int>(n->backoff_ms / 2, n->backoff_ms)(rng_);
      n->backoff_ms = std::min(n->backoff_ms * 2, 2000);
    }
    timers_.After(Ms(wait), [this, n] { Register(n); });
  }
  void Launched(SimNode* n, const v1::LaunchJob& l) {
    const uint64_t id = l.job_id();
    const uint32_t run = l.requeue_count();
    {
      std::lock_guard g(n->mu);
      n->jobs[id] = run;
    }
    v1::AgentMessage m;
    m.mutable_job_started()->set_job_id(id);
    m.mutable_job_started()->set_run(run);
    SendTo(n, std::move(m));
    if (!l.batch_node()) return;  // the other nodes end it when told to
    int secs;
    {
      std::lock_guard r(rng_mu_);
      secs = std::uniform_int_distribution<int>(static_cast<int>(o_.job_min_s),
                                                static_cast<int>(o_.job_max_s))(rng_);
    }
    timers_.After(std::chrono::seconds(secs), [this, n, id, run] { End(n, id, run, 0); });
  }
  void Terminate(SimNode* n, const v1::TerminateJob& t) {
    bool batch_running = false;
    {
      std::lock_guard g(n->mu);
      batch_running = n->jobs.count(t.job_id()) > 0;
    }
    if (batch_running) End(n, t.job_id(), t.run(), SIGTERM);
  }
  Timers& timers() { return timers_; }
  // The run is over: sessions that end now are left as they are (the process exits).
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> launches{0};

 private:
  void Register(SimNode* n);
  void Register(SimNode* n, const std::string& challenge);
  void Heartbeat(SimNode* n);
  void SendTo(SimNode* n, v1::AgentMessage m) {
    std::lock_guard l(n->mu);
    if (n->session) n->session->Send(std::move(m));
  }
  // The job is over on this node: the batch node says how it ended, every node that it is clean.
  void End(SimNode* n, uint64_t id, uint32_t run, int sig) {
    {
      std::lock_guard g(n->mu);
      if (!n->jobs.erase(id)) return;
    }
    v1::AgentMessage exited;
    exited.mutable_batch_exited()->set_job_id(id);
    exited.mutable_batch_exited()->set_run(run);
    exited.mutable_batch_exited()->set_signal(sig);
    SendTo(n, std::move(exited));
    v1::AgentMessage cleaned;
    cleaned.mutable_job_cleaned()->set_job_id(id);
    cleaned.mutable_job_cleaned()->set_run(run);
    SendTo(n, std::move(cleaned));
  }
  pid_t StartController();
  std::string Socket() const { return o_.dir + "/ctld.sock"; }
  struct Usage {
    double cpu_s = 0, rss_mib = 0, hwm_mib = 0;
  };
  Usage ControllerUsage() const;
  size_t Registered() {
    std::lock_guard l(stats_mu_);
    return registered_.size();
  }
  std::string Diag();
  void Clients(std::atomic<bool>* stop, std::vector<double>* latencies_ms, uint64_t* errors);

  Options o_;
  std::mt19937_64 rng_;
  std::mutex rng_mu_;
  Timers timers_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::NodeRegistry::Stub>> stubs_;
  std::vector<std::unique_ptr<SimNode>> nodes_;
  pid_t ctld_ = 0;
  std::mutex stats_mu_;
  std::set<std::string> registered_;
  uint64_t registrations_ = 0;
  std::vector<double> reconnect_ms_;
  std::vector<Clock::time_point> reconnect_at_;
};

Session::Session(Load* load, SimNode* node, uint64_t epoch, const std::string& ticket)
    : load_(load), node_(node) {
  node->stub->async()->Session(&ctx_, this);
  v1::AgentMessage hello;
  hello.mutable_hello()->set_node(node->name);
  hello.mutable_hello()->set_instance_id(node->instance);
  hello.mutable_hello()->set_epoch(epoch);
  hello.mutable_hello()->set_session_ticket(ticket);
  out_.push_back(std::move(hello));
  writing_ = true;
  StartWrite(&out_.front());
  StartRead(&in_);
  StartCall();
}

void Session::OnReadDone(bool ok) {
  if (!ok) return;  // OnDone follows
  if (in_.has_launch_job()) {
    load_->launches++;
    load_->Launched(node_, in_.launch_job());
  } else if (in_.has_terminate_job()) {
    load_->Terminate(node_, in_.terminate_job());
  }
  in_.Clear();
  StartRead(&in_);
}

void Session::OnDone(const grpc::Status&) {
  if (load_->stopping.load()) return;
  {
    std::lock_guard l(mu_);
    done_ = true;
  }
  SimNode* n = node_;
  Load* load = load_;
  // Not inside the reactor's own callback: the node may open its next session at once.
  load->timers().After(Ms(0), [load, n, this] {
    {
      std::lock_guard l(n->mu);
      if (n->session == this) n->session = nullptr;
    }
    delete this;
    load->Lost(n);
  });
}

void Load::Register(SimNode* n) {
  // As a real agent without TLS: a challenge first, answered with the node's key.
  struct Challenge {
    grpc::ClientContext ctx;
    v1::ChallengeRequest req;
    v1::ChallengeResponse resp;
  };
  auto* challenge = new Challenge;
  challenge->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  n->stub->async()->Challenge(&challenge->ctx, &challenge->req, &challenge->resp,
                              [this, n, challenge](grpc::Status st) {
                                if (!st.ok()) {
                                  Reconnect(n);
                                } else {
                                  Register(n, challenge->resp.challenge());
                                }
                                delete challenge;
                              });
}

void Load::Register(SimNode* n, const std::string& challenge) {
  struct Call {
    grpc::ClientContext ctx;
    v1::RegisterRequest req;
    v1::RegisterResponse resp;
  };
  auto* call = new Call;
  call->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  call->req.set_challenge(challenge);
  call->req.set_proof(muster::credentials::NodeProof(n->key, challenge, n->name, n->instance));
  v1::NodeInventory* inv = call->req.mutable_inventory();
  inv->set_name(n->name);
  inv->set_cpus(128);
  inv->set_memory_mb(2'048'000);
  for (int g = 0; g < 8; ++g) inv->add_gpus()->set_type("h100");
  call->req.set_instance_id(n->instance);
  {
    std::lock_guard l(n->mu);
    for (const auto& [id, run] : n->jobs) call->req.add_running_job_ids(id);
  }
  n->stub->async()->Register(&call->ctx, &call->req, &call->resp, [this, n, call](grpc::Status st) {
    if (!st.ok()) {
      Reconnect(n);
    } else {
      {
        std::lock_guard l(n->mu);
        n->backoff_ms = 100;
        n->session = new Session(this, n, call->resp.epoch(), call->resp.session_ticket());
      }
      Connected(n);
    }
    delete call;
  });
}

void Load::Heartbeat(SimNode* n) {
  v1::AgentMessage m;
  {
    std::lock_guard l(n->mu);
    m.mutable_heartbeat()->set_seq(++n->seq);
    for (const auto& [id, run] : n->jobs) m.mutable_heartbeat()->add_running_job_ids(id);
  }
  SendTo(n, std::move(m));
  int jitter;
  {
    std::lock_guard r(rng_mu_);
    jitter = std::uniform_int_distribution<int>(-static_cast<int>(o_.heartbeat_ms) / 10,
                                                static_cast<int>(o_.heartbeat_ms) / 10)(rng_);
  }
  timers_.After(Ms(static_cast<int>(o_.heartbeat_ms) + jitter), [this, n] { Heartbeat(n); });
}

pid_t Load::StartController() {
  const std::string conf = o_.dir + "/muster.toml";
  pid_t pid = ::fork();
  if (pid == 0) {
    FILE* f = std::freopen((o_.dir + "/musterctld.log").c_str(), "a", stderr);
    if (f) ::dup2(::fileno(stderr), 1);
    ::execl(o_.musterctld.c_str(), o_.musterctld.c_str(), "--config", conf.c_str(), nullptr);
    _exit(127);
  }
  // Serving when its socket answers.
  for (int i = 0; i < 60'000; ++i) {
    if (auto c = muster::client::ControllerClient::Connect(Socket()); c.ok()) {
      if (c->ControllerInfo().ok()) return pid;
    }
    std::this_thread::sleep_for(Ms(1));
  }
  return -1;
}

Load::Usage Load::ControllerUsage() const {
  Usage u;
  std::ifstream stat("/proc/" + std::to_string(ctld_) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const size_t close = text.rfind(')');
  if (close != std::string::npos) {
    std::istringstream rest(text.substr(close + 2));
    std::string field;
    std::vector<std::string> f;
    while (rest >> field) f.push_back(field);
    if (f.size() > 13) {
      u.cpu_s = (std::stod(f[11]) + std::stod(f[12])) / static_cast<double>(::sysconf(_SC_CLK_TCK));
    }
  }
  std::ifstream status("/proc/" + std::to_string(ctld_) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) u.rss_mib = std::stod(line.substr(6)) / 1024;
    if (line.rfind("VmHWM:", 0) == 0) u.hwm_mib = std::stod(line.substr(6)) / 1024;
  }
  return u;
}

// sdiag's timings as JSON fields.
std::string Load::Diag() {
  auto c = muster::client::ControllerClient::Connect(Socket());
  if (!c.ok()) return "\"diag\": null";
  auto d = c->Diagnostics(true);
  if (!d.ok()) return "\"diag\": null";
  std::ostringstream s;
  s << "\"diag\": {";
  bool first = true;
  for (const auto& t : d->timings()) {
    char buf[256];
    std::snprintf(
        buf, sizeof buf,
        "%s\"%s\": {\"count\": %llu, \"p50_us\": %.0f, \"p99_us\": %.0f, \"max_us\": %.0f}",
        first ? "" : ", ", t.kind().c_str(), static_cast<unsigned long long>(t.count()), t.p50_us(),
        t.p99_us(), t.max_us());
    s << buf;
    first = false;
  }
  s << "}";
  return s.str();
}

void Load::Clients(std::atomic<bool>* stop, std::vector<double>* latencies_ms, uint64_t* errors) {
  std::mutex mu;
  std::vector<std::thread> threads;
  for (uint32_t i = 0; i < o_.clients; ++i) {
    threads.emplace_back([&, i] {
      auto c = muster::client::ControllerClient::Connect(Socket());
      if (!c.ok()) return;
      std::mt19937_64 rng(i);
      const auto period = std::chrono::duration<double>(1.0 / o_.submit_rate);
      auto next = Clock::now();
      std::vector<double> mine;
      uint64_t failed = 0;
      static const uint32_t kGpus[] = {1, 2, 4, 8, 8};
      while (!stop->load()) {
        v1::SubmitJobRequest req;
        v1::JobSpec* s = req.mutable_spec();
        s->set_name("load");
        s->set_script("#!/bin/sh\ntrue\n");
        s->set_work_dir("/tmp");
        s->set_nodes(rng() % 20 == 0 ? 4 : 1);
        s->set_gpus_per_node(kGpus[rng() % 5]);
        const auto t0 = Clock::now();
        auto r = c->SubmitJob(req);
        mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        if (!r.ok()) ++failed;
        next += std::chrono::duration_cast<Clock::duration>(period);
        std::this_thread::sleep_until(next);
      }
      std::lock_guard l(mu);
      latencies_ms->insert(latencies_ms->end(), mine.begin(), mine.end());
      *errors += failed;
    });
  }
  for (auto& t : threads) t.join();
}

int Load::Run() {
  std::filesystem::create_directories(o_.dir);
  rlimit nofile{65536, 65536};
  ::setrlimit(RLIMIT_NOFILE, &nofile);  // musterctld inherits it
  const uint16_t port = static_cast<uint16_t>(20000 + getpid() % 20000);
  {
    std::ofstream conf(o_.dir + "/muster.toml");
    conf << "cluster_name = \"load\"\n[controller]\nsocket = \"" << Socket() << "\"\nstate_dir = \""
         << o_.dir << "/state\"\nagent_address = \"127.0.0.1:" << port << "\"\n"
         << "group_commit = " << (o_.group_commit ? "true" : "false") << "\n"
         << "[scheduling]\nheartbeat_interval_ms = " << o_.heartbeat_ms
         << "\nnode_not_responding_ms = " << 6 * o_.heartbeat_ms
         << "\nnode_down_ms = " << 12 * o_.heartbeat_ms << "\nmax_pending_jobs_per_user = 0\n";
    for (uint32_t first = 1; first <= o_.nodes; first += 32) {
      const uint32_t last = std::min(o_.nodes, first + 31);
      const uint32_t leaf = (first - 1) / 32 + 1, spine = (leaf - 1) / 16 + 1;
      conf << "[[nodes]]\nnames = \"gpu[" << first << "-" << last
           << "]\"\ncpus = 128\nmemory_mb = 2048000\ngpus = 8\ngpu_type = \"h100\"\n"
           << "topology = \"spine" << spine << "/leaf" << leaf << "\"\n";
    }
    conf << "[node_auth]\nkey_file = \"" << o_.dir << "/node-keys/%n.key\"\n";
    conf << "[[partition]]\nname = \"gpu\"\nnodes = \"gpu[1-" << o_.nodes
         << "]\"\ndefault = true\nmax_time = \"3-0\"\n";
  }
  std::filesystem::remove_all(o_.dir + "/state");
  muster::client::CertificateOptions keys;
  keys.dir = o_.dir + "/node-keys";
  for (uint32_t i = 1; i <= o_.nodes; ++i) keys.nodes.push_back("gpu" + std::to_string(i));
  if (auto made = muster::client::MakeNodeKeys(keys); !made.ok()) {
    std::fprintf(stderr, "agent_load: %s\n", made.status().message().c_str());
    return 1;
  }
  ctld_ = StartController();
  if (ctld_ <= 0) {
    std::fprintf(stderr, "agent_load: musterctld did not start; see %s/musterctld.log\n",
                 o_.dir.c_str());
    return 1;
  }
  const std::string target = "127.0.0.1:" + std::to_string(port);
  for (uint32_t c = 0; c < o_.channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt("muster.load.channel", static_cast<int>(c));  // a connection of its own
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    channels_.push_back(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
    stubs_.push_back(v1::NodeRegistry::NewStub(channels_.back()));
  }
  const auto t_start = Clock::now();
  for (uint32_t i = 0; i < o_.nodes; ++i) {
    auto n = std::make_unique<SimNode>();
    n->name = "gpu" + std::to_string(i + 1);
    n->instance = "load-" + std::to_string(getpid()) + "-" + std::to_string(i);
    muster::NodeAuthConfig auth;
    auth.key_file = o_.dir + "/node-keys/%n.key";
    auto key = muster::LoadNodeKey(auth, n->name);
    if (!key.ok()) {
      std::fprintf(stderr, "agent_load: %s\n", key.status().message().c_str());
      return 1;
    }
    n->key = std::move(*key);
    n->stub = stubs_[i % o_.channels].get();
    nodes_.push_back(std::move(n));
  }
  for (auto& n : nodes_) {
    SimNode* p = n.get();
    Register(p);
    std::uniform_int_distribution<int> first(0, static_cast<int>(o_.heartbeat_ms));
    int at;
    {
      std::lock_guard r(rng_mu_);
      at = first(rng_);
    }
    timers_.After(Ms(at), [this, p] { Heartbeat(p); });
  }
  while (Registered() < o_.nodes && Clock::now() - t_start < std::chrono::seconds(300)) {
    std::this_thread::sleep_for(Ms(10));
  }
  const double register_all_s = std::chrono::duration<double>(Clock::now() - t_start).count();
  std::fprintf(stderr, "agent_load: %zu nodes registered in %.1f s\n", Registered(),
               register_all_s);

  // Heartbeats alone.
  (void)Diag();  // counts from here
  Usage u0 = ControllerUsage();
  auto w0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(o_.phase_s));
  Usage u1 = ControllerUsage();
  double wall = std::chrono::duration<double>(Clock::now() - w0).count();
  const double hb_cores = (u1.cpu_s - u0.cpu_s) / wall;
  const std::string hb_diag = Diag();
  std::fprintf(stderr, "agent_load: heartbeats only: %.3f cores, RSS %.0f MiB\n", hb_cores,
               u1.rss_mib);

  // Clients submitting; jobs launched, run and end.
  std::atomic<bool> stop{false};
  std::vector<double> submit_ms;
  uint64_t submit_errors = 0;
  u0 = ControllerUsage();
  w0 = Clock::now();
  std::thread clients([&] { Clients(&stop, &submit_ms, &submit_errors); });
  std::this_thread::sleep_for(std::chrono::seconds(o_.phase_s));
  stop = true;
  clients.join();
  u1 = ControllerUsage();
  wall = std::chrono::duration<double>(Clock::now() - w0).count();
  const double loaded_cores = (u1.cpu_s - u0.cpu_s) / wall;
  const std::string loaded_diag = Diag();
  std::fprintf(stderr, "agent_load: loaded: %.3f cores, RSS %.0f MiB, %zu submissions\n",
               loaded_cores, u1.rss_mib, submit_ms.size());

  // The controller killed and started again: how the agents come back.
  {
    std::lock_guard l(stats_mu_);
    reconnect_ms_.clear();
    reconnect_at_.clear();
  }
  ::kill(ctld_, SIGKILL);
  int st = 0;
  ::waitpid(ctld_, &st, 0);
  std::this_thread::sleep_for(Ms(1000));
  const auto restarting = Clock::now();
  ctld_ = StartController();
  const double serve_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - restarting).count();
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (Registered() < o_.nodes && Clock::now() < deadline) std::this_thread::sleep_for(Ms(10));
  double first_back_s = 0, last_back_s = 0;
  uint32_t peak_per_100ms = 0;
  std::vector<double> delays;
  {
    std::lock_guard l(stats_mu_);
    delays = reconnect_ms_;
    std::map<int64_t, uint32_t> per_slot;
    for (const auto& at : reconnect_at_) {
      const double s = std::chrono::duration<double>(at - restarting).count();
      last_back_s = std::max(last_back_s, s);
      first_back_s = first_back_s == 0 ? s : std::min(first_back_s, s);
      peak_per_100ms = std::max(peak_per_100ms, ++per_slot[static_cast<int64_t>(s * 10)]);
    }
  }
  std::printf(
      "{\"nodes\": %u, \"channels\": %u, \"heartbeat_ms\": %u, \"clients\": %u, "
      "\"submit_rate_per_client\": %.1f, \"register_all_s\": %.2f, "
      "\"hb_only\": {\"cores\": %.3f, %s}, "
      "\"loaded\": {\"cores\": %.3f, \"rss_mib\": %.0f, \"peak_rss_mib\": %.0f, "
      "\"submissions\": %zu, \"submit_errors\": %llu, \"submit_p50_ms\": %.2f, "
      "\"submit_p99_ms\": %.2f, \"launches\": %llu, %s}, "
      "\"reconnect\": {\"serve_ms\": %.0f, \"nodes_back\": %zu, \"first_back_s\": %.2f, "
      "\"last_back_s\": %.2f, \"delay_p50_ms\": %.0f, \"delay_p99_ms\": %.0f, "
      "\"peak_registrations_per_100ms\": %u}}\n",
      o_.nodes, o_.channels, o_.heartbeat_ms, o_.clients, o_.submit_rate, register_all_s, hb_cores,
      hb_diag.c_str(), loaded_cores, u1.rss_mib, u1.hwm_mib, submit_ms.size(),
      static_cast<unsigned long long>(submit_errors), Percentile(submit_ms, 0.5),
      Percentile(submit_ms, 0.99), static_cast<unsigned long long>(launches.load()),
      loaded_diag.c_str(), serve_ms, delays.size(), first_back_s, last_back_s,
      Percentile(delays, 0.5), Percentile(delays, 0.99), peak_per_100ms);
  std::fflush(stdout);
  stopping = true;
  ::kill(ctld_, SIGTERM);
  ::waitpid(ctld_, &st, 0);
  std::_Exit(0);  // the simulated sessions are not torn down one by one
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string a = argv[i], v = argv[i + 1];
      if (a == "--musterctld")
        o.musterctld = v;
      else if (a == "--dir")
        o.dir = v;
      else if (a == "--nodes")
        o.nodes = static_cast<uint32_t>(std::stoul(v));
      else if (a == "--channels")
        o.channels = static_cast<uint32_t>(std::stoul(v));
      else if (a == "--heartbeat-ms")
        o.heartbeat_ms = static_cast<uint32_t>(std::stoul(v));
      else if (a == "--clients")
        o.clients = static_cast<uint32_t>(std::stoul(v));
      else if (a == "--submit-rate")
        o.submit_rate = std::stod(v);
      else if (a == "--phase-s")
        o.phase_s = static_cast<uint32_t>(std::stoul(v));
      else if (a == "--group-commit")
        o.group_commit = v != "false";
      else if (a == "--job-s") {
        o.job_min_s = static_cast<uint32_t>(std::stoul(v));
        o.job_max_s = static_cast<uint32_t>(std::stoul(v.substr(v.find('-') + 1)));
      } else {
        o.dir.clear();
      }
    }
  } catch (const std::exception&) {
    std::fprintf(stderr, "%s: a value that is not a number\n", "agent_load");
    return 2;
  }
  if (argc % 2 == 0 || o.musterctld.empty() || o.dir.empty() || o.nodes == 0 || o.channels == 0 ||
      o.submit_rate <= 0 || o.job_max_s < o.job_min_s) {
    std::fprintf(stderr,
                 "usage: agent_load --musterctld PATH --dir DIR [--nodes N] [--channels N] "
                 "[--heartbeat-ms MS] [--clients N] [--submit-rate PER_CLIENT_PER_S] "
                 "[--phase-s S] [--job-s MIN-MAX] [--group-commit true|false]\n");
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  return Load(o).Run();
}
