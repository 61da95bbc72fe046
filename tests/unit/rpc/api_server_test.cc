// The controller's user API under abuse. On the Unix socket: an oversized or stalled request
// closes only its own connection, and one user's connections are capped without affecting anyone
// else's. On TCP: nothing is served before a valid MUNGE credential made for this cluster's API,
// a credential works once, and strangers are bounded per address and in time.
#include "api_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "harness/test_munged.h"
#include "harness/test_user.h"
#include "harness/test_util.h"
#include "muster/common/framing.h"
#include "muster/common/job_limits.h"
#include "muster/common/munge.h"
#include "muster/controller/controller_runner.h"
#include "muster/rpc/api_dispatch.h"
#include "muster/rpc/asio_executor.h"
#include "muster/store/state_store.h"
#include "one_node_config.h"

namespace muster::rpc {
namespace {

class ApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spdlog::set_level(spdlog::level::warn);
    dir_ = std::filesystem::temp_directory_path() / ("muster-api-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    socket_ = (dir_ / "api.sock").string();
    auto c = testing::OneNodeConfig();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    config_ = *c;
    controller::ControllerRunnerOptions o;
    o.config = config_;
    o.executor = &executor_;
    o.store = std::make_unique<store::InMemoryStateStore>();
    auto r = controller::ControllerRunner::Create(std::move(o));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    runner_ = std::move(*r);
    executor_.Start(2);
    runner_->Start(nullptr);
    dispatcher_ = std::make_unique<ApiDispatcher>(*runner_);
    auto munged = muster::testing::TestMunged::Start((dir_ / "munge").string());
    ASSERT_TRUE(munged.ok()) << munged.status().ToString();
    munged_ = std::move(*munged);
    config_.munge.socket = munged_->socket();
    ApiServerOptions lo;
    lo.max_connections_per_user = 3;
    lo.request_deadline_ms = 1000;
    lo.reply_deadline_ms = 1000;
    lo.authenticate_deadline_ms =
        1500;  // room for a loaded machine between connect and Authenticate
    lo.max_unauthenticated_per_address = 3;
    Tweak(lo, config_);
    server_ = std::make_unique<ApiServer>(executor_.io(), *dispatcher_, config_, lo);
    ASSERT_TRUE(server_->ListenUnix(socket_).ok());
    auto port = server_->ListenTcp("127.0.0.1:0");
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    tcp_address_ = "127.0.0.1:" + std::to_string(*port);
  }
  void TearDown() override {
    for (int fd : open_) ::close(fd);
    if (server_) server_->Close();
    executor_.Stop();
    std::filesystem::remove_all(dir_);
  }

  virtual void Tweak(ApiServerOptions&, Config&) {}

  int Connect() {
    auto fd = ConnectUnix(socket_);
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    if (fd.ok()) open_.push_back(*fd);
    return fd.ok() ? *fd : -1;
  }
  int ConnectRemote() {
    auto fd = ConnectTcp(tcp_address_, 5000);
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    if (fd.ok()) open_.push_back(*fd);
    return fd.ok() ? *fd : -1;
  }
  // A credential of this process's user carrying `payload` (by default the API's).
  std::string Credential(const std::string& payload = "") {
    auto munge = Munge::Get();
    EXPECT_TRUE(munge.ok()) << munge.status().ToString();
    auto cred = (*munge)->Encode(
        munged_->socket(), payload.empty() ? "muster-api:" + config_.cluster_name : payload, 60);
    EXPECT_TRUE(cred.ok()) << cred.status().ToString();
    return cred.ok() ? *cred : "";
  }
  // Sends an authentication; returns the reply frame.
  static Result<Frame> Authenticate(int fd, const std::string& credential) {
    v1::AuthenticateRequest req;
    req.set_munge_credential(credential);
    MUSTER_RETURN_IF_ERROR(WriteFrame(fd, v1::METHOD_AUTHENTICATE, req.SerializeAsString()));
    return ReadFrame(fd, 5000);
  }
  static constexpr uint32_t kUnauthenticated = static_cast<uint32_t>(StatusCode::kUnauthenticated);
  // Whether the server closed the connection within `ms` (any frame it sent first is read).
  static bool ClosedWithin(int fd, int ms, std::string* said = nullptr) {
    for (;;) {
      struct pollfd p {
        fd, POLLIN, 0
      };
      if (::poll(&p, 1, ms) <= 0) return false;
      char buf[4096];
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) return true;
      if (said) said->append(buf, static_cast<size_t>(n));
    }
  }
  static Status Info(int fd) {
    MUSTER_RETURN_IF_ERROR(WriteFrame(fd, v1::METHOD_CONTROLLER_INFO, ""));
    MUSTER_ASSIGN_OR_RETURN(Frame f, ReadFrame(fd, 5000));
    if (f.type != 0) return Internal("status " + std::to_string(f.type) + ": " + f.payload);
    return Status::Ok();
  }

  std::filesystem::path dir_;
  std::string socket_;
  Config config_;
  AsioExecutor executor_;
  std::unique_ptr<controller::ControllerRunner> runner_;
  std::unique_ptr<ApiDispatcher> dispatcher_;
  std::unique_ptr<muster::testing::TestMunged> munged_;
  std::unique_ptr<ApiServer> server_;
  std::string tcp_address_;
  std::vector<int> open_;
};

TEST_F(ApiServerTest, AnOversizedRequestIsRefusedOnItsHeader) {
  const int fd = Connect();
  ASSERT_TRUE(Info(fd).ok());
  // A header promising more than any request may be; no body follows.
  std::string header = EncodeFrame(v1::METHOD_SUBMIT_JOB, "").substr(0, 8);
  const uint32_t len = htonl(4 + kMaxApiRequestBytes + 1);
  std::memcpy(header.data(), &len, 4);
  ASSERT_EQ(::write(fd, header.data(), 8), 8);
  EXPECT_TRUE(ClosedWithin(fd, 2000)) << "the server waited for 8 MiB it would not take";
  EXPECT_TRUE(Info(Connect()).ok()) << "and goes on serving";
}

TEST_F(ApiServerTest, ARequestThatStallsHalfwayIsClosedAtItsDeadline) {
  const int fd = Connect();
  const std::string frame = EncodeFrame(v1::METHOD_CONTROLLER_INFO, std::string(100, 'x'));
  ASSERT_EQ(::write(fd, frame.data(), 20), 20);
  EXPECT_FALSE(ClosedWithin(fd, 200)) << "not before its deadline";
  // A byte every 200 ms does not extend it: the deadline runs from the request's first byte.
  bool closed = false;
  for (int i = 0; i < 25 && !closed; ++i) {
    (void)!::send(fd, "x", 1, MSG_NOSIGNAL);
    closed = ClosedWithin(fd, 200);
  }
  EXPECT_TRUE(closed) << "a request trickling in holds its connection forever";
  // An idle connection between requests stays: an allocation's owner holds one for hours.
  const int idle = Connect();
  EXPECT_FALSE(ClosedWithin(idle, 1200));
  EXPECT_TRUE(Info(idle).ok());
}

TEST_F(ApiServerTest, OneUsersConnectionsAreCapped) {
  std::vector<int> fds;
  for (int i = 0; i < 3; ++i) {
    fds.push_back(Connect());
    ASSERT_TRUE(Info(fds.back()).ok());
  }
  const int fourth = Connect();
  std::string said;
  ASSERT_TRUE(ClosedWithin(fourth, 2000, &said));
  EXPECT_NE(said.find("too many connections from uid"), std::string::npos) << said;
  // Closing one makes room again.
  ::close(fds[0]);
  open_.erase(std::find(open_.begin(), open_.end(), fds[0]));
  bool admitted = false;
  for (int i = 0; i < 50 && !admitted; ++i) {
    const int again = Connect();
    admitted = Info(again).ok();
    if (!admitted) ::usleep(20'000);
  }
  EXPECT_TRUE(admitted);
}

TEST_F(ApiServerTest, OverTcpNothingIsServedBeforeAuthentication) {
  const int fd = ConnectRemote();
  ASSERT_TRUE(WriteFrame(fd, v1::METHOD_LIST_JOBS, "").ok());
  auto reply = ReadFrame(fd, 5000);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->type, kUnauthenticated) << reply->payload;
  EXPECT_NE(reply->payload.find("MUNGE"), std::string::npos) << reply->payload;
  EXPECT_TRUE(ClosedWithin(fd, 2000)) << "and nothing more is read from it";
}

TEST_F(ApiServerTest, AValidCredentialAuthenticatesItsUserOnce) {
  const std::string cred = Credential();
  const int fd = ConnectRemote();
  auto reply = Authenticate(fd, cred);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  ASSERT_EQ(reply->type, 0u) << reply->payload;
  v1::AuthenticateResponse who;
  ASSERT_TRUE(who.ParseFromString(reply->payload));
  EXPECT_EQ(who.uid(), ::getuid());
  EXPECT_EQ(who.gid(), ::getgid());
  EXPECT_TRUE(Info(fd).ok());
  // A second identity on the same connection is refused; the first one stays.
  auto again = Authenticate(fd, Credential());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->type, static_cast<uint32_t>(StatusCode::kFailedPrecondition));
  EXPECT_TRUE(Info(fd).ok());
  // The same credential on another connection is a replay.
  const int thief = ConnectRemote();
  auto replay = Authenticate(thief, cred);
  ASSERT_TRUE(replay.ok());
  EXPECT_EQ(replay->type, kUnauthenticated) << replay->payload;
  EXPECT_NE(replay->payload.find("Replayed"), std::string::npos) << replay->payload;
  EXPECT_TRUE(ClosedWithin(thief, 2000));
}

TEST_F(ApiServerTest, ForgedOrForeignCredentialsAreRefused) {
  for (const std::string& cred :
       {std::string("MUNGE:garbage:"), std::string(), std::string(70'000, 'A'),
        Credential("slurm-auth"), Credential("muster-api:another-cluster")}) {
    const int fd = ConnectRemote();
    auto reply = Authenticate(fd, cred);
    if (reply.ok()) {
      EXPECT_EQ(reply->type, kUnauthenticated) << reply->payload;
    }  // an oversized one is cut off on its header instead
    EXPECT_TRUE(ClosedWithin(fd, 2000)) << cred.substr(0, 40);
  }
  EXPECT_TRUE(Info(Connect()).ok()) << "the server goes on serving";
}

TEST_F(ApiServerTest, StrangersAreBoundedInNumberAndTime) {
  // One that says nothing is closed at the authentication deadline.
  const int silent = ConnectRemote();
  EXPECT_TRUE(ClosedWithin(silent, 5000)) << "an unauthenticated connection held forever";
  // At most three waiting from one address; a fourth is told why. The server starts
  // connections that arrive together in any order, so any one of the four may be the refused.
  std::vector<int> tried;
  for (int i = 0; i < 4; ++i) tried.push_back(ConnectRemote());
  // Within 700 ms, well inside the 1.5 s deadline, exactly one of them hears and is closed.
  std::vector<pollfd> watch;
  for (int fd : tried) watch.push_back({fd, POLLIN, 0});
  ASSERT_EQ(::poll(watch.data(), watch.size(), 700), 1) << "not exactly one of four refused";
  int refused = -1;
  std::string said;
  for (const pollfd& p : watch) {
    if (p.revents != 0) refused = p.fd;
  }
  EXPECT_TRUE(ClosedWithin(refused, 700, &said));
  ASSERT_NE(refused, -1) << "four strangers from one address all held";
  EXPECT_NE(said.find("have not authenticated yet (3 at most an address)"), std::string::npos)
      << said;
  std::vector<int> waiting;
  for (int fd : tried) {
    if (fd != refused) waiting.push_back(fd);
  }
  for (int fd : waiting) EXPECT_FALSE(ClosedWithin(fd, 0)) << "a second of four refused";
  // Authenticating frees a place.
  auto reply = Authenticate(waiting[0], Credential());
  ASSERT_TRUE(reply.ok());
  ASSERT_EQ(reply->type, 0u) << reply->payload;
  const int fifth = ConnectRemote();
  auto ok = Authenticate(fifth, Credential());
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->type, 0u) << ok->payload;
}

// A credential made to live for hours is a bearer token for whoever copies it first: refused.
TEST_F(ApiServerTest, ACredentialThatLivesLongerThanTheMaximumIsRefused) {
  auto munge = Munge::Get();
  ASSERT_TRUE(munge.ok());
  auto cred = (*munge)->Encode(munged_->socket(), "muster-api:" + config_.cluster_name, 3600);
  ASSERT_TRUE(cred.ok()) << cred.status().ToString();
  const int fd = ConnectRemote();
  auto reply = Authenticate(fd, *cred);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->type, kUnauthenticated) << reply->payload;
  EXPECT_NE(reply->payload.find("longer than the 60 s"), std::string::npos) << reply->payload;
  EXPECT_TRUE(ClosedWithin(fd, 2000));
  // The usual 60 s one is fine.
  auto fine = Authenticate(ConnectRemote(), Credential());
  ASSERT_TRUE(fine.ok());
  EXPECT_EQ(fine->type, 0u) << fine->payload;
}

// A client that asks for a listing and never reads it holds one page (not the whole listing)
// until the reply deadline, then loses the connection; one that reads gets every page. (The
// audit: 48 such connections grew the controller by 3.3 GB.)
TEST_F(ApiServerTest, AClientThatAsksAndNeverReadsHoldsOnePageUntilTheReplyDeadline) {
  const int fd = Connect();
  const std::string long_path = "/tmp/" + std::string(4000, 'p');
  for (int i = 0; i < 150; ++i) {
    v1::SubmitJobRequest req;
    req.mutable_spec()->set_work_dir(long_path);
    req.mutable_spec()->set_stdout_pattern(long_path + "/%j.out");
    req.mutable_spec()->set_stderr_pattern(long_path + "/%j.err");
    req.mutable_spec()->set_script("#!/bin/sh\ntrue\n");
    ASSERT_TRUE(WriteFrame(fd, v1::METHOD_SUBMIT_JOB, req.SerializeAsString()).ok());
    auto reply = ReadFrame(fd, 5000);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    ASSERT_EQ(reply->type, 0u) << reply->payload;
  }
  const int hoarder = Connect();
  ASSERT_TRUE(WriteFrame(hoarder, v1::METHOD_LIST_JOBS, "").ok());
  ::usleep(2'500'000);  // past the deadline, reading nothing
  std::string got;
  EXPECT_TRUE(ClosedWithin(hoarder, 2000, &got)) << "a reply nobody reads is held forever";
  EXPECT_LT(got.size(), kListPageBytes) << "the whole page was taken";
  // A client that reads gets the listing, page after page, and the server goes on serving.
  const int reader = Connect();
  v1::ListJobsRequest req;
  int jobs = 0, pages = 0;
  do {
    ASSERT_TRUE(WriteFrame(reader, v1::METHOD_LIST_JOBS, req.SerializeAsString()).ok());
    auto reply = ReadFrame(reader, 5000);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    v1::ListJobsResponse page;
    ASSERT_TRUE(page.ParseFromString(reply->payload));
    jobs += page.jobs_size();
    req.set_after_id(page.next_after_id());
  } while (req.after_id() != 0 && ++pages < 100);
  EXPECT_EQ(jobs, 150);
}

// When every unauthenticated slot is taken, a newcomer pushes out the oldest stranger rather
// than being refused: whoever holds them all cannot keep everyone else out.
class StrangerEvictionTest : public ApiServerTest {
 protected:
  void Tweak(ApiServerOptions& o, Config&) override {
    o.max_unauthenticated = 4;
    o.max_unauthenticated_per_address = 3;
  }
  int ConnectFrom(const std::string& source) {
    const uint16_t port =
        static_cast<uint16_t>(std::stoi(tcp_address_.substr(tcp_address_.rfind(':') + 1)));
    const int s = muster::testing::ConnectLoopbackFrom(source, port);
    EXPECT_GE(s, 0) << source;
    if (s >= 0) open_.push_back(s);
    return s;
  }
};

TEST_F(StrangerEvictionTest, ANewcomerPushesOutTheOldestStranger) {
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) held.push_back(ConnectFrom("127.0.0.2"));
  held.push_back(ConnectFrom("127.0.0.3"));
  const int newcomer = ConnectFrom("127.0.0.4");
  // Five strangers for four slots: exactly one is closed to make room (whichever the server
  // admitted first: it admits on its own threads, so no order is assumed here), and the
  // newcomer is served rather than refused.
  // (Well inside the 1.5 s authentication deadline, which would close them all.)
  std::vector<bool> gone(held.size(), false);
  auto count_gone = [&] {
    for (size_t i = 0; i < held.size(); ++i) gone[i] = gone[i] || ClosedWithin(held[i], 0);
    return std::count(gone.begin(), gone.end(), true);
  };
  ASSERT_TRUE(muster::testing::WaitFor([&] { return count_gone() > 0; }, 1000))
      << "no stranger made room for the newcomer";
  EXPECT_EQ(count_gone(), 1) << "one stranger must make room, no more";
  auto ok = Authenticate(newcomer, Credential());
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->type, 0u) << ok->payload;
}

// A user over its request rate is held back, then refused; root never is. The user's requests
// run in a child that becomes the test user (its uid is what SO_PEERCRED reports).
class RequestRateTest : public ApiServerTest {
 protected:
  void Tweak(ApiServerOptions& o, Config& c) override {
    o.max_connections_per_user = 40;
    o.max_throttle_ms = 400;
    c.controller.user_request_rate = 20;
    c.controller.user_request_burst = 2;
  }
};

TEST_F(RequestRateTest, AUserOverItsRateWaitsItsTurnThenIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  const muster::testing::TestUser& user = muster::testing::TestUserFactory::Get();
  ASSERT_TRUE(user.ready);
  std::filesystem::permissions(dir_, std::filesystem::perms(0755));
  // Runs `rounds` of requests as the user, one on each of `connections` connections at once;
  // returns "elapsed_ms refused".
  auto as_user = [&](int rounds, int connections) {
    int out[2];
    EXPECT_EQ(::pipe(out), 0);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(out[0]);
      if (::setgroups(0, nullptr) != 0 || ::setgid(user.gid) != 0 || ::setuid(user.uid) != 0) {
        ::_exit(1);
      }
      std::vector<int> fds;
      for (int c = 0; c < connections; ++c) {
        auto fd = ConnectUnix(socket_);
        if (!fd.ok()) ::_exit(2);
        fds.push_back(*fd);
      }
      auto start = std::chrono::steady_clock::now();
      int refused = 0;
      for (int i = 0; i < rounds; ++i) {
        for (int fd : fds) {
          if (!WriteFrame(fd, v1::METHOD_CONTROLLER_INFO, "").ok()) ::_exit(3);
        }
        for (int fd : fds) {
          auto f = ReadFrame(fd, 10'000);
          if (!f.ok()) ::_exit(4);
          if (f->type == static_cast<uint32_t>(StatusCode::kResourceExhausted)) ++refused;
        }
      }
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - start)
                    .count();
      std::string text = std::to_string(ms) + " " + std::to_string(refused);
      (void)!::write(out[1], text.data(), text.size());
      ::_exit(0);
    }
    ::close(out[1]);
    char buf[64] = {};
    ssize_t got = ::read(out[0], buf, sizeof buf - 1);
    ::close(out[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    return std::string(buf, got > 0 ? static_cast<size_t>(got) : 0);
  };
  // 2 at once, then 20 a second: 8 requests take at least 6 x 50 ms, and none is refused.
  std::istringstream paced(as_user(8, 1));
  long ms = 0, refused = -1;
  paced >> ms >> refused;
  EXPECT_GE(ms, 280) << "the user was not held back";
  EXPECT_EQ(refused, 0);
  // Thirty at once on as many connections: those whose turn would come after 400 ms are refused.
  std::istringstream flood(as_user(1, 30));
  flood >> ms >> refused;
  EXPECT_GT(refused, 0);
  // Root (this process) is not limited.
  const int fd = Connect();
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Info(fd).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900));
}

}  // namespace
}  // namespace muster::rpc
