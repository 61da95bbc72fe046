#include "web_sessions.h"

#include <iterator>

#include "muster/common/strings.h"

namespace muster::web {

void WebSessions::DropExpired(TimeMs now) {
  for (auto* m : {&logins_, &sessions_}) {
    for (auto it = m->begin(); it != m->end();) {
      it = it->second.expires <= now ? m->erase(it) : std::next(it);
    }
  }
}

size_t WebSessions::CountOf(const std::map<std::string, Entry>& m, const std::string& user) const {
  size_t n = 0;
  for (const auto& [id, e] : m) n += e.user.name == user;
  return n;
}

Result<std::string> WebSessions::IssueLogin(const WebUser& user, TimeMs now) {
  std::lock_guard<std::mutex> l(mu_);
  DropExpired(now);
  if (logins_.size() >= kMaxLogins || CountOf(logins_, user.name) >= kMaxLoginsPerUser) {
    return ResourceExhausted("too many web logins wait to be used; try again in a minute");
  }
  std::string token = RandomHex(32);
  logins_[token] = {user, now + kLoginTtlMs, now, ""};
  return token;
}

std::optional<WebSessions::Session> WebSessions::Redeem(const std::string& token, TimeMs now) {
  std::lock_guard<std::mutex> l(mu_);
  DropExpired(now);
  auto it = logins_.find(token);
  if (it == logins_.end()) return std::nullopt;
  const WebUser user = it->second.user;
  logins_.erase(it);  // once only
  // A user with too many sessions loses the oldest; all users' sessions stay bounded the same way.
  auto drop_oldest = [&](bool this_user_only) {
    auto oldest = sessions_.end();
    for (auto s = sessions_.begin(); s != sessions_.end(); ++s) {
      if (this_user_only && s->second.user.name != user.name) continue;
      if (oldest == sessions_.end() || s->second.made < oldest->second.made) oldest = s;
    }
    if (oldest != sessions_.end()) sessions_.erase(oldest);
  };
  if (CountOf(sessions_, user.name) >= kMaxSessionsPerUser) drop_oldest(true);
  if (sessions_.size() >= kMaxSessions) drop_oldest(false);
  Session made{RandomHex(32), RandomHex(16), user};
  sessions_[made.id] = {user, now + kSessionTtlMs, now, made.path};
  return made;
}

std::optional<WebSessions::Session> WebSessions::Find(const std::string& id, TimeMs now) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return std::nullopt;
  if (it->second.expires <= now) {
    sessions_.erase(it);
    return std::nullopt;
  }
  return Session{id, it->second.path, it->second.user};
}

void WebSessions::End(const std::string& session) {
  std::lock_guard<std::mutex> l(mu_);
  sessions_.erase(session);
}

size_t WebSessions::sessions() const {
  std::lock_guard<std::mutex> l(mu_);
  return sessions_.size();
}

}  // namespace muster::web
