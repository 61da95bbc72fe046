// Advance reservations through the engine: made, changed, listed, kept across restarts and
// deleted by admins only, with clear errors; jobs that name them; what they keep from other jobs
// (and maintenance windows from jobs that would run into them); their end; and a scenario over
// simulated hours in which no job ever runs on a reservation it is not in.
#include <random>

#include "engine_fixture.h"

namespace muster::controller {
namespace {

constexpr TimeMs kMin = 60'000;
constexpr TimeMs kHour = 60 * kMin;

class ReservationTest : public EngineTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    AllUp();
  }

  Result<std::string> Create(const std::string& name, const std::string& nodes, TimeMs start,
                             TimeMs duration, const std::string& flags = "",
                             const std::string& users = "root,alice", Caller who = Root()) {
    v1::UpdateReservationRequest req;
    req.set_op(v1::ACCOUNT_OP_ADD);
    req.set_name(name);
    if (!nodes.empty()) req.set_nodes(nodes);
    req.set_start_ms(start);
    if (duration) req.set_duration_ms(duration);
    if (!flags.empty()) req.set_flags(flags);
    if (!users.empty()) req.set_users(users);
    auto r = engine_->UpdateReservation(who, req, now_);
    if (!r.ok()) return r.status();
    return r->name();
  }
  Status Op(v1::UpdateReservationRequest req, Caller who = Root()) {
    return engine_->UpdateReservation(who, req, now_).status();
  }
  std::vector<v1::ReservationRecord> List() {
    auto r = engine_->ListReservations(Root(), v1::ListReservationsRequest(), now_);
    EXPECT_TRUE(r.ok());
    return {r->reservations().begin(), r->reservations().end()};
  }
  Result<uint64_t> SubmitIn(const std::string& resv, uint32_t nodes, TimeMs limit,
                            Caller who = Root()) {
    v1::JobSpec s = Gang(nodes, 8);
    s.set_time_limit_ms(limit);
    s.set_reservation(resv);
    return Submit(s, who);
  }
};

TEST_F(ReservationTest, AdminsCreateChangeListAndDeleteThemAndTheyAreKept) {
  auto name = Create("maint1", "node[1-2]", now_ + kHour, 2 * kHour, "maint,ignore_jobs");
  ASSERT_TRUE(name.ok()) << name.status().ToString();
  auto unnamed = Create("", "node3", now_ + 5 * kHour, kHour);
  ASSERT_TRUE(unnamed.ok()) << unnamed.status().ToString();
  EXPECT_EQ(*unnamed, "root_1") << "Slurm's <user>_<n>";

  v1::UpdateReservationRequest up;
  up.set_op(v1::ACCOUNT_OP_MODIFY);
  up.set_name("maint1");
  up.set_duration_ms(3 * kHour);
  up.set_users("+bob");
  up.set_flags("+flex");
  ASSERT_TRUE(Op(up).ok());

  Restart();
  auto all = List();
  ASSERT_EQ(all.size(), 2u);
  const v1::ReservationRecord& m = all[0];
  EXPECT_EQ(m.name(), "maint1");
  EXPECT_EQ(m.start_ms(), now_ + kHour);
  EXPECT_EQ(m.end_ms(), now_ + 4 * kHour) << "the duration changed, the start kept";
  EXPECT_EQ(std::vector<std::string>(m.nodes().begin(), m.nodes().end()),
            (std::vector<std::string>{"node1", "node2"}));
  EXPECT_EQ(std::vector<std::string>(m.users().begin(), m.users().end()),
            (std::vector<std::string>{"alice", "bob", "root"}));
  EXPECT_TRUE(m.maint() && m.ignore_jobs() && m.flex());
  EXPECT_EQ(m.created_by(), "root");

  v1::UpdateReservationRequest del;
  del.set_op(v1::ACCOUNT_OP_REMOVE);
  del.set_name("maint1");
  ASSERT_TRUE(Op(del).ok());
  EXPECT_EQ(Op(del).code(), StatusCode::kNotFound);
  Restart();
  ASSERT_EQ(List().size(), 1u);
  EXPECT_EQ(engine_->ListReservations(Root(), v1::ListReservationsRequest(), now_)
                ->reservations(0)
                .name(),
            "root_1");
}

TEST_F(ReservationTest, BadRequestsAreRefusedClearlyAndChangeNothing) {
  auto fails = [&](Result<std::string> r, StatusCode code, const std::string& words) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), code) << r.status().ToString();
    EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().ToString();
  };
  fails(Create("r", "node1", now_, kHour, "", "alice", Alice()), StatusCode::kPermissionDenied,
        "reservations");
  fails(Create("r", "node9", now_, kHour), StatusCode::kNotFound, "node9");
  fails(Create("r", "node1", now_, 0), StatusCode::kInvalidArgument, "needs an end");
  fails(Create("r", "node1", now_, kHour, "", ""), StatusCode::kInvalidArgument, "users");
  fails(Create("r", "node1", now_, kHour, "sometimes"), StatusCode::kInvalidArgument,
        "unknown reservation flag 'sometimes'");
  fails(Create("r", "node1", now_, 2 * 86'400'000, "daily"), StatusCode::kInvalidArgument,
        "at most a day");
  fails(Create("bad name!", "node1", now_, kHour), StatusCode::kInvalidArgument, "bad reservation");
  v1::UpdateReservationRequest acct;
  acct.set_op(v1::ACCOUNT_OP_ADD);
  acct.set_name("r");
  acct.set_nodes("node1");
  acct.set_duration_ms(kHour);
  acct.set_accounts("nosuch");
  EXPECT_EQ(Op(acct).code(), StatusCode::kNotFound);

  ASSERT_TRUE(Create("a", "node[1-2]", now_ + kHour, kHour).ok());
  fails(Create("b", "node2", now_ + 90 * kMin, kHour), StatusCode::kFailedPrecondition,
        "reservation a already holds node node2");
  EXPECT_TRUE(Create("b", "node2", now_ + 90 * kMin, kHour, "maint").ok())
      << "maintenance may overlap";
  fails(Create("a", "node3", now_, kHour), StatusCode::kAlreadyExists, "exists");

  // Busy nodes: a running job without a time limit holds node3 for good.
  auto job = Submit(Gang(1, 8));
  ASSERT_TRUE(job.ok());
  Pass();
  ASSERT_EQ(Job(*job).state(), v1::RUNNING);
  const std::string on = Job(*job).nodes(0);
  fails(Create("c", on, now_ + kHour, kHour), StatusCode::kFailedPrecondition,
        "busy with job " + std::to_string(*job));
  EXPECT_TRUE(Create("c", on, now_ + kHour, kHour, "ignore_jobs").ok());
  EXPECT_EQ(List().size(), 3u);

  // Not deleted while a job names it.
  auto in = SubmitIn("a", 1, 10 * kMin);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  v1::UpdateReservationRequest del;
  del.set_op(v1::ACCOUNT_OP_REMOVE);
  del.set_name("a");
  EXPECT_EQ(Op(del).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(List().size(), 3u);
}

TEST_F(ReservationTest, JobsNameItAndOnlyItsUsersMay) {
  ASSERT_TRUE(Create("team", "node[1-2]", now_, 2 * kHour, "", "alice").ok());
  auto unknown = SubmitIn("nosuch", 1, kHour);
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("invalid reservation 'nosuch'"), std::string::npos);
  auto bob = SubmitIn("team", 1, kHour, Bob());
  EXPECT_EQ(bob.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(bob.status().message().find("users alice"), std::string::npos)
      << bob.status().message();

  // Alice's 3-hour gang runs on the reserved nodes and ends with the reservation; root's jobs
  // (not in it) get the other two nodes only.
  auto a = SubmitIn("team", 2, 3 * kHour, Alice());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto others = Submit(Gang(3, 8));
  ASSERT_TRUE(others.ok());
  v1::JobSpec one = Gang(1, 8);
  one.set_time_limit_ms(kHour);
  auto o1 = Submit(one);
  auto o2 = Submit(one);
  Pass();
  const v1::JobInfo ja = Job(*a);
  ASSERT_EQ(ja.state(), v1::RUNNING) << ja.reason_detail();
  EXPECT_EQ(std::vector<std::string>(ja.nodes().begin(), ja.nodes().end()),
            (std::vector<std::string>{"node1", "node2"}));
  EXPECT_EQ(ja.time_limit_ms(), 2 * kHour) << "capped at the reservation's end";
  EXPECT_EQ(ja.reservation(), "team");
  EXPECT_EQ(Job(*others).state(), v1::PENDING);
  for (uint64_t id : {*o1, *o2}) {
    ASSERT_EQ(Job(id).state(), v1::RUNNING);
    EXPECT_TRUE(Job(id).nodes(0) == "node3" || Job(id).nodes(0) == "node4");
  }
  EXPECT_EQ(Node("node1").reservation(), "team");
  EXPECT_FALSE(Node("node1").maint());
  EXPECT_EQ(Node("node3").reservation(), "");
}

TEST_F(ReservationTest, AJobThatWouldRunIntoMaintenanceWaitsSayingSo) {
  ASSERT_TRUE(Create("m", "node[1-4]", now_ + kHour, 2 * kHour, "maint").ok());
  v1::JobSpec s = Gang(1, 8);
  s.set_time_limit_ms(2 * kHour);
  auto crossing = Submit(s);
  s.set_time_limit_ms(30 * kMin);
  auto fits = Submit(s);
  Pass();
  EXPECT_EQ(Job(*fits).state(), v1::RUNNING);
  const v1::JobInfo j = Job(*crossing);
  EXPECT_EQ(j.state(), v1::PENDING);
  EXPECT_EQ(j.reason(), "ReqNodeNotAvail");
  EXPECT_NE(j.reason_detail().find("maintenance reservation m"), std::string::npos)
      << j.reason_detail();
  EXPECT_EQ(j.expected_start_ms(), now_ + 3 * kHour);
  EXPECT_EQ(Node("node2").reservation(), "") << "not active yet";
  now_ += kHour;
  EXPECT_EQ(Node("node2").reservation(), "m");
  EXPECT_TRUE(Node("node2").maint());
}

TEST_F(ReservationTest, ItEndsOrRecursAtItsEnd) {
  ASSERT_TRUE(Create("once", "node1", now_, kHour).ok());
  ASSERT_TRUE(Create("daily", "node2", now_, kHour, "daily").ok());
  auto waiting = SubmitIn("once", 2, 10 * kMin);  // more nodes than it has: it waits
  ASSERT_TRUE(waiting.ok());
  now_ += kHour + 1;
  engine_->Tick(now_);
  auto all = List();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].name(), "daily");
  EXPECT_EQ(all[0].start_ms(), now_ - kHour - 1 + 86'400'000) << "the next day";
  Restart();
  EXPECT_EQ(List().size(), 1u);
  AllUp();
  Pass();
  EXPECT_EQ(Job(*waiting).reason(), "ReservationDeleted");
}

// Hours of jobs coming and going around a user reservation and a maintenance window: at every
// step no running job sits on a node of an active reservation it is not in, and every job of
// the user reservation runs on its nodes while it lasts.
TEST_F(ReservationTest, ScenarioNeverOverlapsAReservation) {
  const TimeMs t0 = now_;
  ASSERT_TRUE(Create("team", "node1", t0, 3 * kHour, "", "root").ok());
  ASSERT_TRUE(Create("maint", "node[3-4]", t0 + kHour, kHour, "maint").ok());
  std::mt19937 rng(7);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::map<uint64_t, TimeMs> runs_until;  // running jobs: when their agent says they exit
  int started = 0, in_team = 0;
  for (int step = 0; step < 60; ++step) {
    for (int k = pick(0, 2); k > 0; --k) {
      v1::JobSpec s = Gang(static_cast<uint32_t>(pick(1, 2)), static_cast<uint32_t>(pick(1, 8)));
      s.set_time_limit_ms(pick(1, 9) * 10 * kMin);
      if (pick(0, 3) == 0) {
        s.set_reservation("team");
        s.set_nodes(1);
      }
      ASSERT_TRUE(Submit(s).ok());
    }
    Pass();
    auto listed = engine_->ListJobs(Root(), v1::ListJobsRequest());
    ASSERT_TRUE(listed.ok());
    for (const v1::JobInfo& j : listed->jobs()) {
      if (j.state() != v1::RUNNING) continue;
      if (!runs_until.count(j.id())) {
        Run(j.id());
        ++started;
        if (j.reservation() == "team") ++in_team;
        runs_until[j.id()] = now_ + pick(1, 12) * 10 * kMin;
      }
      for (const std::string& node : j.nodes()) {
        const std::string active = Node(node).reservation();
        if (!active.empty()) {
          EXPECT_EQ(j.reservation(), active)
              << "job " << j.id() << " on " << node << " at +" << (now_ - t0) / kMin << " min";
        }
        if (j.reservation() == "team") {
          EXPECT_EQ(node, "node1");
        }
      }
    }
    now_ += 5 * kMin;
    for (auto it = runs_until.begin(); it != runs_until.end();) {
      const v1::JobInfo j = Job(it->first);
      const bool over = j.time_limit_ms() > 0 && j.start_time_ms() + j.time_limit_ms() <= now_;
      if (it->second <= now_ || over) {
        Exited(it->first, j.nodes(0), 0, 0, over);
        CleanUp(it->first, 0);
        it = runs_until.erase(it);
      } else {
        ++it;
      }
    }
  }
  EXPECT_GT(started, 20);
  EXPECT_GT(in_team, 2);
}

}  // namespace
}  // namespace muster::controller
