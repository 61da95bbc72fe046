// Who is logged in to the web view: one-time login tokens (`muster web`) and the sessions they
// open. A session is two secrets: a random cookie value, and a random path its pages live under
// (/s/PATH/), which is also the cookie's Path. Browsers send a host's cookies to every port of
// it, so another user's server on the same host could be sent the cookie; it is sent only
// to pages under the session's path, which that server does not know. Bounded: a user's logins
// and sessions, and all of them, have ceilings; the oldest session of a user goes when the user
// opens one too many. Thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "muster/common/clock.h"
#include "muster/common/status.h"
#include "muster/web/web_server.h"

namespace muster::web {

class WebSessions {
 public:
  static constexpr TimeMs kLoginTtlMs = 60'000;
  static constexpr TimeMs kSessionTtlMs = 8LL * 3600 * 1000;
  static constexpr size_t kMaxLogins = 1024;  // waiting to be used, all users
  static constexpr size_t kMaxLoginsPerUser = 16;
  static constexpr size_t kMaxSessions = 4096;
  static constexpr size_t kMaxSessionsPerUser = 32;

  // A new login token for `user`, good once until now + kLoginTtlMs. RESOURCE_EXHAUSTED when
  // too many wait (for the user, or in all).
  Result<std::string> IssueLogin(const WebUser& user, TimeMs now);
  struct Session {
    std::string id;    // the cookie's value
    std::string path;  // its pages are under /s/PATH/
    WebUser user;
  };
  // Uses a login token up: the new session, or none for a token that is unknown, used or too
  // old.
  std::optional<Session> Redeem(const std::string& token, TimeMs now);
  // The session, while it lasts.
  std::optional<Session> Find(const std::string& id, TimeMs now);
  void End(const std::string& session);

  size_t sessions() const;

 private:
  struct Entry {
    WebUser user;
    TimeMs expires = 0;
    TimeMs made = 0;
    std::string path;  // sessions only
  };
  void DropExpired(TimeMs now);  // mu_
  size_t CountOf(const std::map<std::string, Entry>& m, const std::string& user) const;

  mutable std::mutex mu_;
  std::map<std::string, Entry> logins_;    // token -> who (mu_)
  std::map<std::string, Entry> sessions_;  // session id -> who (mu_)
};

}  // namespace muster::web
