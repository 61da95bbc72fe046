// A policy manager's world without the engine: a one-node cluster's config (plus the test's own
// tables), an EngineContext over an in-memory store that outlives "restarts".
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "engine_context.h"
#include "muster/common/config.h"
#include "muster/store/state_store.h"

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

  static Caller Root() { return {0, 0, "root", true}; }
  static Caller Alice() { return {1000, 1000, "alice", false}; }

 private:
  const std::string extra_;
  store::InMemoryStateStore store_;
  store::LoadedState state_;
};

}  // namespace muster::controller
