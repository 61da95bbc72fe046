// The engine test fixture: a 4-node cluster in an in-memory store, agents played by the test, a
// manual clock (now_), and the invariants checked after every pass and every agent message.
#pragma once

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>
#include <functional>
#include <string>
#include <vector>

#include "muster/controller/engine.h"

namespace muster::controller {

constexpr const char* kConfig = R"(
cluster_name = "t"
admins = ["ops"]
[scheduling]
heartbeat_interval_ms = 1000
node_not_responding_ms = 3000
node_down_ms = 10000
kill_grace_ms = 100
finished_job_retention_ms = 60000
[[nodes]]
names = "node[1-2]"
cpus = 16
memory_mb = 64000
gpus = 8
gpu_type = "h100"
topology = "spine1/leaf1"
[[nodes]]
names = "node[3-4]"
cpus = 16
memory_mb = 64000
gpus = 8
gpu_type = "h100"
topology = "spine1/leaf2"
features = ["ib", "nvl"]
nvlink_domain = "rack2"
[[partition]]
name = "gpu"
nodes = "node[1-4]"
default = true
)";

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spdlog::set_level(spdlog::level::warn);
    auto c = ParseConfig(kConfig, "test.toml");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    config_ = *c;
    Restart();
  }

  // The test cluster with `extra` appended to its config, restarted with every node up.
  void UseConfig(const std::string& extra) {
    auto c = ParseConfig(std::string(kConfig) + extra, "test.toml");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    config_ = *c;
    Restart();
    AllUp();
  }

  void Restart() {
    engine_.reset();
    EngineOptions o;
    o.config = config_;
    o.make_credential = [this] { return "cred" + std::to_string(++creds_); };
    auto e = Engine::Create(o, &store_, now_);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(*e);
  }

  // Registers and attaches a node, optionally reporting jobs it holds.
  void Up(const std::string& node, std::vector<uint64_t> jobs = {}, std::string instance = "",
          const std::function<void(v1::NodeInventory*)>& tweak = nullptr,
          const std::function<void(v1::RegisterRequest*)>& request_tweak = nullptr) {
    v1::RegisterRequest r;
    r.mutable_inventory()->set_name(node);
    r.mutable_inventory()->set_step_address("127.0.0.1:1");
    // The hardware the config promises (less drains the node; see the reconciliation tests).
    if (const NodeConfig* c = config_.FindNode(node)) {
      r.mutable_inventory()->set_cpus(c->cpus);
      r.mutable_inventory()->set_memory_mb(c->memory_mb);
      for (uint32_t i = 0; i < c->gpus; ++i) {
        v1::GpuDevice* g = r.mutable_inventory()->add_gpus();
        g->set_index(i);
        g->set_type(c->gpu_type);
      }
    }
    if (tweak) tweak(r.mutable_inventory());
    if (instance.empty()) instance = node + "-i" + std::to_string(engine_->epoch());
    r.set_instance_id(instance);
    for (auto id : jobs) r.add_running_job_ids(id);
    if (request_tweak) request_tweak(&r);
    auto registered = engine_->RegisterNode(r, now_);
    ASSERT_TRUE(registered.ok()) << registered.status().ToString();
    registered_[node] = *registered;
    v1::Hello h;
    h.set_node(node);
    h.set_instance_id(instance);
    ASSERT_TRUE(engine_->AttachSession(h, now_).ok());
  }

  void AllUp() {
    for (const char* n : {"node1", "node2", "node3", "node4"}) Up(n);
  }

  Result<uint64_t> Submit(v1::JobSpec spec, Caller who = Root()) {
    if (spec.script().empty() && !spec.interactive()) spec.set_script("#!/bin/sh\ntrue\n");
    if (spec.work_dir().empty()) spec.set_work_dir("/tmp");
    v1::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    auto r = engine_->SubmitJob(who, req, now_);
    if (!r.ok()) return r.status();
    return r->job_id();
  }

  static v1::JobSpec Gang(uint32_t nodes, uint32_t gpus) {
    v1::JobSpec s;
    s.set_nodes(nodes);
    s.set_gpus_per_node(gpus);
    return s;
  }

  static Caller Root() { return {0, 0, "root", true}; }
  // The audit view in the order things happened (the default is newest first).
  static v1::ListAuditRequest Chronological() {
    v1::ListAuditRequest r;
    r.set_oldest_first(true);
    return r;
  }
  static Caller Alice() { return {1000, 1000, "alice", false}; }
  static Caller Bob() { return {1001, 1001, "bob", false}; }

  v1::JobInfo Job(uint64_t id) {
    v1::GetJobRequest r;
    r.set_job_id(id);
    auto j = engine_->GetJob(Root(), r);
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? j->job() : v1::JobInfo();
  }

  v1::NodeInfo Node(const std::string& name) {
    auto r = engine_->ListNodes(Root(), v1::ListNodesRequest(), now_);
    for (const auto& n : r->nodes()) {
      if (n.name() == name) return n;
    }
    ADD_FAILURE() << "no node " << name;
    return {};
  }

  void Pass() {
    engine_->RunSchedulePass(now_);
    ASSERT_TRUE(engine_->CheckInvariantsForTest().ok())
        << engine_->CheckInvariantsForTest().ToString();
  }

  void Agent(const std::string& node, v1::AgentMessage m) {
    engine_->OnAgentMessage(node, m, now_);
    ASSERT_TRUE(engine_->CheckInvariantsForTest().ok())
        << engine_->CheckInvariantsForTest().ToString();
  }

  void Exited(uint64_t id, const std::string& node, int code, int sig = 0, bool timeout = false) {
    v1::AgentMessage m;
    m.mutable_batch_exited()->set_job_id(id);
    m.mutable_batch_exited()->set_exit_code(code);
    m.mutable_batch_exited()->set_signal(sig);
    m.mutable_batch_exited()->set_timed_out(timeout);
    m.mutable_batch_exited()->set_run(Job(id).requeue_count());
    Agent(node, m);
  }

  void Cleaned(uint64_t id, const std::string& node, uint32_t run = 0) {
    v1::AgentMessage m;
    m.mutable_job_cleaned()->set_job_id(id);
    m.mutable_job_cleaned()->set_run(run);
    Agent(node, m);
  }

  void Started(uint64_t id, const std::string& node) {
    v1::AgentMessage m;
    m.mutable_job_started()->set_job_id(id);
    m.mutable_job_started()->set_run(Job(id).requeue_count());
    Agent(node, m);
  }

  // Starts job `id` on its nodes (the agents report it started).
  void Run(uint64_t id) {
    ASSERT_EQ(Job(id).state(), v1::RUNNING) << id << ": " << Job(id).reason_detail();
    const v1::JobInfo job = Job(id);
    for (const auto& n : job.nodes()) Started(id, n);
  }

  // The job's nodes report its run `run` gone.
  void CleanUp(uint64_t id, uint32_t run) {
    const v1::JobInfo job = Job(id);
    for (const auto& n : job.nodes()) Cleaned(id, n, run);
  }

  void Flush() {
    engine_->TakeOutgoing();
    outbox_.clear();
  }

  // Commands sent to `node` since the last call.
  std::vector<v1::ControllerMessage> Sent(const std::string& node) {
    for (auto& o : engine_->TakeOutgoing()) outbox_.push_back(std::move(o));
    std::vector<v1::ControllerMessage> out;
    auto it = std::stable_partition(outbox_.begin(), outbox_.end(),
                                    [&](const Outgoing& o) { return o.node != node; });
    for (auto i = it; i != outbox_.end(); ++i) {
      if (!i->close_session) out.push_back(i->message);
    }
    outbox_.erase(it, outbox_.end());
    return out;
  }

  Config config_;
  store::InMemoryStateStore store_;
  std::unique_ptr<Engine> engine_;
  TimeMs now_ = 1'700'000'000'000;
  int creds_ = 0;
  std::vector<Outgoing> outbox_;
  std::map<std::string, v1::RegisterResponse> registered_;  // the last answer to each node
};

}  // namespace muster::controller
