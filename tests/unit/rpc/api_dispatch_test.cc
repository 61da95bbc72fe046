// The one dispatch layer over a runner on a virtual clock: requests in as bytes, replies out as
// bytes, sacct's scan off the strand, and the allocations a connection holds.
#include "muster/rpc/api_dispatch.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "muster/common/manual_executor.h"
#include "muster/rpc/controller_server.h"
#include "one_node_config.h"

namespace muster::rpc {
namespace {

using controller::Caller;

const Caller kRoot{0, 0, "root", true};

class ApiDispatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spdlog::set_level(spdlog::level::warn);
    auto c = testing::OneNodeConfig();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    Tweak(*c);
    controller::ControllerRunnerOptions o;
    o.config = *c;
    o.clock = &clock_;
    o.executor = &executor_;
    o.store = MakeStore();
    auto r = controller::ControllerRunner::Create(std::move(o));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    runner_ = std::move(*r);
    runner_->Start(nullptr);
    dispatcher_ = std::make_unique<ApiDispatcher>(*runner_);
    session_ = std::make_shared<ClientSession>();
    session_->caller = Caller{1000, 1000, "alice", false};
  }

  virtual void Tweak(Config&) {}
  virtual std::unique_ptr<store::StateStore> MakeStore() {
    return std::make_unique<store::InMemoryStateStore>();
  }

  // One request, as a transport hands it over; runs the executor until the reply is there.
  ApiReply Call(v1::Method method, const google::protobuf::MessageLite& req) {
    return Call(method, req.SerializeAsString());
  }
  ApiReply Call(uint32_t method, std::string payload) {
    std::optional<ApiReply> reply;
    dispatcher_->Dispatch(session_, method, std::move(payload),
                          [&](ApiReply r) { reply = std::move(r); });
    EXPECT_FALSE(reply.has_value()) << "work runs on the strand, not in the caller";
    executor_.RunUntilIdle();
    EXPECT_TRUE(reply.has_value());
    return reply.value_or(ApiReply{Internal("no reply"), ""});
  }

  uint64_t Submit(bool interactive = false) {
    v1::SubmitJobRequest req;
    req.mutable_spec()->set_work_dir("/tmp");
    req.mutable_spec()->set_interactive(interactive);
    if (!interactive) req.mutable_spec()->set_script("#!/bin/sh\ntrue\n");
    ApiReply r = Call(v1::METHOD_SUBMIT_JOB, req);
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
    v1::SubmitJobResponse resp;
    EXPECT_TRUE(resp.ParseFromString(r.payload));
    return resp.job_id();
  }

  v1::JobInfo Job(uint64_t id) {
    v1::GetJobRequest req;
    req.set_job_id(id);
    ApiReply r = Call(v1::METHOD_GET_JOB, req);
    v1::GetJobResponse resp;
    EXPECT_TRUE(r.status.ok() && resp.ParseFromString(r.payload)) << r.status.ToString();
    return resp.job();
  }

  ManualClock clock_;
  ManualExecutor executor_{&clock_};
  std::unique_ptr<controller::ControllerRunner> runner_;
  std::unique_ptr<ApiDispatcher> dispatcher_;
  std::shared_ptr<ClientSession> session_;
};

TEST_F(ApiDispatchTest, RequestsAndRepliesAreBytesAndTheCallerIsTheTransports) {
  const uint64_t id = Submit();
  const v1::JobInfo job = Job(id);
  EXPECT_EQ(job.user(), "alice") << "who the job runs as comes from the transport, not the request";
  EXPECT_EQ(job.state(), v1::PENDING);

  EXPECT_EQ(Call(9999, "").status.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(Call(v1::METHOD_SUBMIT_JOB, "\xff\xff not a message").status.code(),
            StatusCode::kInvalidArgument);
  v1::UpdateNodeRequest drain;
  drain.set_nodes("node1");
  drain.set_action(v1::UpdateNodeRequest::DRAIN);
  drain.set_reason("fan");
  EXPECT_EQ(Call(v1::METHOD_UPDATE_NODE, drain).status.code(), StatusCode::kPermissionDenied);
}

// Scripts, their arguments and environments are bytes, not UTF-8 text, and so are the job's
// name, working directory and output paths (Unix paths are bytes): a Latin-1 job is a job like
// any other, and its views (through the API, parsed as a client parses them) give back the
// bytes it was submitted with.
TEST_F(ApiDispatchTest, AJobInAnyEncodingIsAcceptedAndShownAsSubmitted) {
  v1::SubmitJobRequest req;
  req.mutable_spec()->set_name("r\xe9sultats");
  req.mutable_spec()->set_work_dir("/tmp/caf\xe9");
  req.mutable_spec()->set_submit_dir("/tmp/caf\xe9");
  req.mutable_spec()->set_stdout_pattern("sortie-\xe9t\xe9-%j.out");
  req.mutable_spec()->set_stderr_pattern("/tmp/caf\xe9/\xff.err");
  req.mutable_spec()->set_script("#!/bin/sh\necho caf\xe9 \xff\xfe\n");
  req.mutable_spec()->add_script_args("r\xe9sum\xe9");
  req.mutable_spec()->add_environment("GREETING=d\xe9j\xe0 vu");
  ApiReply r = Call(v1::METHOD_SUBMIT_JOB, req);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  v1::SubmitJobResponse resp;
  ASSERT_TRUE(resp.ParseFromString(r.payload));
  const v1::JobInfo job = Job(resp.job_id());
  EXPECT_EQ(job.state(), v1::PENDING);
  EXPECT_EQ(job.name(), "r\xe9sultats");
  EXPECT_EQ(job.work_dir(), "/tmp/caf\xe9");
  EXPECT_EQ(job.stdout_path(),
            "/tmp/caf\xe9/sortie-\xe9t\xe9-" + std::to_string(job.id()) + ".out");
  EXPECT_EQ(job.stderr_path(), "/tmp/caf\xe9/\xff.err");
}

// Every request is checked before the engine sees it: unknown enum values, oversized lists and
// strings with NUL bytes get INVALID_ARGUMENT with a message and change nothing.
TEST_F(ApiDispatchTest, MalformedRequestsAreRefusedBeforeTheEngine) {
  const uint64_t id = Submit();
  auto refused = [&](v1::Method method, const google::protobuf::MessageLite& req,
                     const std::string& says) {
    ApiReply r = Call(method, req);
    EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument) << says;
    EXPECT_NE(r.status.message().find(says), std::string::npos) << r.status.message();
  };
  v1::UpdateJobRequest bad_action;
  bad_action.add_job_ids(id);
  bad_action.set_action(static_cast<v1::UpdateJobRequest::Action>(77));
  refused(v1::METHOD_UPDATE_JOB, bad_action, "unknown job action 77");
  v1::ListJobsRequest bad_state;
  bad_state.add_states(static_cast<v1::JobState>(1234));
  refused(v1::METHOD_LIST_JOBS, bad_state, "unknown job state 1234");
  v1::ListJobsRequest many_users;
  for (int i = 0; i <= 100'000; ++i) many_users.add_users("u");
  refused(v1::METHOD_LIST_JOBS, many_users, "users has 100001 entries");
  v1::ListAccountingRequest nul_user;
  nul_user.add_users(std::string("ali\0ce", 6));
  refused(v1::METHOD_LIST_ACCOUNTING, nul_user, "NUL byte");
  v1::UpdateNodeRequest long_reason;
  long_reason.set_nodes("node1");
  long_reason.set_action(v1::UpdateNodeRequest::DRAIN);
  long_reason.set_reason(std::string(5000, 'r'));
  refused(v1::METHOD_UPDATE_NODE, long_reason, "reason is longer than 1024 bytes");
  v1::CancelJobRequest bad_signal;
  bad_signal.add_job_ids(id);
  bad_signal.set_signal(1000);
  refused(v1::METHOD_CANCEL_JOB, bad_signal, "signal 1000 is not one");
  EXPECT_EQ(Job(id).state(), v1::PENDING) << "nothing changed";
}

TEST_F(ApiDispatchTest, TheEncodedJobListIsTheEnginesListInBytes) {
  for (int i = 0; i < 3; ++i) Submit();
  for (bool brief : {true, false}) {
    v1::ListJobsRequest req;
    req.set_brief(brief);
    ApiReply r = Call(v1::METHOD_LIST_JOBS, req);
    ASSERT_TRUE(r.status.ok());
    v1::ListJobsResponse from_bytes;
    ASSERT_TRUE(from_bytes.ParseFromString(r.payload));
    auto structured = runner_->engine().ListJobs(kRoot, req);
    ASSERT_TRUE(structured.ok());
    ASSERT_EQ(from_bytes.jobs_size(), 3);
    EXPECT_EQ(from_bytes.SerializeAsString(), structured->SerializeAsString());
    EXPECT_EQ(from_bytes.jobs(1).user(), "alice") << "the cached part of a brief row is there";
    EXPECT_EQ(from_bytes.jobs(1).state(), v1::PENDING) << "and so is the changing part";
  }
}

TEST_F(ApiDispatchTest, AccountingScansOffTheStrandAndStillAnswers) {
  const uint64_t id = Submit();
  v1::ListAccountingRequest req;
  req.add_job_ids(id);
  ApiReply r = Call(v1::METHOD_LIST_ACCOUNTING, req);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  v1::ListAccountingResponse resp;
  ASSERT_TRUE(resp.ParseFromString(r.payload));
  ASSERT_EQ(resp.jobs_size(), 1);
  EXPECT_EQ(resp.jobs(0).id(), id);
  EXPECT_EQ(Call(v1::METHOD_LIST_ACCOUNTING, "\xff\xff").status.code(),
            StatusCode::kInvalidArgument);
}

// Group commit: submissions that arrive while the store syncs share the next sync, and none is
// answered before a sync covering it has returned.
class GroupCommitTest : public ApiDispatchTest {
 protected:
  struct SyncCountingStore : store::InMemoryStateStore {
    explicit SyncCountingStore(GroupCommitTest* t) : test(t) {}
    Status Sync() override {
      test->replies_at_sync.push_back(test->replies.size());
      return Status::Ok();
    }
    GroupCommitTest* test;
  };
  std::unique_ptr<store::StateStore> MakeStore() override {
    return std::make_unique<SyncCountingStore>(this);
  }
  std::vector<size_t> replies_at_sync;
  std::vector<uint64_t> replies;
};

TEST_F(GroupCommitTest, SubmissionsShareOneSyncAndAreAnsweredAfterItInOrder) {
  for (int i = 0; i < 20; ++i) {
    v1::SubmitJobRequest req;
    req.mutable_spec()->set_work_dir("/tmp");
    req.mutable_spec()->set_script("#!/bin/sh\ntrue\n");
    dispatcher_->Dispatch(session_, v1::METHOD_SUBMIT_JOB, req.SerializeAsString(),
                          [&](ApiReply r) {
                            v1::SubmitJobResponse resp;
                            ASSERT_TRUE(r.status.ok() && resp.ParseFromString(r.payload));
                            replies.push_back(resp.job_id());
                          });
  }
  executor_.RunUntilIdle();
  ASSERT_EQ(replies.size(), 20u);
  EXPECT_TRUE(std::is_sorted(replies.begin(), replies.end()));
  ASSERT_FALSE(replies_at_sync.empty());
  EXPECT_EQ(replies_at_sync[0], 0u) << "a submission was answered before its sync";
  EXPECT_LE(replies_at_sync.size(), 2u) << "20 submissions, one sync for all (and a spare)";
  // A read that changes nothing is answered without a sync of its own.
  const size_t syncs = replies_at_sync.size();
  (void)Job(replies[0]);
  EXPECT_EQ(replies_at_sync.size(), syncs);
}

// sdiag: every request and pass is counted by kind; only admins reset the counts.
TEST_F(ApiDispatchTest, DiagnosticsCountEachKindOfWorkAndOnlyAdminsResetThem) {
  Submit();
  Submit();
  (void)Call(v1::METHOD_SUBMIT_JOB, std::string("\xff\xff", 2));  // refused, still counted
  executor_.AdvanceMs(1000);                                      // a scheduling pass falls due
  auto diag = [&](bool reset) {
    v1::DiagnosticsRequest req;
    req.set_reset(reset);
    ApiReply r = Call(v1::METHOD_DIAGNOSTICS, req);
    v1::DiagnosticsResponse resp;
    EXPECT_TRUE(!r.status.ok() || resp.ParseFromString(r.payload));
    return std::make_pair(r.status, resp);
  };
  auto count = [](const v1::DiagnosticsResponse& d, const std::string& kind) -> uint64_t {
    for (const auto& t : d.timings()) {
      if (t.kind() == kind) return t.count();
    }
    return 0;
  };
  auto [st, d] = diag(false);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(count(d, "api/SUBMIT_JOB"), 3u);
  EXPECT_GE(count(d, "scheduler/pass"), 1u);
  EXPECT_EQ(d.jobs_pending() + d.jobs_running(), 2u);
  EXPECT_EQ(d.nodes(), 1u);
  for (const auto& t : d.timings()) {
    EXPECT_LE(t.p50_us(), t.p99_us()) << t.kind();
    EXPECT_LE(t.p99_us(), t.max_us()) << t.kind();
  }
  EXPECT_EQ(diag(true).first.code(), StatusCode::kPermissionDenied);
  session_->caller = kRoot;  // roles come from the running config at each request
  auto [reset_st, before_reset] = diag(true);
  ASSERT_TRUE(reset_st.ok()) << reset_st.ToString();
  EXPECT_EQ(count(before_reset, "api/SUBMIT_JOB"), 3u) << "the reset's reply covers what it ends";
  auto after = diag(false).second;
  EXPECT_EQ(count(after, "api/SUBMIT_JOB"), 0u);
  EXPECT_EQ(count(after, "api/DIAGNOSTICS"), 1u);  // the reset itself
}

TEST_F(ApiDispatchTest, AnAllocationEndsWhenTheConnectionThatAttachedItCloses) {
  const uint64_t id = Submit(/*interactive=*/true);
  v1::AttachAllocationRequest attach;
  attach.set_job_id(id);
  ASSERT_TRUE(Call(v1::METHOD_ATTACH_ALLOCATION, attach).status.ok());
  EXPECT_EQ(session_->allocations, std::vector<uint64_t>{id});
  EXPECT_EQ(Job(id).state(), v1::PENDING);

  dispatcher_->SessionClosed(session_);
  executor_.RunUntilIdle();
  const v1::JobInfo job = Job(id);
  EXPECT_EQ(job.state(), v1::CANCELLED);
  EXPECT_NE(job.reason_detail().find("went away"), std::string::npos) << job.reason_detail();

  // Another user's connection cannot take it over.
  const uint64_t other = Submit(/*interactive=*/true);
  session_ = std::make_shared<ClientSession>();
  session_->caller = Caller{1001, 1001, "bob", false};
  attach.set_job_id(other);
  EXPECT_EQ(Call(v1::METHOD_ATTACH_ALLOCATION, attach).status.code(),
            StatusCode::kPermissionDenied);
  EXPECT_TRUE(session_->allocations.empty());
}

// scontrol reconfigure through the dispatcher: admins only, audited either way; the config the
// loader reads replaces the running one, and an allocation a connection holds stays attached
// (its grace for a missing client does not start: the new engine knows its connection).
TEST_F(ApiDispatchTest, ReconfigureIsForAdminsAuditedAndKeepsAllocationsAttached) {
  auto next = testing::OneNodeConfig();
  ASSERT_TRUE(next.ok());
  next->partitions.push_back(next->partitions[0]);
  next->partitions[1].name = "more";
  next->partitions[1].is_default = false;
  next->scheduling.allocation_grace_ms = 1000;
  int reads = 0;
  dispatcher_ = std::make_unique<ApiDispatcher>(*runner_, [&]() -> Result<Config> {
    ++reads;
    return *next;
  });
  const uint64_t id = Submit(/*interactive=*/true);
  v1::AttachAllocationRequest attach;
  attach.set_job_id(id);
  ASSERT_TRUE(Call(v1::METHOD_ATTACH_ALLOCATION, attach).status.ok());

  ApiReply denied = Call(v1::METHOD_RECONFIGURE, v1::ReconfigureRequest());
  EXPECT_EQ(denied.status.code(), StatusCode::kPermissionDenied) << denied.status.ToString();
  EXPECT_EQ(reads, 0) << "a user's request does not even read the file";
  EXPECT_EQ(runner_->engine().config().partitions.size(), 1u);

  auto admin = std::make_shared<ClientSession>();
  admin->caller = kRoot;
  std::optional<ApiReply> reply;
  dispatcher_->Dispatch(admin, v1::METHOD_RECONFIGURE, v1::ReconfigureRequest().SerializeAsString(),
                        [&](ApiReply r) { reply = std::move(r); });
  executor_.RunUntilIdle();
  ASSERT_TRUE(reply.has_value());
  ASSERT_TRUE(reply->status.ok()) << reply->status.ToString();
  v1::ReconfigureResponse resp;
  ASSERT_TRUE(resp.ParseFromString(reply->payload));
  EXPECT_EQ(reads, 1);
  EXPECT_EQ(resp.epoch(), runner_->epoch());
  EXPECT_NE(std::find(resp.changes().begin(), resp.changes().end(), "partition more added"),
            resp.changes().end());
  EXPECT_EQ(runner_->engine().config().partitions.size(), 2u);

  // Well past the new grace: the allocation still has its client.
  executor_.AdvanceMs(5000);
  EXPECT_EQ(Job(id).state(), v1::PENDING) << Job(id).reason_detail();
  // Without it, the grace ends an allocation whose client is gone (the check is a real one).
  dispatcher_->SessionClosed(session_);
  executor_.RunUntilIdle();
  EXPECT_EQ(Job(id).state(), v1::CANCELLED);

  // Both attempts are in the audit log, the refused one as refused.
  v1::ListAuditRequest audit;
  audit.set_oldest_first(true);
  reply.reset();
  dispatcher_->Dispatch(admin, v1::METHOD_LIST_AUDIT, audit.SerializeAsString(),
                        [&](ApiReply r) { reply = std::move(r); });
  executor_.RunUntilIdle();
  ASSERT_TRUE(reply.has_value() && reply->status.ok());
  v1::ListAuditResponse entries;
  ASSERT_TRUE(entries.ParseFromString(reply->payload));
  std::vector<std::pair<std::string, bool>> seen;
  for (const auto& e : entries.entries()) {
    if (e.action() == "reconfigure") seen.emplace_back(e.user(), e.allowed());
  }
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, bool>>{{"alice", false}, {"root", true}}));
}

// A file the controller cannot take (here: it no longer parses) is refused with its error, and
// the running config stays.
TEST_F(ApiDispatchTest, AFileThatDoesNotParseIsRefusedAndTheRunningConfigKept) {
  dispatcher_ = std::make_unique<ApiDispatcher>(*runner_, []() -> Result<Config> {
    return ParseConfig("[[nodes]\nnames = \"x\"\n", "/etc/muster/muster.toml");
  });
  session_->caller = kRoot;
  const uint64_t epoch = runner_->epoch();
  ApiReply r = Call(v1::METHOD_RECONFIGURE, v1::ReconfigureRequest());
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status.message().find("the running configuration is kept"), std::string::npos)
      << r.status.message();
  EXPECT_NE(r.status.message().find("/etc/muster/muster.toml:1"), std::string::npos)
      << r.status.message();
  EXPECT_EQ(runner_->epoch(), epoch);
  EXPECT_EQ(runner_->engine().config().partitions.size(), 1u);
}

// private_data = ["jobs"]: a user's views hold its own jobs only; operators and admins see all.
class PrivateJobsTest : public ApiDispatchTest {
 protected:
  void Tweak(Config& c) override {
    c.private_data.jobs = true;
    c.operators = {"opal"};
  }
  // The ids a listing, a job lookup and an accounting query show to `who`.
  std::vector<uint64_t> Listed(const Caller& who) {
    session_->caller = who;
    v1::ListJobsResponse jobs;
    EXPECT_TRUE(jobs.ParseFromString(Call(v1::METHOD_LIST_JOBS, v1::ListJobsRequest()).payload));
    std::vector<uint64_t> ids;
    for (const auto& j : jobs.jobs()) ids.push_back(j.id());
    v1::ListAccountingRequest all;
    all.add_users("alice");
    all.add_users("bob");
    v1::ListAccountingResponse acct;
    EXPECT_TRUE(acct.ParseFromString(Call(v1::METHOD_LIST_ACCOUNTING, all).payload));
    std::vector<uint64_t> acct_ids;
    for (const auto& j : acct.jobs()) acct_ids.push_back(j.id());
    EXPECT_EQ(acct_ids, ids) << "accounting shows what the queue shows";
    return ids;
  }
};

TEST_F(PrivateJobsTest, UsersSeeTheirOwnJobsOnly) {
  const uint64_t alices = Submit();
  session_->caller = Caller{1001, 1001, "bob", false};
  const uint64_t bobs = Submit();
  EXPECT_EQ(Listed(Caller{1000, 1000, "alice", false}), std::vector<uint64_t>{alices});
  EXPECT_EQ(Listed(Caller{1001, 1001, "bob", false}), std::vector<uint64_t>{bobs});
  Caller op{2000, 2000, "opal", false};
  op.is_operator = true;
  EXPECT_EQ(Listed(op), (std::vector<uint64_t>{alices, bobs}));
  EXPECT_EQ(Listed(Caller{0, 0, "root", true}), (std::vector<uint64_t>{alices, bobs}));
  // DispatchApi itself (what the fuzz target and any other transport call) scopes sacct too:
  // before, only the socket's path did, and this one listed every user's jobs.
  v1::ListAccountingRequest both;
  both.add_users("alice");
  both.add_users("bob");
  ApiReply direct =
      DispatchApi(runner_->engine(), Caller{1001, 1001, "bob", false}, v1::METHOD_LIST_ACCOUNTING,
                  both.SerializeAsString(), runner_->Now());
  v1::ListAccountingResponse seen;
  ASSERT_TRUE(direct.status.ok() && seen.ParseFromString(direct.payload));
  ASSERT_EQ(seen.jobs_size(), 1);
  EXPECT_EQ(seen.jobs(0).id(), bobs);
  // One job by id: another's is refused, whether shown or explained.
  session_->caller = Caller{1001, 1001, "bob", false};
  v1::GetJobRequest get;
  get.set_job_id(alices);
  EXPECT_EQ(Call(v1::METHOD_GET_JOB, get).status.code(), StatusCode::kPermissionDenied);
  v1::ExplainJobRequest explain;
  explain.set_job_id(alices);
  EXPECT_EQ(Call(v1::METHOD_EXPLAIN_JOB, explain).status.code(), StatusCode::kPermissionDenied);
  get.set_job_id(bobs);
  EXPECT_TRUE(Call(v1::METHOD_GET_JOB, get).status.ok());
}

// private_data = ["usage"]: the queue stays public, the accounting records (sacct, sreport,
// muster report usage) are the caller's own.
class PrivateUsageTest : public ApiDispatchTest {
 protected:
  void Tweak(Config& c) override { c.private_data.usage = true; }
  std::vector<uint64_t> Accounted(const Caller& who) {
    session_->caller = who;
    v1::ListAccountingResponse acct;
    EXPECT_TRUE(acct.ParseFromString(
        Call(v1::METHOD_LIST_ACCOUNTING, v1::ListAccountingRequest()).payload));
    std::vector<uint64_t> ids;
    for (const auto& j : acct.jobs()) ids.push_back(j.id());
    return ids;
  }
};

TEST_F(PrivateUsageTest, AccountingIsTheCallersOwnButTheQueueIsNot) {
  const uint64_t alices = Submit();
  session_->caller = Caller{1001, 1001, "bob", false};
  const uint64_t bobs = Submit();
  v1::ListJobsResponse jobs;
  ASSERT_TRUE(jobs.ParseFromString(Call(v1::METHOD_LIST_JOBS, v1::ListJobsRequest()).payload));
  EXPECT_EQ(jobs.jobs_size(), 2);
  EXPECT_EQ(Accounted(Caller{1001, 1001, "bob", false}), std::vector<uint64_t>{bobs});
  EXPECT_EQ(Accounted(Caller{1000, 1000, "alice", false}), std::vector<uint64_t>{alices});
  EXPECT_EQ(Accounted(Caller{0, 0, "root", true}), (std::vector<uint64_t>{alices, bobs}));
}

TEST(ControllerCommandLineTest, OptionsAndMistakes) {
  std::vector<std::string> args = {"musterctld", "--config", "/etc/x.toml", "-l", "debug"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  auto cl = ParseControllerCommandLine(static_cast<int>(argv.size()), argv.data());
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  EXPECT_EQ(cl->config_path, "/etc/x.toml");
  EXPECT_EQ(cl->log_level, "debug");
  for (std::vector<std::string> bad : std::vector<std::vector<std::string>>{
           {"musterctld", "--bogus"}, {"musterctld", "--config"}, {"musterctld", "stray"}}) {
    std::vector<char*> bargv;
    for (auto& a : bad) bargv.push_back(a.data());
    auto b = ParseControllerCommandLine(static_cast<int>(bargv.size()), bargv.data());
    EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument) << bad.back();
  }
}

// A listing comes in bounded pages: one reply is at most a page (and the row that crossed it),
// whatever the jobs' fields make a row weigh, and the pages together hold every job once, in
// order. (The audit: 5,000 jobs with long fields made one 71 MB reply.)
TEST_F(ApiDispatchTest, AListingComesInBoundedPagesThatTogetherHoldEveryJobOnce) {
  std::vector<uint64_t> submitted;
  const std::string long_path = "/tmp/" + std::string(4000, 'p');
  for (int i = 0; i < 120; ++i) {
    v1::SubmitJobRequest req;
    req.mutable_spec()->set_work_dir(long_path);
    req.mutable_spec()->set_stdout_pattern(long_path + "/%j.out");
    req.mutable_spec()->set_stderr_pattern(long_path + "/%j.err");
    req.mutable_spec()->set_script("#!/bin/sh\ntrue\n");
    ApiReply r = Call(v1::METHOD_SUBMIT_JOB, req);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    v1::SubmitJobResponse resp;
    ASSERT_TRUE(resp.ParseFromString(r.payload));
    submitted.push_back(resp.job_id());
  }
  std::vector<uint64_t> listed;
  v1::ListJobsRequest req;
  int pages = 0;
  do {
    ApiReply r = Call(v1::METHOD_LIST_JOBS, req);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_LE(r.payload.size(), kListPageBytes + 64 * 1024);
    v1::ListJobsResponse page;
    ASSERT_TRUE(page.ParseFromString(r.payload));
    for (const auto& j : page.jobs()) listed.push_back(j.id());
    req.set_after_id(page.next_after_id());
    ++pages;
  } while (req.after_id() != 0 && pages < 100);
  EXPECT_GE(pages, 2) << "120 rows of ~12 KiB do not fit one page";
  EXPECT_EQ(listed, submitted);
}

// A pending array's waiting tasks: a brief listing sends them as runs (one row between two
// records, not a row each); a full one, paged amid the array, goes on where it stopped.
TEST_F(ApiDispatchTest, AnArraysWaitingTasksAreRunsInABriefListingAndPageInAFullOne) {
  v1::SubmitJobRequest sub;
  sub.mutable_spec()->set_work_dir("/tmp");
  sub.mutable_spec()->set_script("#!/bin/sh\ntrue\n");
  sub.mutable_spec()->set_array("0-599,700-998:2");
  ApiReply r = Call(v1::METHOD_SUBMIT_JOB, sub);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  v1::SubmitJobResponse submitted;
  ASSERT_TRUE(submitted.ParseFromString(r.payload));
  const uint64_t first = submitted.job_id();

  v1::ListJobsRequest brief;
  brief.set_brief(true);
  v1::ListJobsResponse one;
  ASSERT_TRUE(one.ParseFromString(Call(v1::METHOD_LIST_JOBS, brief).payload));
  // The carrier's own row, then one row for the first waiting task with the others as runs.
  ASSERT_EQ(one.jobs_size(), 2);
  EXPECT_EQ(one.next_after_id(), 0u);
  EXPECT_EQ(one.jobs(0).id(), first);
  EXPECT_EQ(one.jobs(0).array_waiting_size(), 0);
  const v1::JobInfo& waiting = one.jobs(1);
  EXPECT_EQ(waiting.id(), first + 1);
  EXPECT_EQ(waiting.array().task_id(), 1u);
  ASSERT_EQ(waiting.array_waiting_size(), 2) << waiting.DebugString();
  EXPECT_EQ(waiting.array_waiting(0).first_id(), first + 2);
  EXPECT_EQ(waiting.array_waiting(0).first_task(), 2u);
  EXPECT_EQ(waiting.array_waiting(0).count(), 598u);
  EXPECT_EQ(waiting.array_waiting(0).task_step(), 1u);
  EXPECT_EQ(waiting.array_waiting(1).first_id(), first + 600);
  EXPECT_EQ(waiting.array_waiting(1).first_task(), 700u);
  EXPECT_EQ(waiting.array_waiting(1).count(), 150u);
  EXPECT_EQ(waiting.array_waiting(1).task_step(), 2u);

  // Full rows, small pages: each task once, in order, across pages that end amid the array.
  v1::ListJobsRequest full;
  std::vector<std::pair<uint64_t, uint32_t>> rows;
  int pages = 0;
  do {
    v1::ListJobsResponse page;
    ASSERT_TRUE(page.ParseFromString(EncodeJobList(runner_->engine(), kRoot, full, 4 * 1024)));
    for (const auto& j : page.jobs()) rows.emplace_back(j.id(), j.array().task_id());
    full.set_after_id(page.next_after_id());
    ++pages;
  } while (full.after_id() != 0 && pages < 1000);
  EXPECT_GT(pages, 10);
  ASSERT_EQ(rows.size(), 750u);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].first, first + i);
    EXPECT_EQ(rows[i].second, i < 600 ? i : 700 + 2 * (i - 600)) << i;
  }

  // Two tasks held alone become records of their own amid the array's ids; the carrier keeps
  // the rest. Pages of every size still list each task once: full ones in id order (a page may
  // stop at a split-off task, with the carrier's tasks waiting past it), brief ones with the
  // carrier's runs never cut from the tasks split off its range.
  v1::UpdateJobRequest hold;
  hold.add_job_ids(first + 5);
  hold.add_job_ids(first + 400);
  hold.set_action(v1::UpdateJobRequest::HOLD);
  ASSERT_TRUE(Call(v1::METHOD_UPDATE_JOB, hold).status.ok());
  for (size_t page_bytes : {size_t{1}, size_t{700}, size_t{4096}, kListPageBytes}) {
    for (bool is_brief : {false, true}) {
      v1::ListJobsRequest req;
      req.set_brief(is_brief);
      std::vector<uint64_t> seen;
      int n = 0;
      do {
        v1::ListJobsResponse page;
        ASSERT_TRUE(page.ParseFromString(EncodeJobList(runner_->engine(), kRoot, req, page_bytes)));
        for (const auto& j : page.jobs()) {
          seen.push_back(j.id());
          for (const auto& run : j.array_waiting()) {
            for (uint32_t k = 0; k < run.count(); ++k) seen.push_back(run.first_id() + k);
          }
        }
        ASSERT_TRUE(page.next_after_id() == 0 || page.next_after_id() > req.after_id());
        req.set_after_id(page.next_after_id());
      } while (req.after_id() != 0 && ++n < 5000);
      EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end())) << page_bytes;
      std::sort(seen.begin(), seen.end());
      ASSERT_EQ(seen.size(), 750u) << "page of " << page_bytes << (is_brief ? " brief" : " full");
      EXPECT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end()) << page_bytes;
      EXPECT_EQ(seen.front(), first);
      EXPECT_EQ(seen.back(), first + 749);
    }
  }
  // By id (squeue -j ARRAY), paged the same way.
  for (bool is_brief : {false, true}) {
    v1::ListJobsRequest req;
    req.set_brief(is_brief);
    req.add_job_ids(first);
    std::vector<uint64_t> seen;
    int n = 0;
    do {
      v1::ListJobsResponse page;
      ASSERT_TRUE(page.ParseFromString(EncodeJobList(runner_->engine(), kRoot, req, 700)));
      for (const auto& j : page.jobs()) {
        seen.push_back(j.id());
        for (const auto& run : j.array_waiting()) {
          for (uint32_t k = 0; k < run.count(); ++k) seen.push_back(run.first_id() + k);
        }
      }
      req.set_after_id(page.next_after_id());
    } while (req.after_id() != 0 && ++n < 5000);
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen.size(), 750u) << (is_brief ? "brief" : "full");
    EXPECT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end());
  }
}

}  // namespace
}  // namespace muster::rpc
