#include "muster/common/service_notify.h"

#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace muster {

// The two functions of libsystemd.so.0 used, as sd-daemon(3) declares them (no build dependency
// on libsystemd-dev).
struct ServiceNotifier::Api {
  int (*notify)(int unset_environment, const char* state) = nullptr;
  int (*watchdog_enabled)(int unset_environment, uint64_t* usec) = nullptr;
};

ServiceNotifier& ServiceNotifier::Get() {
  static ServiceNotifier* notifier = new ServiceNotifier();
  return *notifier;
}

ServiceNotifier::ServiceNotifier() {
  void* lib = ::dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = ::dlerror();
    load_error_ = e ? e : "libsystemd.so.0 cannot be loaded";
    return;
  }
  static Api api;
  api.notify = reinterpret_cast<decltype(api.notify)>(::dlsym(lib, "sd_notify"));
  api.watchdog_enabled =
      reinterpret_cast<decltype(api.watchdog_enabled)>(::dlsym(lib, "sd_watchdog_enabled"));
  if (api.notify && api.watchdog_enabled) {
    api_ = &api;
  } else {
    load_error_ = "libsystemd.so.0 lacks sd_notify or sd_watchdog_enabled";
  }
}

std::string ServiceNotifier::problem() const {
  if (api_ || !std::getenv("NOTIFY_SOCKET")) return "";
  return "systemd waits for this daemon to say it is ready, but " + load_error_ +
         ": the unit's start will time out; install libsystemd0, or use Type=simple";
}

bool ServiceNotifier::active() const { return api_ && std::getenv("NOTIFY_SOCKET"); }

bool ServiceNotifier::Send(const std::string& state) const {
  return api_ && api_->notify(0, state.c_str()) > 0;
}

// STATUS= ends at a newline: the text is kept to its first line.
static std::string StatusLine(const std::string& status) {
  return "STATUS=" + status.substr(0, status.find('\n'));
}

bool ServiceNotifier::Ready(const std::string& status) {
  return Send("READY=1\n" + StatusLine(status));
}
bool ServiceNotifier::Status(const std::string& status) { return Send(StatusLine(status)); }
bool ServiceNotifier::Stopping(const std::string& status) {
  return Send("STOPPING=1\n" + StatusLine(status));
}
bool ServiceNotifier::Reloading(const std::string& status) {
  // MONOTONIC_USEC: when the reload began, which systemd 253's Type=notify-reload wants.
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t usec =
      static_cast<uint64_t>(ts.tv_sec) * 1'000'000 + static_cast<uint64_t>(ts.tv_nsec) / 1000;
  return Send("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec) + "\n" + StatusLine(status));
}
bool ServiceNotifier::WatchdogPing() { return Send("WATCHDOG=1"); }

int64_t ServiceNotifier::WatchdogEveryMs() const {
  if (!api_) return 0;
  uint64_t usec = 0;
  if (api_->watchdog_enabled(0, &usec) <= 0 || usec == 0) return 0;
  return std::max<int64_t>(1, static_cast<int64_t>(usec / 2000));
}

LoopWatchdog::LoopWatchdog(int64_t every_ms, Post post, std::function<void()> ping)
    : shared_(std::make_shared<Shared>()) {
  shared_->ping = std::move(ping);
  thread_ = std::thread([this, every_ms, post = std::move(post)] {
    std::unique_lock<std::mutex> l(mu_);
    while (!cv_.wait_for(l, std::chrono::milliseconds(every_ms), [&] { return stop_; })) {
      // One ping waits on the loop at most: a wedged loop does not pile them up.
      if (shared_->waiting.exchange(true)) continue;
      const bool queued = post([s = shared_] {
        s->waiting = false;
        s->ping();
      });
      if (!queued) shared_->waiting = false;  // dropped: the next round tries again
    }
  });
}

LoopWatchdog::~LoopWatchdog() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::unique_ptr<LoopWatchdog> StartSystemdWatchdog(LoopWatchdog::Post post) {
  const int64_t every = ServiceNotifier::Get().WatchdogEveryMs();
  if (every <= 0) return nullptr;
  return std::make_unique<LoopWatchdog>(every, std::move(post),
                                        [] { ServiceNotifier::Get().WatchdogPing(); });
}

}  // namespace muster
