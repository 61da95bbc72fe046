// Steps and interactive allocations through the engine.
#include <algorithm>

#include "engine_fixture.h"
#include "muster/credentials/step_credential.h"

namespace muster::controller {
namespace {

// Reports a step's end on a node, as the agent does once its tasks there are gone.
v1::AgentMessage StepEnd(uint64_t job, uint32_t step, int code = 0, int sig = 0,
                         bool killed = false) {
  v1::AgentMessage m;
  auto* e = m.mutable_step_ended();
  e->set_job_id(job);
  e->set_step_id(step);
  e->set_exit_code(code);
  e->set_signal(sig);
  e->set_killed(killed);
  return m;
}

TEST_F(EngineTest, StepsOnlyForTheOwnerOfARunningJob) {
  AllUp();
  auto id = *Submit(Gang(2, 8), Alice());
  v1::CreateStepRequest r;
  r.set_job_id(id);
  // Pending, then running with nodes not yet started: the client waits and retries.
  EXPECT_EQ(engine_->CreateStep(Alice(), r, now_).status().code(), StatusCode::kUnavailable);
  Pass();
  EXPECT_EQ(engine_->CreateStep(Alice(), r, now_).status().code(), StatusCode::kUnavailable);
  Started(id, "node1");
  Started(id, "node2");
  EXPECT_EQ(engine_->CreateStep(Bob(), r, now_).status().code(), StatusCode::kPermissionDenied);
  auto s = engine_->CreateStep(Alice(), r, now_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->step_id(), 0u);
  EXPECT_EQ(s->nodes_size(), 2);
  EXPECT_EQ(s->nodes(1).first_task(), 1u);
  // Each node's credential is a grant for this step, the job's user and that node, sealed under
  // the key the node got when it registered: no other node's key opens it.
  for (int i = 0; i < 2; ++i) {
    const v1::StepNode& n = s->nodes(i);
    auto g = credentials::OpenStepGrant(registered_[n.node()].step_key(), n.credential());
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(g->node(), n.node());
    EXPECT_EQ(g->job_id(), id);
    EXPECT_EQ(g->step_id(), 0u);
    EXPECT_EQ(g->uid(), 1000u);
    EXPECT_EQ(g->first_task(), n.first_task());
    EXPECT_EQ(g->ntasks(), n.ntasks());
    EXPECT_EQ(g->cpu_ids_size(), n.cpu_ids_size());
    EXPECT_EQ(g->total_nodes(), 2u);
    EXPECT_EQ(g->expires_ms(), now_ + config_.scheduling.step_credential_lifetime_ms);
  }
  EXPECT_NE(registered_["node1"].step_key(), registered_["node2"].step_key());
  EXPECT_EQ(credentials::OpenStepGrant(registered_["node2"].step_key(), s->nodes(0).credential())
                .status()
                .code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(s->nodes(0).credential().find(Sent("node1")[0].launch_job().credential()),
            std::string::npos)
      << "the job's own credential stays between controller and agents";
  // The first step holds every CPU of the job: a second one waits, unless it overlaps.
  EXPECT_EQ(engine_->CreateStep(Alice(), r, now_).status().code(), StatusCode::kUnavailable);
  r.set_overlap(true);
  EXPECT_EQ(engine_->CreateStep(Alice(), r, now_)->step_id(), 1u);
  Exited(id, "node1", 0);
  EXPECT_EQ(engine_->CreateStep(Alice(), r, now_).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(EngineTest, StepsLayOutTasksLikeSrunAndShareCpusOnlyWhenAllowed) {
  AllUp();
  v1::JobSpec spec = Gang(2, 0);
  spec.set_ntasks(4);
  spec.set_cpus_per_task(2);
  auto id = *Submit(spec, Alice());
  Pass();
  Started(id, "node1");
  Started(id, "node2");
  auto step = [&](std::function<void(v1::CreateStepRequest&)> f) {
    v1::CreateStepRequest r;
    r.set_job_id(id);
    f(r);
    return engine_->CreateStep(Alice(), r, now_);
  };
  auto tasks = [](const v1::CreateStepResponse& s) {
    std::string out;
    for (const auto& n : s.nodes()) out += n.node() + ":" + std::to_string(n.ntasks()) + " ";
    return out;
  };
  // The job's own layout: 2 tasks on each node, every CPU of the job held.
  auto all = step([](auto&) {});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(tasks(*all), "node1:2 node2:2 ");
  EXPECT_EQ(all->nodes(0).cpu_ids_size(), 4);
  EXPECT_EQ(all->cpus_per_task(), 2u);
  EXPECT_EQ(step([](auto& r) { r.set_ntasks(1); }).status().message(), "Requested nodes are busy");
  Agent("node1", StepEnd(id, 0));
  Agent("node2", StepEnd(id, 0));
  EXPECT_EQ(Job(id).steps(0).state(), v1::COMPLETED);
  // --exact: only what the tasks need, so steps run side by side.
  auto a = step([](auto& r) {
    r.set_ntasks(1);
    r.set_exact(true);
  });
  auto b = step([](auto& r) {
    r.set_ntasks(1);
    r.set_exact(true);
  });
  auto c = step([](auto& r) {
    r.set_ntasks(1);
    r.set_exact(true);
  });
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(tasks(*a), "node1:1 ");
  EXPECT_EQ(tasks(*b), "node1:1 ");
  EXPECT_EQ(tasks(*c), "node2:1 ") << "node1's 4 CPUs are held by the two steps before";
  EXPECT_NE(a->nodes(0).cpu_ids(0), b->nodes(0).cpu_ids(0));
  EXPECT_EQ(a->step_id(), 1u);
  // -N2 -n3 is 2 + 1 (block); more than the job holds can never run.
  Agent("node1", StepEnd(id, 1));
  Agent("node1", StepEnd(id, 2));
  Agent("node2", StepEnd(id, 3));
  auto d = step([](auto& r) {
    r.set_nodes(2);
    r.set_ntasks(3);
  });
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(tasks(*d), "node1:2 node2:1 ");
  EXPECT_EQ(d->nodes(1).first_task(), 2u);
  Agent("node1", StepEnd(id, 4));
  Agent("node2", StepEnd(id, 4));
  EXPECT_EQ(step([](auto& r) { r.set_nodes(3); }).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(step([](auto& r) { r.set_ntasks(5); }).status().code(), StatusCode::kFailedPrecondition)
      << "5 tasks x 2 CPUs is more than the job's 8";
  auto n = step([](auto& r) { r.set_nodes(2); });
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(tasks(*n), "node1:1 node2:1 ") << "srun -N without -n: one task per node";
  EXPECT_EQ(step([](auto& r) { r.add_nodelist("node3"); }).status().code(),
            StatusCode::kInvalidArgument);
}

// -m cyclic and plane=N: each node's task ids come back, and its sealed grant names the same
// ones, so an agent can hold a launch to them; a block step lists none (first_task and ntasks
// say it all).
TEST_F(EngineTest, StepTaskIdsFollowTheDistributionAndAreSealedInTheGrant) {
  AllUp();
  v1::JobSpec spec = Gang(2, 0);
  spec.set_ntasks(8);
  auto id = *Submit(spec, Alice());
  Pass();
  Started(id, "node1");
  Started(id, "node2");
  auto ids = [](const auto& repeated) {
    return std::vector<uint32_t>(repeated.begin(), repeated.end());
  };
  auto step = [&](uint32_t ntasks, const std::string& dist) {
    v1::CreateStepRequest r;
    r.set_job_id(id);
    r.set_nodes(2);
    r.set_ntasks(ntasks);
    r.set_overlap(true);
    r.set_task_distribution(dist);
    return engine_->CreateStep(Alice(), r, now_);
  };
  auto cyclic = step(5, "cyclic");
  ASSERT_TRUE(cyclic.ok()) << cyclic.status().ToString();
  EXPECT_EQ(cyclic->total_tasks(), 5u);
  ASSERT_EQ(cyclic->nodes_size(), 2);
  EXPECT_EQ(ids(cyclic->nodes(0).task_ids()), (std::vector<uint32_t>{0, 2, 4}));
  EXPECT_EQ(ids(cyclic->nodes(1).task_ids()), (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(cyclic->nodes(1).first_task(), 1u) << "its lowest id";
  for (const v1::StepNode& n : cyclic->nodes()) {
    auto g = credentials::OpenStepGrant(registered_[n.node()].step_key(), n.credential());
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(ids(g->task_ids()), ids(n.task_ids())) << n.node();
    EXPECT_EQ(g->first_task(), n.first_task());
    EXPECT_EQ(g->ntasks(), n.ntasks());
  }
  auto plane = step(8, "plane=2");
  ASSERT_TRUE(plane.ok()) << plane.status().ToString();
  EXPECT_EQ(ids(plane->nodes(0).task_ids()), (std::vector<uint32_t>{0, 1, 4, 5}));
  EXPECT_EQ(ids(plane->nodes(1).task_ids()), (std::vector<uint32_t>{2, 3, 6, 7}));
  auto block = step(4, "block");
  ASSERT_TRUE(block.ok()) << block.status().ToString();
  EXPECT_EQ(block->nodes(1).first_task(), 2u);
  EXPECT_EQ(block->nodes(1).task_ids_size(), 0);
  // plane=4 with 4 tasks a node is a block too: no list.
  auto wide = step(8, "plane=4");
  ASSERT_TRUE(wide.ok()) << wide.status().ToString();
  EXPECT_EQ(wide->nodes(1).first_task(), 4u);
  EXPECT_EQ(wide->nodes(1).task_ids_size(), 0);
  for (const char* bad : {"plane=0", "arbitrary", "fcyclic"}) {
    EXPECT_EQ(step(4, bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST_F(EngineTest, StepsWithGpusGetTheirOwnAndWaitWhenNoneAreLeft) {
  AllUp();
  v1::JobSpec spec = Gang(1, 4);
  spec.set_ntasks(4);
  auto id = *Submit(spec, Alice());
  Pass();
  Started(id, "node1");
  std::set<uint32_t> seen;
  for (int i = 0; i < 4; ++i) {
    v1::CreateStepRequest r;
    r.set_job_id(id);
    r.set_ntasks(1);
    r.set_exact(true);
    r.set_gpus_per_task(1);
    auto s = engine_->CreateStep(Alice(), r, now_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_TRUE(s->gpus_given());
    ASSERT_EQ(s->nodes(0).gpu_indices_size(), 1);
    EXPECT_TRUE(seen.insert(s->nodes(0).gpu_indices(0)).second) << "a GPU given twice";
  }
  v1::CreateStepRequest r;
  r.set_job_id(id);
  r.set_ntasks(1);
  r.set_exact(true);
  r.set_gpus_per_task(1);
  EXPECT_EQ(engine_->CreateStep(Alice(), r, now_).status().code(), StatusCode::kUnavailable);
  Agent("node1", StepEnd(id, 2, 1));
  EXPECT_EQ(Job(id).steps(2).state(), v1::FAILED);
  EXPECT_EQ(Job(id).steps(2).exit_code(), 1);
  auto again = engine_->CreateStep(Alice(), r, now_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->nodes(0).gpu_indices(0), Job(id).steps(2).nodes(0).gpu_indices(0));
  r.set_gpus_per_task(5);
  r.set_overlap(true);
  EXPECT_EQ(engine_->CreateStep(Alice(), r, now_).status().code(), StatusCode::kFailedPrecondition);
}

// A restarted agent whose steps run under muster-stepd names those still running (or ended
// while it was away, their end following the registration): they stay RUNNING and end with what
// their supervisor recorded; its other steps there ended with the old agent.
// The store refuses an agent's first registration after its restart: nothing of it is kept,
// so the agent's next try is still seen as the restart it is, and the steps it lost end then.
TEST_F(EngineTest, StepsLostInARestartEndThoughTheFirstRegistrationWasNotStored) {
  AllUp();
  auto id = *Submit(Gang(2, 1), Alice());
  Pass();
  Started(id, "node1");
  Started(id, "node2");
  v1::CreateStepRequest r;
  r.set_job_id(id);
  r.set_overlap(true);
  ASSERT_TRUE(engine_->CreateStep(Alice(), r, now_).ok());
  v1::RegisterRequest again;
  again.mutable_inventory()->set_name("node2");
  again.set_instance_id("node2-new");
  again.add_running_job_ids(id);
  store_.FailNextCommitsForTest(1);
  EXPECT_FALSE(engine_->RegisterNode(again, now_).ok());
  EXPECT_EQ(Job(id).steps(0).state(), v1::RUNNING) << "nothing applied before it was stored";
  Up("node2", {id}, "node2-new");
  Agent("node1", StepEnd(id, 0));  // what ran on node1 ends; node2's part ended with its agent
  EXPECT_EQ(Job(id).steps(0).state(), v1::NODE_FAIL) << "the retry is the restart it is";
}

TEST_F(EngineTest, StepsASupervisorKeptThroughAnAgentRestartRunOn) {
  AllUp();
  auto id = *Submit(Gang(2, 1), Alice());
  Pass();
  Started(id, "node1");
  Started(id, "node2");
  std::string credential;
  for (const auto& m : Sent("node2")) {
    if (m.has_launch_job()) credential = m.launch_job().credential();
  }
  v1::CreateStepRequest r;
  r.set_job_id(id);
  r.set_overlap(true);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(engine_->CreateStep(Alice(), r, now_).ok());
  Up("node2", {id}, "node2-new", nullptr, [&](v1::RegisterRequest* reg) {
    v1::AdoptedJob* a = reg->add_adopted_jobs();
    a->set_job_id(id);
    a->set_run(0);
    a->set_uid(1000);
    a->set_credential(credential);
    a->add_running_steps(1);
  });
  Agent("node1", StepEnd(id, 0));
  Agent("node1", StepEnd(id, 1));
  EXPECT_EQ(Job(id).steps(0).state(), v1::NODE_FAIL) << "its tasks on node2 ended with the agent";
  EXPECT_EQ(Job(id).steps(1).state(), v1::RUNNING) << "its supervisor on node2 still runs it";
  Agent("node2", StepEnd(id, 1, 5));
  EXPECT_EQ(Job(id).steps(1).state(), v1::FAILED);
  EXPECT_EQ(Job(id).steps(1).exit_code(), 5);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
}

TEST_F(EngineTest, StepStatesFollowTheirTasksTheAgentAndTheJob) {
  AllUp();
  auto id = *Submit(Gang(2, 1), Alice());
  Pass();
  Started(id, "node1");
  Started(id, "node2");
  v1::CreateStepRequest r;
  r.set_job_id(id);
  r.set_overlap(true);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(engine_->CreateStep(Alice(), r, now_).ok());
  // Killed on one node (its client went away): CANCELLED once both nodes reported.
  Agent("node1", StepEnd(id, 0, 0, 9, true));
  EXPECT_EQ(Job(id).steps(0).state(), v1::RUNNING);
  Agent("node2", StepEnd(id, 0, 0, 9, true));
  EXPECT_EQ(Job(id).steps(0).state(), v1::CANCELLED);
  EXPECT_EQ(Job(id).steps(0).exit_signal(), 9);
  // A node's agent restarted: its step tasks ended with it.
  Up("node2", {id}, "node2-new");
  Agent("node1", StepEnd(id, 1));
  EXPECT_EQ(Job(id).steps(1).state(), v1::NODE_FAIL);
  // A duplicate or foreign report changes nothing.
  Agent("node1", StepEnd(id, 1, 7));
  Agent("node3", StepEnd(id, 2, 7));
  EXPECT_EQ(Job(id).steps(2).state(), v1::RUNNING);
  // The job ends: what still runs is cancelled with it, and survives the archive.
  now_ += 1000;
  Exited(id, "node1", 0);
  EXPECT_EQ(Job(id).steps(2).state(), v1::RUNNING) << "until its nodes say how it ended";
  Agent("node1", StepEnd(id, 2, 0, 15, true));
  Cleaned(id, "node1");
  Cleaned(id, "node2");
  EXPECT_EQ(Job(id).steps(2).state(), v1::NODE_FAIL) << "it had tasks on the restarted node2";
  EXPECT_EQ(Job(id).steps(2).exit_signal(), 15);
  EXPECT_EQ(Job(id).steps(3).end_time_ms(), now_);
  now_ += 120'000;
  engine_->Tick(now_);
  v1::ListAccountingRequest q;
  q.add_job_ids(id);
  auto acct = engine_->ListAccounting(Root(), q, now_);
  ASSERT_TRUE(acct.ok());
  ASSERT_EQ(acct->jobs_size(), 1);
  EXPECT_EQ(acct->jobs(0).steps_size(), 4);
  EXPECT_EQ(acct->jobs(0).steps(0).state(), v1::CANCELLED);
  EXPECT_EQ(acct->jobs(0).state(), v1::COMPLETED);
}

// Counts in a step request come from the client: a bogus one is refused, never trusted.
TEST_F(EngineTest, ABogusStepRequestIsRefusedNotTrusted) {
  AllUp();
  auto id = *Submit(Gang(1, 2), Alice());
  Pass();
  Started(id, "node1");
  v1::CreateStepRequest r;
  r.set_job_id(id);
  r.set_ntasks(1u << 30);
  EXPECT_EQ(engine_->CreateStep(Alice(), r, now_).status().code(), StatusCode::kInvalidArgument);
  // 2^20 tasks x 2^20 CPUs wraps to 0 in 32 bits: it must still be "more than the job holds".
  r.set_ntasks(1u << 20);
  r.set_cpus_per_task(1u << 20);
  r.set_exact(true);
  EXPECT_EQ(engine_->CreateStep(Alice(), r, now_).status().code(), StatusCode::kFailedPrecondition);
  r.clear_cpus_per_task();
  r.set_ntasks(1u << 16);
  r.set_gpus_per_task(1u << 16);
  EXPECT_EQ(engine_->CreateStep(Alice(), r, now_).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(engine_->CheckInvariantsForTest().ok());
}

TEST_F(EngineTest, InteractiveAllocationsEndWithTheirClient) {
  AllUp();
  v1::JobSpec spec = Gang(2, 1);
  spec.set_interactive(true);
  spec.set_script("#!/bin/sh\n");
  EXPECT_EQ(Submit(spec, Alice()).status().code(), StatusCode::kInvalidArgument);
  spec.clear_script();
  auto id = *Submit(spec, Alice());
  v1::AttachAllocationRequest at;
  at.set_job_id(id);
  EXPECT_EQ(engine_->AttachAllocation(Bob(), at, now_).status().code(),
            StatusCode::kPermissionDenied);
  ASSERT_TRUE(engine_->AttachAllocation(Alice(), at, now_).ok());
  Pass();
  ASSERT_EQ(Job(id).state(), v1::RUNNING);
  EXPECT_TRUE(Job(id).interactive());
  for (const char* n : {"node1", "node2"}) {
    auto sent = Sent(n);
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_FALSE(sent[0].launch_job().batch_node()) << "an allocation runs no script";
  }
  // The client reports how it ended.
  v1::ReleaseAllocationRequest rel;
  rel.set_job_id(id);
  rel.set_exit_code(3);
  EXPECT_EQ(engine_->ReleaseAllocation(Bob(), rel, now_).status().code(),
            StatusCode::kPermissionDenied);
  ASSERT_TRUE(engine_->ReleaseAllocation(Alice(), rel, now_).ok());
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Job(id).exit_code(), 3);
  EXPECT_FALSE(Sent("node1").empty()) << "its nodes are told to clean up";
  // A client that dies: its connection closes and the allocation ends.
  auto id2 = *Submit(spec, Alice());
  ASSERT_TRUE(engine_
                  ->AttachAllocation(
                      Alice(),
                      [&] {
                        v1::AttachAllocationRequest a;
                        a.set_job_id(id2);
                        return a;
                      }(),
                      now_)
                  .ok());
  Pass();
  ASSERT_EQ(Job(id2).state(), v1::RUNNING);
  engine_->AllocationClientGone(id2, now_);
  EXPECT_EQ(Job(id2).state(), v1::CANCELLED);
  // salloc --no-shell: its client goes once granted, and the allocation stays, past the grace,
  // until it is cancelled.
  v1::JobSpec detached = spec;
  detached.set_no_shell(true);
  auto kept = *Submit(detached, Alice());
  v1::AttachAllocationRequest attach;
  attach.set_job_id(kept);
  ASSERT_TRUE(engine_->AttachAllocation(Alice(), attach, now_).ok());
  Pass();
  ASSERT_EQ(Job(kept).state(), v1::RUNNING);
  engine_->AllocationClientGone(kept, now_);
  const v1::JobInfo info = Job(kept);
  const std::vector<std::string> held(info.nodes().begin(), info.nodes().end());
  for (int i = 0; i < 7; ++i) {  // past the 60 s grace of an allocation no client holds
    now_ += 9'000;
    for (const std::string n : {"node1", "node2", "node3", "node4"}) {
      const bool holds = std::find(held.begin(), held.end(), n) != held.end();
      Up(n, holds ? std::vector<uint64_t>{kept} : std::vector<uint64_t>{});
    }
    engine_->Tick(now_);
  }
  EXPECT_EQ(Job(kept).state(), v1::RUNNING) << Job(kept).reason_detail();
  v1::CancelJobRequest cancel;
  cancel.add_job_ids(kept);
  ASSERT_TRUE(engine_->CancelJob(Alice(), cancel, now_).ok());
  EXPECT_NE(Job(kept).state(), v1::RUNNING);
  // One that never attaches ends after the grace; cancel and the time limit end one at once.
  auto id3 = *Submit(spec, Alice());
  now_ += 59'000;
  engine_->Tick(now_);
  EXPECT_EQ(Job(id3).state(), v1::PENDING);
  now_ += 2'000;
  engine_->Tick(now_);
  EXPECT_EQ(Job(id3).state(), v1::CANCELLED);
  AllUp();  // they went silent while the clock jumped
  v1::JobSpec limited = spec;
  limited.set_time_limit_ms(60'000);
  auto id4 = *Submit(limited, Alice());
  ASSERT_TRUE(engine_
                  ->AttachAllocation(
                      Alice(),
                      [&] {
                        v1::AttachAllocationRequest a;
                        a.set_job_id(id4);
                        return a;
                      }(),
                      now_)
                  .ok());
  Pass();
  ASSERT_EQ(Job(id4).state(), v1::RUNNING);
  now_ += 60'000;
  AllUp();  // alive (heartbeats) while the clock jumps
  engine_->Tick(now_);
  EXPECT_EQ(Job(id4).state(), v1::TIMEOUT);
  // A batch job cannot be released by its client.
  auto batch = *Submit(Gang(1, 1), Alice());
  rel.set_job_id(batch);
  EXPECT_EQ(engine_->ReleaseAllocation(Alice(), rel, now_).status().code(),
            StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace muster::controller
