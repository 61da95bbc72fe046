// What a daemon tells systemd about itself (a Type=notify unit): READY once it serves, STOPPING
// when it begins to stop, RELOADING while it reads its config again, a STATUS line, and the
// watchdog's keep-alives. libsystemd is loaded at run time: a host without it, or a daemon not
// started by systemd (no NOTIFY_SOCKET), runs the same, and every call is then a no-op.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace muster {

// Thread-safe.
class ServiceNotifier {
 public:
  static ServiceNotifier& Get();

  // Whether systemd listens (NOTIFY_SOCKET is set) and libsystemd could be loaded.
  bool active() const;
  // Why systemd will not hear from this daemon although it listens (libsystemd missing); "" when
  // it will, or when it does not listen. The daemons log it: this library logs nothing.
  std::string problem() const;
  // Each true when systemd got the message; false without systemd.
  bool Ready(const std::string& status);
  bool Status(const std::string& status);
  bool Stopping(const std::string& status);
  // A reload began (systemctl reload, SIGHUP): systemd shows the unit reloading until the next
  // Ready.
  bool Reloading(const std::string& status);
  bool WatchdogPing();
  // How often the watchdog wants a keep-alive: half its timeout (WatchdogSec=), as systemd
  // advises; 0 when no watchdog is set for this process.
  int64_t WatchdogEveryMs() const;

  struct Api;  // libsystemd's functions (service_notify.cc)

 private:
  ServiceNotifier();
  bool Send(const std::string& state) const;
  const Api* api_ = nullptr;
  std::string load_error_;
};

// Feeds a watchdog from a daemon's event loop: every `every_ms` it hands `ping` to `post`, which
// must run it on the loop (and say false when it dropped it instead); a ping still waiting there
// is not posted again. A wedged loop then stops the keep-alives, and systemd restarts the daemon
// (WatchdogSec=, Restart=on-failure).
class LoopWatchdog {
 public:
  using Post = std::function<bool(std::function<void()>)>;
  LoopWatchdog(int64_t every_ms, Post post, std::function<void()> ping);
  ~LoopWatchdog();  // stops posting; a ping already posted may still run
  LoopWatchdog(const LoopWatchdog&) = delete;
  LoopWatchdog& operator=(const LoopWatchdog&) = delete;

 private:
  struct Shared {
    std::function<void()> ping;
    std::atomic<bool> waiting{false};  // posted, not yet run on the loop
  };
  std::shared_ptr<Shared> shared_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // mu_
  std::thread thread_;
};

// systemd's watchdog for this process fed from a loop through `post`, when WatchdogSec= set
// one; null otherwise.
std::unique_ptr<LoopWatchdog> StartSystemdWatchdog(LoopWatchdog::Post post);

}  // namespace muster
