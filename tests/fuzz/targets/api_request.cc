// The user API behind the transports: any method and payload, from a user or an admin, gets a
// reply and leaves the engine's invariants whole. One engine (in-memory store) for a run; it is
// made anew every 5,000 inputs so that it stays small.
#include <memory>
#include <string>

#include "fuzz_check.h"
#include "muster/controller/engine.h"
#include "muster/rpc/api_dispatch.h"
#include "muster/store/state_store.h"

namespace {

constexpr const char* kConfig = R"(
cluster_name = "fuzz"
[[nodes]]
names = "node[1-4]"
cpus = 16
memory_mb = 64000
gpus = 8
gpu_type = "h100"
topology = "spine1/leaf1"
[[partition]]
name = "gpu"
nodes = "node[1-4]"
default = true
)";

struct World {
  muster::store::InMemoryStateStore store;
  std::unique_ptr<muster::controller::Engine> engine;
  int uses = 0;
};

World& TheWorld() {
  static auto* world = new World();
  if (!world->engine || ++world->uses > 5000) {
    delete world;
    world = new World();
    muster::controller::EngineOptions o;
    o.config = *muster::ParseConfig(kConfig, "fuzz.toml");
    o.make_credential = [] { return std::string("credential"); };
    auto engine = muster::controller::Engine::Create(o, &world->store, 1'000'000);
    FUZZ_CHECK(engine.ok());
    world->engine = std::move(*engine);
  }
  return *world;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  World& w = TheWorld();
  const uint32_t method = data[0] % 23;  // every method there is, and 0
  muster::controller::Caller caller{static_cast<uint32_t>(data[1] & 1 ? 1000 : 0), 1000,
                                    data[1] & 1 ? "alice" : "root", !(data[1] & 1)};
  std::string payload(reinterpret_cast<const char*>(data + 2), size - 2);
  muster::rpc::ApiReply r =
      muster::rpc::DispatchApi(*w.engine, caller, method, payload, 1'000'000 + w.uses);
  FUZZ_CHECK(r.status.ok() || r.payload.empty());
  w.engine->RunSchedulePass(1'000'000 + w.uses);
  FUZZ_CHECK(w.engine->CheckInvariantsForTest().ok());
  return 0;
}
