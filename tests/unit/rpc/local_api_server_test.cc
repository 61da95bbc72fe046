// The controller's Unix-socket API under abuse: an oversized or stalled request closes only its
// own connection, and one user's connections are capped without affecting anyone else's.
#include "local_api_server.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

#include "muster/common/framing.h"
#include "muster/common/job_limits.h"
#include "muster/controller/controller_runner.h"
#include "muster/rpc/asio_executor.h"
#include "muster/store/state_store.h"
#include "one_node_config.h"

namespace muster::rpc {
namespace {

class LocalApiServerTest : public ::testing::Test {
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
    LocalApiServerOptions lo;
    lo.max_connections_per_user = 3;
    lo.request_deadline_ms = 1000;
    server_ = std::make_unique<LocalApiServer>(executor_.io(), *dispatcher_, config_, lo);
    ASSERT_TRUE(server_->Listen(socket_).ok());
  }
  void TearDown() override {
    for (int fd : open_) ::close(fd);
    if (server_) server_->Close();
    executor_.Stop();
    std::filesystem::remove_all(dir_);
  }

  int Connect() {
    auto fd = ConnectUnix(socket_);
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    if (fd.ok()) open_.push_back(*fd);
    return fd.ok() ? *fd : -1;
  }
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
  std::unique_ptr<LocalApiServer> server_;
  std::vector<int> open_;
};

TEST_F(LocalApiServerTest, AnOversizedRequestIsRefusedOnItsHeader) {
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

TEST_F(LocalApiServerTest, ARequestThatStallsHalfwayIsClosedAtItsDeadline) {
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

TEST_F(LocalApiServerTest, OneUsersConnectionsAreCapped) {
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

}  // namespace
}  // namespace muster::rpc
