// The controller's read-only web view ([controller] web_address, off by default): the nodes as
// a topology map, the queue with why each pending job waits, a page a job, and the accounts'
// usage against their shares. Pages are rendered here from the user API's answers, asked as the
// logged-in user (so private_data and every other rule apply as to `muster queue`), and a small
// script refreshes them from the same answers as JSON (/api/...).
//
// Logging in: `muster web` asks the controller, over the authenticated user API, for a one-time
// address (Login); opening it within a minute opens a session for that user (8 hours): an
// HttpOnly, SameSite=Strict cookie, good only under the session's own random path (/s/PATH/),
// where its pages are. Nothing else logs anyone in. A user's connections at once are bounded.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "muster/common/clock.h"
#include "muster/common/status.h"
#include "muster/v1/controller.pb.h"

namespace muster::web {

struct WebUser {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::string name;
};

// One request to the user API on `user`'s behalf: a method id and a serialized request; `done`
// gets the status and the serialized response, on any thread.
using Fetch = std::function<void(const WebUser& user, uint32_t method, std::string payload,
                                 std::function<void(Status, std::string)> done)>;

struct WebOptions {
  std::string address;  // host:port to listen on
  std::string url;      // what browsers reach it by; empty: http:// and the bound address
  std::string cluster_name;
  Fetch fetch;
  const Clock* clock = nullptr;  // for sessions' ends; null: the system clock
};

class WebSessions;

class WebServer {
 public:
  static constexpr int kMaxConnections = 64;

  WebServer(boost::asio::io_context& io, WebOptions options);
  ~WebServer();

  // Binds the address; returns the bound port.
  Result<int> Listen();
  // Stops accepting (connections under way finish or time out).
  void Close();
  // METHOD_WEB_LOGIN: a one-time login address for `user`. RESOURCE_EXHAUSTED when too many
  // logins wait. Thread-safe.
  Result<v1::WebLoginResponse> Login(const WebUser& user);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace muster::web
