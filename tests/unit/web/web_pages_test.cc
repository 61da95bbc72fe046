// The web view's pages (pure) and its sessions: what users chose is escaped, the map colours each
// GPU by what holds it, and a login address works once, for a minute, within bounds.
#include "web_pages.h"

#include <gtest/gtest.h>

#include "web_sessions.h"

namespace muster::web {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

PageContext Ctx() {
  PageContext c;
  c.cluster = "t";
  c.user = "alice";
  c.root = "/s/abc/";
  c.now = 1'700'000'000'000;
  return c;
}

TEST(WebPagesTest, WhatUsersChoseIsEscapedAndMadePrintable) {
  EXPECT_EQ(Html("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;");
  EXPECT_EQ(Html(std::string("a\x1b[31mb\xff", 8)), "a\\x1b[31mb\\xff");
  v1::ListJobsResponse jobs;
  v1::JobInfo* j = jobs.add_jobs();
  j->set_id(7);
  j->set_name("<img src=x onerror=alert(1)>");
  j->set_user("mallory\"><b>");
  j->set_state(v1::PENDING);
  j->set_reason("Resources");
  j->set_reason_detail("needs 8 <GPUs>");
  const std::string page = QueuePage(Ctx(), jobs);
  EXPECT_EQ(page.find("<img"), std::string::npos);
  EXPECT_EQ(page.find("\"><b>"), std::string::npos);
  EXPECT_NE(page.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
  EXPECT_NE(page.find("Resources: needs 8 &lt;GPUs&gt;"), std::string::npos) << "why, in a line";
  EXPECT_NE(page.find("href=\"/s/abc/job/7\""), std::string::npos) << "links under the root";
}

TEST(WebPagesTest, TheQueueCountsRunningAndPendingJobsAndTheirGpus) {
  v1::ListJobsResponse jobs;
  for (int i = 1; i <= 5; ++i) {
    v1::JobInfo* j = jobs.add_jobs();
    j->set_id(static_cast<uint64_t>(i));
    j->set_user("bob");
    j->set_state(i <= 2 ? v1::RUNNING : v1::PENDING);
    j->set_gpus_total(static_cast<uint32_t>(i));
  }
  const std::string page = QueuePage(Ctx(), jobs);
  EXPECT_NE(page.find("id=\"jobs-running\">2<"), std::string::npos);
  EXPECT_NE(page.find("id=\"jobs-pending\">3<"), std::string::npos);
  EXPECT_NE(page.find("id=\"gpus-running\">3<"), std::string::npos);
  EXPECT_NE(page.find("id=\"gpus-pending\">12<"), std::string::npos);
  EXPECT_EQ(Count(page, "<tr data-job="), 5u);
}

TEST(WebPagesTest, TheMapColoursEachGpuByWhatHoldsIt) {
  v1::ListNodesResponse nodes;
  for (const char* name : {"n1", "n2", "n3"}) {
    v1::NodeInfo* n = nodes.add_nodes();
    n->set_name(name);
    n->set_gpus(4);
    n->set_gpu_type("h100");
    n->set_state(v1::NODE_MIXED);
    n->set_topology(std::string(name) == "n3" ? "spine1/leaf2" : "spine1/leaf1");
  }
  nodes.mutable_nodes(0)->set_gpus_allocated(3);  // 2 alice's (seen), 1 another's (not seen)
  nodes.mutable_nodes(1)->set_drain(true);
  nodes.mutable_nodes(1)->set_reason("PSU <swap>");
  v1::GpuDevice* sick = nodes.mutable_nodes(2)->add_gpu_devices();
  sick->set_index(1);
  sick->set_health("XID 79");
  v1::ListJobsResponse running;
  v1::JobInfo* j = running.add_jobs();
  j->set_id(42);
  j->set_user("alice");
  j->set_state(v1::RUNNING);
  v1::NodeAllocation* a = j->mutable_allocation()->add_nodes();
  a->set_node("n1");
  a->add_gpu_indices(0);
  a->add_gpu_indices(1);
  const std::string page = NodesPage(Ctx(), nodes, running);
  const std::string alice = "gpu " + OwnerClass("alice");
  EXPECT_EQ(Count(page, "class=\"" + alice + "\" title"), 2u);
  EXPECT_NE(page.find("job 42 of alice"), std::string::npos);
  EXPECT_EQ(Count(page, "class=\"gpu hidden\" title"), 1u) << "allocated, not the caller's to see";
  EXPECT_EQ(Count(page, "class=\"gpu out\" title"), 4u) << "a drained node's GPUs";
  EXPECT_EQ(Count(page, "class=\"gpu sick\" title"), 1u);
  EXPECT_EQ(Count(page, "class=\"gpu free\" title"), 4u);  // n1's last, n3's other three
  EXPECT_NE(page.find("PSU &lt;swap&gt;"), std::string::npos);
  EXPECT_NE(page.find("<h3>leaf2</h3>"), std::string::npos);
  EXPECT_NE(page.find("id=\"gpus-total\">12<"), std::string::npos);
  EXPECT_NE(page.find("id=\"gpus-allocated\">3<"), std::string::npos);
  EXPECT_NE(page.find("id=\"gpus-idle\">5<"), std::string::npos) << "n1's 1, n3's 4";
  EXPECT_NE(page.find("id=\"gpus-out\">4<"), std::string::npos);
}

TEST(WebPagesTest, AJobPageShowsItsHistoryAndSteps) {
  v1::JobInfo j;
  j.set_id(9);
  j.set_name("train");
  j.set_user("carol");
  j.set_state(v1::RUNNING);
  j.set_submit_time_ms(1'700'000'000'000);
  j.set_start_time_ms(1'700'000'060'000);
  j.set_requeue_count(1);
  v1::StepRecord* s = j.add_steps();
  s->set_id(0);
  s->set_name("python");
  s->set_state(v1::COMPLETED);
  s->set_end_time_ms(1'700'000'100'000);
  const std::string page = JobPage(Ctx(), j);
  EXPECT_NE(page.find("<th>requeued</th><td>1 time(s)</td>"), std::string::npos);
  EXPECT_NE(page.find("<td>9.0</td><td>python</td><td>COMPLETED</td>"), std::string::npos);
  EXPECT_NE(page.find("data-api=\"/s/abc/api/job/9\""), std::string::npos);
}

TEST(WebSessionsTest, ALoginAddressWorksOnceWithinAMinute) {
  WebSessions s;
  const WebUser alice{1000, 1000, "alice"};
  auto token = s.IssueLogin(alice, 0);
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(token->size(), 64u);
  EXPECT_FALSE(s.Redeem("nope", 1).has_value());
  auto session = s.Redeem(*token, 1'000);
  ASSERT_TRUE(session.has_value());
  EXPECT_EQ(session->user.name, "alice");
  EXPECT_NE(session->id, session->path);
  EXPECT_FALSE(s.Redeem(*token, 2'000).has_value()) << "once only";
  auto late = s.IssueLogin(alice, 0);
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(s.Redeem(*late, WebSessions::kLoginTtlMs).has_value()) << "too old";
  ASSERT_TRUE(s.Find(session->id, 5'000).has_value());
  EXPECT_FALSE(s.Find(session->id, 1'000 + WebSessions::kSessionTtlMs).has_value());
}

TEST(WebSessionsTest, LoginsAndSessionsAreBoundedPerUser) {
  WebSessions s;
  const WebUser bob{1001, 1001, "bob"};
  for (size_t i = 0; i < WebSessions::kMaxLoginsPerUser; ++i)
    ASSERT_TRUE(s.IssueLogin(bob, 0).ok());
  EXPECT_EQ(s.IssueLogin(bob, 0).status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(s.IssueLogin({1002, 1002, "carol"}, 0).ok()) << "another user is not held back";
  WebSessions t;
  std::string first;
  for (size_t i = 0; i <= WebSessions::kMaxSessionsPerUser; ++i) {
    auto tok = t.IssueLogin(bob, static_cast<TimeMs>(i));
    ASSERT_TRUE(tok.ok());
    auto made = t.Redeem(*tok, static_cast<TimeMs>(i));
    ASSERT_TRUE(made.has_value());
    if (i == 0) first = made->id;
  }
  EXPECT_EQ(t.sessions(), WebSessions::kMaxSessionsPerUser);
  EXPECT_FALSE(t.Find(first, 100).has_value()) << "the oldest went";
}

}  // namespace
}  // namespace muster::web
