// The runner and the engine's mail (job_mail.h): a mail reaches the mail sender only once the
// change it reports is durable (write-ahead, as agent commands), on a virtual clock.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <string>
#include <vector>

#include "muster/common/manual_executor.h"
#include "muster/controller/controller_runner.h"
#include "muster/store/forwarding_store.h"

namespace muster::controller {
namespace {

constexpr const char* kConfig = R"(
cluster_name = "sim"
[controller]
mail_prog = "/usr/bin/mail"
[scheduling]
heartbeat_interval_ms = 1000
sched_min_interval_ms = 50
[[nodes]]
names = "node1"
cpus = 8
memory_mb = 16000
gpus = 4
gpu_type = "h100"
[[partition]]
name = "gpu"
nodes = "node1"
default = true
)";

// The store under the group commit: how many of its writes no sync has covered yet.
class CountingStore : public store::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  Status Commit(const store::Mutation& m, store::Durability d) override {
    ++unsynced;
    if (d == store::Durability::kSync) unsynced = 0;
    return ForwardingStore::Commit(m, d);
  }
  Status Sync() override {
    const int covered = unsynced;
    Status s = ForwardingStore::Sync();
    unsynced -= covered;
    return s;
  }
  int unsynced = 0;
};

// Records each mail with how many writes were not yet durable when it was handed over.
class RecordingMail : public MailSink {
 public:
  explicit RecordingMail(const CountingStore* store) : store_(store) {}
  void Send(std::vector<MailNotice> mails) override {
    for (auto& m : mails) {
      subjects.push_back(m.subject);
      unsynced_at_send.push_back(store_->unsynced);
    }
  }
  std::vector<std::string> subjects;
  std::vector<int> unsynced_at_send;

 private:
  const CountingStore* store_;
};

TEST(MailRunnerTest, AMailGoesOutOnlyOnceItsChangeIsDurable) {
  spdlog::set_level(spdlog::level::warn);
  auto c = ParseConfig(kConfig, "sim.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->controller.group_commit);
  ManualClock clock;
  ManualExecutor executor(&clock);
  store::InMemoryStateStore memory;
  auto counting = std::make_unique<CountingStore>(&memory);
  CountingStore* store = counting.get();
  RecordingMail mail(store);
  ControllerRunnerOptions o;
  o.config = *c;
  o.clock = &clock;
  o.executor = &executor;
  o.store = std::move(counting);
  o.make_credential = [] { return std::string("cred"); };
  auto r = ControllerRunner::Create(std::move(o));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::unique_ptr<ControllerRunner> runner = std::move(*r);
  runner->Start(nullptr, &mail);
  executor.RunUntilIdle();

  runner->Post([&] {
    Engine& e = runner->engine();
    v1::RegisterRequest reg;
    reg.set_instance_id("i1");
    reg.mutable_inventory()->set_name("node1");
    reg.mutable_inventory()->set_cpus(8);
    reg.mutable_inventory()->set_memory_mb(16000);
    for (uint32_t i = 0; i < 4; ++i) {
      v1::GpuDevice* g = reg.mutable_inventory()->add_gpus();
      g->set_index(i);
      g->set_type("h100");
    }
    ASSERT_TRUE(e.RegisterNode(reg, clock.NowMs()).ok());
    v1::Hello h;
    h.set_node("node1");
    h.set_instance_id("i1");
    ASSERT_TRUE(e.AttachSession(h, clock.NowMs()).ok());
    v1::SubmitJobRequest req;
    req.mutable_spec()->set_name("train");
    req.mutable_spec()->set_nodes(1);
    req.mutable_spec()->set_gpus_per_node(4);
    req.mutable_spec()->set_script("#!/bin/sh\ntrue\n");
    req.mutable_spec()->set_work_dir("/tmp");
    req.mutable_spec()->set_mail_types(v1::MAIL_BEGIN);
    ASSERT_TRUE(e.SubmitJob(Caller{1000, 1000, "alice", false}, req, clock.NowMs()).ok());
    runner->AfterEvent();
  });
  executor.RunUntilIdle();
  EXPECT_TRUE(mail.subjects.empty());
  executor.AdvanceMs(50);  // the pass starts the job: its start is written, synced, then mailed
  ASSERT_EQ(mail.subjects.size(), 1u);
  EXPECT_EQ(mail.subjects[0], "Slurm Job_id=1 Name=train Began, Queued time 00:00:00");
  EXPECT_EQ(mail.unsynced_at_send[0], 0) << "mailed before the start it reports was durable";
  runner->Stop();
}

}  // namespace
}  // namespace muster::controller
