// --mail-type: which mails the engine decides (job_mail.h), on the manual clock: BEGIN, END and
// FAIL with Slurm's subjects, the TIME_LIMIT_* warnings once each (also across a restart), an
// array's one summary against ARRAY_TASKS, REQUEUE, INVALID_DEPEND, nothing without mail_prog,
// and the recipients a submission may name.
#include "job_mail.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine_fixture.h"

namespace muster::controller {
namespace {

constexpr const char* kMailConfig = R"(
[controller]
mail_prog = "/usr/bin/mail"
)";

class JobMailTest : public EngineTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    UseConfig(kMailConfig);
  }

  static v1::JobSpec Mailing(uint32_t types, const std::string& name = "train") {
    v1::JobSpec s = Gang(1, 8);
    s.set_name(name);
    s.set_mail_types(types);
    return s;
  }

  // The mails decided since the last call.
  std::vector<MailNotice> Mails() { return engine_->TakeMail(); }
  static std::vector<std::string> Subjects(const std::vector<MailNotice>& mails) {
    std::vector<std::string> out;
    for (const auto& m : mails) out.push_back(m.subject);
    return out;
  }
  static std::string Env(const MailNotice& m, const std::string& key) {
    for (const auto& [k, v] : m.env) {
      if (k == key) return v;
    }
    return "(unset)";
  }

  // Submits, starts (after `queued_ms`) and reports the job started on its node.
  uint64_t StartJob(const v1::JobSpec& spec, int64_t queued_ms = 1000) {
    auto id = Submit(spec, Alice());
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    now_ += queued_ms;
    Pass();
    Run(*id);
    started_.push_back(*id);
    return *id;
  }

  // Time passes, the agents keep beating (with the jobs each runs), the engine ticks.
  void Tick(int64_t advance_ms) {
    now_ += advance_ms;
    for (const char* n : {"node1", "node2", "node3", "node4"}) {
      v1::AgentMessage hb;
      hb.mutable_heartbeat()->set_seq(static_cast<uint64_t>(now_));
      for (uint64_t id : started_) {
        const v1::JobInfo job = Job(id);
        if (job.state() == v1::RUNNING && job.nodes_size() > 0 && job.nodes(0) == n) {
          hb.mutable_heartbeat()->add_running_job_ids(id);
        }
      }
      Agent(n, hb);
    }
    engine_->Tick(now_);
  }

  std::vector<uint64_t> started_;  // by StartJob
};

TEST_F(JobMailTest, BeginAndEndWithSlurmsSubjectsAndEnvironment) {
  const uint64_t id = StartJob(Mailing(v1::MAIL_BEGIN | v1::MAIL_END));
  auto mails = Mails();
  ASSERT_EQ(mails.size(), 1u);
  EXPECT_EQ(mails[0].subject,
            "Slurm Job_id=" + std::to_string(id) + " Name=train Began, Queued time 00:00:01");
  EXPECT_EQ(mails[0].recipient, "alice");  // --mail-user defaults to the submitter
  EXPECT_EQ(mails[0].job_id, id);
  EXPECT_EQ(Env(mails[0], "SLURM_JOB_ID"), std::to_string(id));
  EXPECT_EQ(Env(mails[0], "SLURM_JOB_USER"), "alice");
  EXPECT_EQ(Env(mails[0], "SLURM_JOB_NAME"), "train");
  EXPECT_EQ(Env(mails[0], "SLURM_JOB_MAIL_TYPE"), "Began");
  EXPECT_EQ(Env(mails[0], "SLURM_JOB_STATE"), "RUNNING");
  EXPECT_EQ(Env(mails[0], "SLURM_JOB_QUEUED_TIME"), "00:00:01");

  now_ += 65'000;
  Exited(id, Job(id).nodes(0), 0);
  mails = Mails();
  ASSERT_EQ(mails.size(), 1u);
  EXPECT_EQ(mails[0].subject, "Slurm Job_id=" + std::to_string(id) +
                                  " Name=train Ended, Run time 00:01:05, COMPLETED, ExitCode 0");
  EXPECT_EQ(Env(mails[0], "SLURM_JOB_MAIL_TYPE"), "Ended");
  EXPECT_EQ(Env(mails[0], "SLURM_JOB_STATE"), "COMPLETED");
  EXPECT_EQ(Env(mails[0], "SLURM_JOB_EXIT_CODE_MAX"), "0");
  EXPECT_EQ(Env(mails[0], "SLURM_JOB_RUN_TIME"), "00:01:05");
  EXPECT_EQ(Env(mails[0], "SLURM_ARRAY_JOB_ID"), "(unset)");
}

TEST_F(JobMailTest, FailForAFailedEndEndWithoutFail) {
  const uint64_t failing = StartJob(Mailing(v1::MAIL_FAIL | v1::MAIL_END));
  now_ += 3'000;
  Exited(failing, Job(failing).nodes(0), 1);
  auto mails = Mails();
  ASSERT_EQ(mails.size(), 1u);
  EXPECT_EQ(mails[0].subject, "Slurm Job_id=" + std::to_string(failing) +
                                  " Name=train Failed, Run time 00:00:03, FAILED, ExitCode 1");
  EXPECT_EQ(Env(mails[0], "SLURM_JOB_EXIT_CODE_MAX"), "1");

  // END covers every end: without FAIL, a failure is mailed as an end.
  const uint64_t ended = StartJob(Mailing(v1::MAIL_END));
  Exited(ended, Job(ended).nodes(0), 2);
  EXPECT_EQ(Subjects(Mails()),
            std::vector<std::string>{"Slurm Job_id=" + std::to_string(ended) +
                                     " Name=train Ended, Run time 00:00:00, FAILED, ExitCode 2"});
  // FAIL alone: nothing for a success.
  const uint64_t fine = StartJob(Mailing(v1::MAIL_FAIL));
  Exited(fine, Job(fine).nodes(0), 0);
  EXPECT_TRUE(Mails().empty());
}

TEST_F(JobMailTest, NoMailWithoutMailProg) {
  UseConfig("");
  const uint64_t id = StartJob(Mailing(0x3FF & ~v1::MAIL_ARRAY_TASKS));
  Tick(10'000'000);
  Exited(id, Job(id).nodes(0), 1);
  EXPECT_TRUE(Mails().empty());
}

TEST_F(JobMailTest, TimeLimit50IsMailedOnceAlsoAcrossARestart) {
  v1::JobSpec s = Mailing(v1::MAIL_TIME_LIMIT_50);
  s.set_time_limit_ms(60'000);
  const uint64_t id = StartJob(s, 0);
  EXPECT_TRUE(Mails().empty());
  Tick(29'000);
  EXPECT_TRUE(Mails().empty());
  Tick(1'000);  // 30 s of 60
  auto mails = Mails();
  ASSERT_EQ(mails.size(), 1u);
  EXPECT_EQ(mails[0].subject, "Slurm Job_id=" + std::to_string(id) +
                                  " Name=train Reached 50% of time limit, Run time 00:00:30");
  EXPECT_EQ(Env(mails[0], "SLURM_JOB_MAIL_TYPE"), "Reached 50% of time limit");
  Tick(1'000);
  Tick(10'000);
  EXPECT_TRUE(Mails().empty());
  // What was mailed is in the record: a restarted (or failed-over) controller does not repeat it.
  const std::string node = Job(id).nodes(0);
  Restart();
  for (const char* n : {"node1", "node2", "node3", "node4"}) {
    Up(n, n == node ? std::vector<uint64_t>{id} : std::vector<uint64_t>{});
  }
  Tick(1'000);
  ASSERT_EQ(Job(id).state(), v1::RUNNING);
  EXPECT_TRUE(Mails().empty());
}

TEST_F(JobMailTest, HighestFractionCrossedIsMailedAndTheLowerOnesWithIt) {
  v1::JobSpec s = Mailing(v1::MAIL_TIME_LIMIT_50 | v1::MAIL_TIME_LIMIT_80 | v1::MAIL_TIME_LIMIT_90 |
                          v1::MAIL_TIME_LIMIT);
  s.set_time_limit_ms(100'000);
  const uint64_t id = StartJob(s, 0);
  Tick(85'000);  // past 50% and 80% at once
  EXPECT_EQ(Subjects(Mails()),
            std::vector<std::string>{"Slurm Job_id=" + std::to_string(id) +
                                     " Name=train Reached 80% of time limit, Run time 00:01:25"});
  Tick(5'000);
  EXPECT_EQ(Subjects(Mails()),
            std::vector<std::string>{"Slurm Job_id=" + std::to_string(id) +
                                     " Name=train Reached 90% of time limit, Run time 00:01:30"});
  Tick(10'000);
  EXPECT_EQ(Subjects(Mails()),
            std::vector<std::string>{"Slurm Job_id=" + std::to_string(id) +
                                     " Name=train Reached time limit, Run time 00:01:40"});
  // The agent ends it TIMEOUT: the time limit was mailed already, and no END was asked for.
  Exited(id, Job(id).nodes(0), 0, SIGTERM, /*timeout=*/true);
  EXPECT_EQ(Job(id).state(), v1::TIMEOUT);
  EXPECT_TRUE(Mails().empty());
}

TEST_F(JobMailTest, TimeoutMailsTimeLimitThenFail) {
  v1::JobSpec s = Mailing(v1::MAIL_TIME_LIMIT | v1::MAIL_FAIL);
  s.set_time_limit_ms(60'000);
  const uint64_t id = StartJob(s, 0);
  now_ += 59'000;  // ended by its agent before any tick saw the limit
  Exited(id, Job(id).nodes(0), 0, SIGTERM, /*timeout=*/true);
  const std::string job = "Slurm Job_id=" + std::to_string(id) + " Name=train ";
  EXPECT_EQ(Subjects(Mails()),
            (std::vector<std::string>{job + "Reached time limit, Run time 00:00:59",
                                      job + "Failed, Run time 00:00:59, TIMEOUT"}));
}

TEST_F(JobMailTest, ArrayMailsOnceForTheWholeArray) {
  v1::JobSpec s = Mailing(v1::MAIL_BEGIN | v1::MAIL_END | v1::MAIL_FAIL);
  s.set_array("0-2");
  auto first = Submit(s, Alice());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const uint64_t a = *first;
  Pass();  // all three start (a node each)
  for (uint64_t id = a; id < a + 3; ++id) Run(id);
  const std::string array = "Slurm Array Summary Job_id=" + std::to_string(a) + "_* (" +
                            std::to_string(a) + ") Name=train ";
  EXPECT_EQ(Subjects(Mails()), std::vector<std::string>{array + "Began"});
  Exited(a, Job(a).nodes(0), 0);
  Exited(a + 1, Job(a + 1).nodes(0), 3);
  EXPECT_TRUE(Mails().empty());
  Exited(a + 2, Job(a + 2).nodes(0), 0);
  auto mails = Mails();
  ASSERT_EQ(mails.size(), 1u);
  EXPECT_EQ(mails[0].subject, array + "Failed, Mixed, ExitCode [0-3]");
  EXPECT_EQ(mails[0].job_id, a);
  EXPECT_EQ(Env(mails[0], "SLURM_JOB_EXIT_CODE_MIN"), "0");
  EXPECT_EQ(Env(mails[0], "SLURM_JOB_EXIT_CODE_MAX"), "3");
  EXPECT_EQ(Env(mails[0], "SLURM_ARRAY_JOB_ID"), std::to_string(a));
  EXPECT_EQ(Env(mails[0], "SLURM_ARRAY_TASK_ID"), "(unset)");
}

TEST_F(JobMailTest, ArrayTasksMailsEachTask) {
  v1::JobSpec s = Mailing(v1::MAIL_BEGIN | v1::MAIL_END | v1::MAIL_ARRAY_TASKS);
  s.set_array("0-1");
  const uint64_t a = *Submit(s, Alice());
  now_ += 2'000;
  Pass();
  for (uint64_t id = a; id < a + 2; ++id) Run(id);
  auto task = [&](uint64_t id) {
    return "Slurm Array Task Job_id=" + std::to_string(a) + "_" + std::to_string(id - a) + " (" +
           std::to_string(id) + ") Name=train ";
  };
  auto mails = Mails();
  EXPECT_EQ(Subjects(mails),
            (std::vector<std::string>{task(a) + "Began, Queued time 00:00:02",
                                      task(a + 1) + "Began, Queued time 00:00:02"}));
  ASSERT_EQ(mails.size(), 2u);
  EXPECT_EQ(Env(mails[1], "SLURM_ARRAY_TASK_ID"), "1");
  Exited(a + 1, Job(a + 1).nodes(0), 0);
  Exited(a, Job(a).nodes(0), 0);
  EXPECT_EQ(Subjects(Mails()), (std::vector<std::string>{
                                   task(a + 1) + "Ended, Run time 00:00:00, COMPLETED, ExitCode 0",
                                   task(a) + "Ended, Run time 00:00:00, COMPLETED, ExitCode 0"}));
}

TEST_F(JobMailTest, RequeueIsMailed) {
  const uint64_t id = StartJob(Mailing(v1::MAIL_REQUEUE));
  now_ += 7'000;
  v1::UpdateJobRequest r;
  r.add_job_ids(id);
  r.set_action(v1::UpdateJobRequest::REQUEUE);
  auto resp = engine_->UpdateJob(Root(), r, now_);
  ASSERT_TRUE(resp.ok());
  ASSERT_EQ(Job(id).state(), v1::PENDING);
  EXPECT_EQ(Subjects(Mails()), std::vector<std::string>{"Slurm Job_id=" + std::to_string(id) +
                                                        " Name=train Requeued, Run time 00:00:07"});
}

TEST_F(JobMailTest, InvalidDependencyIsMailedOnce) {
  const uint64_t first = StartJob(Mailing(0));
  v1::JobSpec s = Mailing(v1::MAIL_INVALID_DEPEND, "after");
  s.set_dependency("afterok:" + std::to_string(first));
  const uint64_t after = *Submit(s, Alice());
  Exited(first, Job(first).nodes(0), 1);
  Pass();
  EXPECT_EQ(Job(after).reason(), "DependencyNeverSatisfied");
  EXPECT_EQ(Subjects(Mails()), std::vector<std::string>{"Slurm Job_id=" + std::to_string(after) +
                                                        " Name=after Invalid dependency"});
  Pass();
  EXPECT_TRUE(Mails().empty());
}

TEST_F(JobMailTest, MailUserIsCheckedAtSubmission) {
  for (const char* bad : {"-oProxyCommand=evil", "a b", "a;b", "$(id)", "a`id`", "'q'", "\"q\"",
                          "a|b", "a\nb", "a\tb", "x>y", "a&b", "a\\b",
                          // mailx's file addresses, a second recipient, routing:
                          "+x", "me,+x", "a/b", "u%h@relay", "a@b@c", "a!b"}) {
    v1::JobSpec s = Mailing(v1::MAIL_END);
    s.set_mail_user(bad);
    auto r = Submit(s, Alice());
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("--mail-user"), std::string::npos) << r.status().message();
  }
  v1::JobSpec long_user = Mailing(v1::MAIL_END);
  long_user.set_mail_user(std::string(250, 'a') + "@b.cd");  // 255 bytes
  EXPECT_EQ(Submit(long_user, Alice()).status().code(), StatusCode::kInvalidArgument);
  v1::JobSpec unknown = Mailing(1u << 20);
  EXPECT_EQ(Submit(unknown, Alice()).status().code(), StatusCode::kInvalidArgument);

  v1::JobSpec good = Mailing(v1::MAIL_BEGIN);
  good.set_mail_user("first.last+hpc@example.org");
  const uint64_t id = StartJob(good);
  auto mails = Mails();
  ASSERT_EQ(mails.size(), 1u);
  EXPECT_EQ(mails[0].recipient, "first.last+hpc@example.org");
  EXPECT_EQ(mails[0].job_id, id);
}

TEST(MailDurationTest, SlurmsForm) {
  EXPECT_EQ(MailDuration(0), "00:00:00");
  EXPECT_EQ(MailDuration(65'999), "00:01:05");
  EXPECT_EQ(MailDuration(86'400'000 + 3'600'000), "1-01:00:00");
}

}  // namespace
}  // namespace muster::controller
