// A policy manager's world without the engine: a one-node cluster's config (plus the test's own
// tables), an EngineContext over an in-memory store that outlives "restarts", and for managers
// that read jobs, a job table filled from that store as the engine's recovery fills it.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "account_manager.h"
#include "engine_context.h"
#include "job_manager.h"
#include "limit_tracker.h"
#include "muster/common/config.h"
#include "muster/store/state_store.h"
#include "node_manager.h"
#include "qos_manager.h"
#include "resource_ledger.h"

namespace muster::controller {

class ManagerContext {
 public:
  explicit ManagerContext(std::string extra) : extra_(std::move(extra)) {}

  // A fresh context over the same store, as a restarted controller has; then load what the
  // store holds.
  std::unique_ptr<EngineContext> Restart() {
    auto c = ParseConfig(std::string(R"(
[[nodes]]
names = "node1"
cpus = 4
memory_mb = 1000

[[partition]]
name = "p"
nodes = "node1"
)") + extra_,
                         "test.toml");
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    EngineOptions o;
    if (c.ok()) o.config = *c;
    auto loaded = store_.LoadAll();
    EXPECT_TRUE(loaded.ok());
    if (loaded.ok()) state_ = std::move(*loaded);
    return std::make_unique<EngineContext>(std::move(o), &store_);
  }
  // What the store held at the last Restart.
  const store::LoadedState& state() const { return state_; }
  store::InMemoryStateStore& store() { return store_; }
  // Jobs as an earlier controller left them in the store: the next Restart reads them.
  void PutJobs(const std::vector<v1::JobRecord>& recs) {
    store::Mutation m;
    for (const v1::JobRecord& r : recs) m.PutJob(r);
    EXPECT_TRUE(store_.Commit(m).ok());
  }

  static Caller Root() { return {0, 0, "root", true}; }
  static Caller Alice() { return {1000, 1000, "alice", false}; }

 private:
  const std::string extra_;
  store::InMemoryStateStore store_;
  store::LoadedState state_;
};

// The job table over `ctx`, with the nodes and ledger it needs, holding the jobs the store held
// at the last Restart (as Engine::Recover restores them).
struct JobTable {
  JobTable(EngineContext& ctx, const store::LoadedState& state, TimeMs now)
      : ledger(ctx.config()), nodes(ctx), jobs(ctx, nodes, ledger) {
    auto index_of = [&ctx](const std::string& name) { return ctx.NodeIndex(name); };
    for (v1::JobRecord rec : state.jobs) {
      ledger.HoldRecovered(rec, index_of);
      jobs.Restore(std::move(rec), now);
    }
    Status finished = jobs.FinishRestore(now);
    EXPECT_TRUE(finished.ok()) << finished.ToString();
  }
  ResourceLedger ledger;
  NodeManager nodes;
  JobManager jobs;
};

// A restarted controller's accounts and QoS over `world`'s store, wired as the engine wires them
// (an account names only a QoS that exists) and restored as Engine::Recover restores them, from
// what the store held at the Restart this makes; then the job table and the limits over them.
struct PolicyManagers {
  PolicyManagers(ManagerContext& world, TimeMs now)
      : ctx(world.Restart()), accounts(*ctx), qos(*ctx) {
    accounts.SetQosExists([this](const std::string& q) { return qos.Exists(q); });
    store::Mutation m;
    qos.Restore(world.state().qos, m);
    accounts.Restore(world.state().accounts, world.state().users, m);
    const Status committed = world.store().Commit(m);
    EXPECT_TRUE(committed.ok()) << committed.ToString();
    // The jobs after the accounts and QoS, as recovery reads them.
    table.emplace(*ctx, world.state(), now);
    limits.emplace(*ctx, accounts, qos, table->jobs);
  }
  PolicyManagers(const PolicyManagers&) = delete;  // accounts' QoS check holds `this`
  PolicyManagers& operator=(const PolicyManagers&) = delete;

  std::unique_ptr<EngineContext> ctx;  // first: the others hold it
  AccountManager accounts;
  QosManager qos;
  std::optional<JobTable> table;
  std::optional<LimitTracker> limits;
};

}  // namespace muster::controller
