// The web view over real HTTP on loopback, its answers from a stand-in for the user API: a login
// address logs in once; the session is a cookie bound to a path of its own; without both nothing
// but the login page is shown; what the API refuses is refused; every page carries its guards.
#include "muster/web/web_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace muster::web {
namespace {

struct Reply {
  int status = 0;
  std::string head;  // the status line and headers
  std::string body;
  std::string Header(const std::string& name) const {
    const std::string key = "\r\n" + name + ": ";
    const size_t at = head.find(key);
    if (at == std::string::npos) return "";
    const size_t from = at + key.size();
    return head.substr(from, head.find("\r\n", from) - from);
  }
};

// One request, the raw way (the server answers one a connection, and closes it).
Reply Get(int port, const std::string& target, const std::string& cookie = "",
          const std::string& method = "GET") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  if (!cookie.empty()) req += "Cookie: " + cookie + "\r\n";
  req += "\r\n";
  EXPECT_EQ(::write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  std::string all;
  char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) all.append(buf, static_cast<size_t>(n));
  ::close(fd);
  Reply r;
  const size_t end = all.find("\r\n\r\n");
  r.head = all.substr(0, end);
  r.body = end == std::string::npos ? "" : all.substr(end + 4);
  if (all.size() > 12) r.status = std::stoi(all.substr(9, 3));
  return r;
}

class WebServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WebOptions o;
    o.address = "127.0.0.1:0";
    o.cluster_name = "t";
    o.fetch = [this](const WebUser& user, uint32_t method, std::string payload,
                     std::function<void(Status, std::string)> done) {
      asked.push_back(user.name + ":" + std::to_string(method));
      if (method == v1::METHOD_LIST_JOBS) {
        v1::ListJobsRequest req;
        EXPECT_TRUE(req.ParseFromString(payload));
        v1::ListJobsResponse resp;
        if (req.states_size() > 0) {  // the map's running jobs: two pages
          running_pages.push_back(req.after_id());
          resp.add_jobs()->set_id(req.after_id() == 0 ? 3 : 4);
          resp.set_next_after_id(req.after_id() == 0 ? 3 : 0);
          return done(Status::Ok(), resp.SerializeAsString());
        }
        v1::JobInfo* j = resp.add_jobs();
        j->set_id(5);
        j->set_user(user.name);
        j->set_state(v1::PENDING);
        j->set_reason("Priority");
        return done(Status::Ok(), resp.SerializeAsString());
      }
      if (method == v1::METHOD_GET_JOB) {
        return done(PermissionDenied("job 6 is another user's"), "");
      }
      if (method == v1::METHOD_LIST_SHARES && hold_shares) {  // answered when the test says
        std::lock_guard<std::mutex> l(held_mu);
        held.push_back(std::move(done));
        return;
      }
      v1::ListNodesResponse nodes;  // LIST_NODES; LIST_SHARES parses as an empty answer too
      nodes.add_nodes()->set_name("node1");
      done(Status::Ok(), method == v1::METHOD_LIST_NODES ? nodes.SerializeAsString() : "");
    };
    server_ = std::make_unique<WebServer>(io_, std::move(o));
    auto port = server_->Listen();
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    port_ = *port;
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    server_->Close();
    work_.reset();
    io_.stop();
    thread_.join();
    server_.reset();
  }

  // Logs `user` in: the cookie ("muster_session=...") and the root its pages are under.
  std::pair<std::string, std::string> LogIn(const WebUser& user) {
    auto login = server_->Login(user);
    EXPECT_TRUE(login.ok());
    const std::string prefix = "http://127.0.0.1:" + std::to_string(port_);
    EXPECT_EQ(login->url().rfind(prefix + "/login?token=", 0), 0u) << login->url();
    Reply r = Get(port_, login->url().substr(prefix.size()));
    EXPECT_EQ(r.status, 303) << r.head;
    const std::string set = r.Header("Set-Cookie");
    EXPECT_NE(set.find("HttpOnly"), std::string::npos);
    EXPECT_NE(set.find("SameSite=Strict"), std::string::npos);
    const std::string root = r.Header("Location");
    EXPECT_NE(set.find("Path=" + root + ";"), std::string::npos) << set;
    // A login address works once.
    EXPECT_EQ(Get(port_, login->url().substr(prefix.size())).status, 401);
    return {set.substr(0, set.find(';')), root};
  }

  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_ =
      boost::asio::make_work_guard(io_);
  std::unique_ptr<WebServer> server_;
  std::thread thread_;
  int port_ = 0;
  std::vector<std::string> asked;
  std::vector<uint64_t> running_pages;  // after_id of each page of running jobs asked
  std::atomic<bool> hold_shares{false};
  std::mutex held_mu;
  std::vector<std::function<void(Status, std::string)>> held;  // held_mu
};

TEST_F(WebServerTest, ALoginOpensASessionBoundToACookieAndAPath) {
  auto [cookie, root] = LogIn({1000, 1000, "alice"});
  ASSERT_EQ(root.rfind("/s/", 0), 0u);
  Reply queue = Get(port_, root + "queue", cookie);
  ASSERT_EQ(queue.status, 200) << queue.body;
  EXPECT_NE(queue.body.find("data-job=\"5\""), std::string::npos);
  EXPECT_NE(queue.Header("Content-Security-Policy").find("script-src 'self'"), std::string::npos);
  EXPECT_EQ(queue.Header("Cache-Control"), "no-store");
  EXPECT_EQ(asked.back(), "alice:" + std::to_string(v1::METHOD_LIST_JOBS)) << "asked as alice";
  Reply json = Get(port_, root + "api/jobs", cookie);
  ASSERT_EQ(json.status, 200);
  EXPECT_EQ(json.Header("Content-Type"), "application/json");
  EXPECT_NE(json.body.find("\"reason\":\"Priority\""), std::string::npos) << json.body;
  Reply map = Get(port_, root, cookie);
  ASSERT_EQ(map.status, 200);
  EXPECT_NE(map.body.find("data-node=\"node1\""), std::string::npos);
  EXPECT_EQ(running_pages, (std::vector<uint64_t>{0, 3})) << "every page of the running jobs";
  // Either secret alone is nothing.
  EXPECT_EQ(Get(port_, root + "queue").status, 401) << "no cookie";
  EXPECT_EQ(Get(port_, "/s/0123456789abcdef0123456789abcdef/queue", cookie).status, 401)
      << "another path";
  EXPECT_EQ(Get(port_, root + "queue", "muster_session=forged").status, 401);
  // The bare address sends a logged-in browser to its pages.
  Reply bare = Get(port_, "/", cookie);
  EXPECT_EQ(bare.status, 303);
  EXPECT_EQ(bare.Header("Location"), root);
  // Logging out ends the session.
  EXPECT_EQ(Get(port_, root + "logout", cookie).status, 303);
  EXPECT_EQ(Get(port_, root + "queue", cookie).status, 401);
}

// One user's pages at once are bounded: the fifth waits for none of the four to end.
TEST_F(WebServerTest, AUsersConnectionsAtOnceAreBounded) {
  auto [cookie, root] = LogIn({1002, 1002, "carol"});
  hold_shares = true;
  std::vector<std::thread> waiting;
  std::vector<int> codes(4);
  for (int i = 0; i < 4; ++i) {
    waiting.emplace_back([&, i] { codes[i] = Get(port_, root + "accounts", cookie).status; });
  }
  for (int tries = 0; tries < 500; ++tries) {
    {
      std::lock_guard<std::mutex> l(held_mu);
      if (held.size() == 4) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Reply fifth = Get(port_, root + "queue", cookie);
  EXPECT_EQ(fifth.status, 429);
  EXPECT_EQ(fifth.Header("Retry-After"), "1");
  auto [other, other_root] = LogIn({1003, 1003, "dave"});
  EXPECT_EQ(Get(port_, other_root + "queue", other).status, 200) << "another user is not held";
  hold_shares = false;
  {
    std::lock_guard<std::mutex> l(held_mu);
    // Answered, and still held here: the count goes when the answer is sent, not when every
    // copy of the reply is gone.
    for (auto& done : held) done(Status::Ok(), "");
  }
  for (auto& t : waiting) t.join();
  for (int c : codes) EXPECT_EQ(c, 200);
  // The four ended (their connections close just after their answers): room again.
  int again = 0;
  for (int tries = 0; tries < 100 && again != 200; ++tries) {
    if ((again = Get(port_, root + "queue", cookie).status) != 200) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  EXPECT_EQ(again, 200);
  // A HEAD of a login address does not use it up.
  auto login = server_->Login({1004, 1004, "erin"});
  ASSERT_TRUE(login.ok());
  const std::string target = login->url().substr(login->url().find("/login"));
  EXPECT_EQ(Get(port_, target, "", "HEAD").status, 200);
  EXPECT_EQ(Get(port_, target).status, 303);
}

TEST_F(WebServerTest, WhatTheApiRefusesIsRefusedAndOnlyGetIsServed) {
  auto [cookie, root] = LogIn({1001, 1001, "bob"});
  Reply other = Get(port_, root + "job/6", cookie);
  EXPECT_EQ(other.status, 403);
  EXPECT_NE(other.body.find("another user"), std::string::npos);
  EXPECT_EQ(Get(port_, root + "job/x", cookie).status, 404);
  EXPECT_EQ(Get(port_, root + "nosuch", cookie).status, 404);
  Reply post = Get(port_, root + "queue", cookie, "POST");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.Header("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(post.Header("Content-Security-Policy"), "default-src 'none'");
  EXPECT_EQ(Get(port_, "/login?token=" + std::string(64, '0')).status, 401);
  Reply css = Get(port_, "/static/muster.css");
  EXPECT_EQ(css.status, 200) << "the stylesheet needs no session";
  EXPECT_EQ(css.Header("Content-Type"), "text/css; charset=utf-8");
  EXPECT_EQ(Get(port_, std::string(3000, '/')).status, 400);
}

}  // namespace
}  // namespace muster::web
