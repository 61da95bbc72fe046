#include "muster/common/service_notify.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <string>
#include <thread>

namespace muster {
namespace {

// A socket standing in for systemd's notification socket.
class FakeSystemd {
 public:
  FakeSystemd() {
    path_ = std::filesystem::temp_directory_path() /
            ("muster-notify-" + std::to_string(::getpid()) + "-" + std::to_string(next_++));
    std::filesystem::remove(path_);
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path_.c_str());
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    timeval tv{0, 500'000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setenv("NOTIFY_SOCKET", path_.c_str(), 1);
  }
  ~FakeSystemd() {
    ::unsetenv("NOTIFY_SOCKET");
    ::close(fd_);
    std::filesystem::remove(path_);
  }
  // The next message, or "" after half a second without one.
  std::string Next() {
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  }

 private:
  static inline int next_ = 0;
  std::filesystem::path path_;
  int fd_ = -1;
};

bool HaveLibsystemd() {
  FakeSystemd s;
  return ServiceNotifier::Get().active();
}

TEST(ServiceNotifierTest, WithoutSystemdEveryCallIsANoOp) {
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
  ServiceNotifier& n = ServiceNotifier::Get();
  EXPECT_FALSE(n.active());
  EXPECT_EQ(n.problem(), "") << "nobody listens: nothing to warn of";
  EXPECT_FALSE(n.Ready("serving"));
  EXPECT_FALSE(n.WatchdogPing());
  EXPECT_FALSE(n.Stopping("bye"));
  EXPECT_EQ(n.WatchdogEveryMs(), 0);
}

TEST(ServiceNotifierTest, ReadyStatusAndStoppingReachTheNotifySocket) {
  if (!HaveLibsystemd()) GTEST_SKIP() << "libsystemd.so.0 is not installed";
  FakeSystemd systemd;
  ServiceNotifier& n = ServiceNotifier::Get();
  EXPECT_EQ(n.problem(), "");
  EXPECT_TRUE(n.Ready("serving 4 nodes, epoch 3"));
  EXPECT_EQ(systemd.Next(), "READY=1\nSTATUS=serving 4 nodes, epoch 3");
  // A status is one line: what follows a newline could otherwise set other variables.
  n.Status("draining\nREADY=0");
  EXPECT_EQ(systemd.Next(), "STATUS=draining");
  n.WatchdogPing();
  EXPECT_EQ(systemd.Next(), "WATCHDOG=1");
  n.Stopping("shutting down (signal 15)");
  EXPECT_EQ(systemd.Next(), "STOPPING=1\nSTATUS=shutting down (signal 15)");
}

TEST(ServiceNotifierTest, WatchdogIntervalIsHalfItsTimeoutForThisProcessOnly) {
  if (!HaveLibsystemd()) GTEST_SKIP() << "libsystemd.so.0 is not installed";
  ServiceNotifier& n = ServiceNotifier::Get();
  ::setenv("WATCHDOG_USEC", "400000", 1);
  EXPECT_EQ(n.WatchdogEveryMs(), 200);
  ::setenv("WATCHDOG_PID", std::to_string(::getpid()).c_str(), 1);
  EXPECT_EQ(n.WatchdogEveryMs(), 200);
  // Another process's watchdog (a child that inherited the variables) is not ours to feed.
  ::setenv("WATCHDOG_PID", std::to_string(::getpid() + 1).c_str(), 1);
  EXPECT_EQ(n.WatchdogEveryMs(), 0);
  ::unsetenv("WATCHDOG_PID");
  ::unsetenv("WATCHDOG_USEC");
  EXPECT_EQ(n.WatchdogEveryMs(), 0);
  EXPECT_EQ(StartSystemdWatchdog([](std::function<void()> f) {
              f();
              return true;
            }),
            nullptr);
}

// An event loop on a thread of its own that a test can wedge.
class Loop {
 public:
  Loop() : thread_([this] { Run(); }) {}
  ~Loop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> l(mu_);
      queue_.push_back(std::move(fn));
    }
    cv_.notify_all();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      auto fn = std::move(queue_.front());
      queue_.pop_front();
      l.unlock();
      fn();
      l.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

TEST(LoopWatchdogTest, PingsStopWhileTheLoopIsWedgedAndDoNotPileUp) {
  using namespace std::chrono_literals;
  Loop loop;
  std::atomic<int> pings{0};
  std::atomic<int> posted{0};
  LoopWatchdog dog(
      20,
      [&](std::function<void()> fn) {
        ++posted;
        loop.Post(std::move(fn));
        return true;
      },
      [&] { ++pings; });
  std::this_thread::sleep_for(300ms);
  EXPECT_GE(pings.load(), 5) << "a running loop sends keep-alives";

  std::atomic<bool> wedged{true};
  loop.Post([&] {
    while (wedged) std::this_thread::sleep_for(1ms);
  });
  std::this_thread::sleep_for(50ms);  // the ping in flight, if any, has run or waits
  const int before = pings.load();
  const int posted_before = posted.load();
  std::this_thread::sleep_for(400ms);
  EXPECT_LE(pings.load(), before + 1) << "no keep-alive while the loop is stuck";
  EXPECT_LE(posted.load(), posted_before + 1) << "one ping waits on the loop at most";
  wedged = false;
  std::this_thread::sleep_for(300ms);
  EXPECT_GE(pings.load(), before + 5) << "keep-alives resume with the loop";
}

TEST(LoopWatchdogTest, APingTheLoopDroppedDoesNotStopTheNext) {
  using namespace std::chrono_literals;
  std::atomic<int> offered{0};
  std::atomic<int> pings{0};
  // The loop refuses the first two (a server not serving yet), then runs them.
  LoopWatchdog dog(
      10,
      [&](std::function<void()> fn) {
        if (++offered <= 2) return false;
        fn();
        return true;
      },
      [&] { ++pings; });
  std::this_thread::sleep_for(300ms);
  EXPECT_GE(pings.load(), 5) << "keep-alives go on after the dropped ones";
}

}  // namespace
}  // namespace muster
