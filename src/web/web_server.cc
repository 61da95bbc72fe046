#include "muster/web/web_server.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "muster/common/framing.h"
#include "muster/common/strings.h"
#include "muster/metrics/http_server.h"
#include "web_assets.h"
#include "web_json.h"
#include "web_pages.h"
#include "web_sessions.h"

namespace muster::web {
namespace {

using metrics::HttpRequest;
using metrics::HttpResponse;
using Reply = std::function<void(HttpResponse)>;

constexpr const char* kCookie = "muster_session";
constexpr size_t kMaxTarget = 2048;

// Every answer: nothing cached, nothing framed, nothing loaded from elsewhere, no referrer.
void Harden(HttpResponse& r) {
  r.headers.push_back({"Cache-Control", "no-store"});
  r.headers.push_back({"Content-Security-Policy",
                       "default-src 'none'; script-src 'self'; style-src 'self'; "
                       "img-src 'self'; connect-src 'self'; base-uri 'none'; "
                       "form-action 'none'; frame-ancestors 'none'"});
  r.headers.push_back({"X-Content-Type-Options", "nosniff"});
  r.headers.push_back({"X-Frame-Options", "DENY"});
  r.headers.push_back({"Referrer-Policy", "no-referrer"});
}

HttpResponse Page(int status, std::string html) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/html; charset=utf-8";
  r.body = std::move(html);
  Harden(r);
  return r;
}

HttpResponse Json(std::string body) {
  HttpResponse r;
  r.content_type = "application/json";
  r.body = std::move(body);
  Harden(r);
  return r;
}

int HttpStatusOf(const Status& s) {
  switch (s.code()) {
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kUnavailable:
    case StatusCode::kResourceExhausted:
      return 503;
    default:
      return 500;
  }
}

// The value of cookie `name` in a Cookie header ("a=1; muster_session=abc").
std::string CookieValue(const std::string& header, const std::string& name) {
  for (const std::string& part : Split(header, ';', /*skip_empty=*/true)) {
    const std::string kv(Trim(part));
    if (kv.size() > name.size() && kv.compare(0, name.size(), name) == 0 &&
        kv[name.size()] == '=') {
      return kv.substr(name.size() + 1);
    }
  }
  return "";
}

// The value of `key` in a query string ("token=abc&x=1").
std::string QueryValue(const std::string& query, const std::string& key) {
  for (const std::string& part : Split(query, '&', /*skip_empty=*/true)) {
    if (part.rfind(key + "=", 0) == 0) return part.substr(key.size() + 1);
  }
  return "";
}

std::optional<uint64_t> JobIdIn(const std::string& rest, const std::string& prefix) {
  if (rest.rfind(prefix, 0) != 0) return std::nullopt;
  auto id = ParseUint(rest.substr(prefix.size()));
  if (!id || *id == 0) return std::nullopt;
  return id;
}

}  // namespace

class WebServer::Impl {
 public:
  Impl(boost::asio::io_context& io, WebOptions options)
      : options_(std::move(options)),
        http_(io, "musterctld", "the web view", kMaxConnections,
              [this](const HttpRequest& req, Reply reply) { Handle(req, std::move(reply)); }) {
    if (!options_.clock) options_.clock = SystemClock::Get();
  }

  Result<int> Listen() {
    MUSTER_ASSIGN_OR_RETURN(int port, http_.Listen(options_.address));
    std::string base = options_.url;
    if (base.empty()) {
      std::string host;
      uint16_t ignored = 0;
      MUSTER_RETURN_IF_ERROR(SplitHostPort(options_.address, &host, &ignored));
      if (host == "0.0.0.0" || host == "::" || host == "[::]" || host.empty()) {
        char name[256] = {};
        host = ::gethostname(name, sizeof name - 1) == 0 ? name : "localhost";
      }
      base = "http://" + host + ":" + std::to_string(port);
    }
    while (!base.empty() && base.back() == '/') base.pop_back();
    std::lock_guard<std::mutex> l(mu_);
    base_ = base;
    secure_ = base.rfind("https://", 0) == 0;
    return port;
  }

  void Close() { http_.Close(); }

  Result<v1::WebLoginResponse> Login(const WebUser& user) {
    const TimeMs now = options_.clock->NowMs();
    MUSTER_ASSIGN_OR_RETURN(std::string token, sessions_.IssueLogin(user, now));
    v1::WebLoginResponse resp;
    std::lock_guard<std::mutex> l(mu_);
    resp.set_url(base_ + "/login?token=" + token);
    resp.set_expires_ms(now + WebSessions::kLoginTtlMs);
    spdlog::info("web: login address made user={} uid={}", user.name, user.uid);
    return resp;
  }

 private:
  PageContext Context(const WebSessions::Session* s, const std::string& active) const {
    PageContext ctx;
    ctx.cluster = options_.cluster_name;
    ctx.user = s ? s->user.name : "";
    ctx.root = s ? "/s/" + s->path + "/" : "/";
    ctx.active = active;
    ctx.now = options_.clock->NowMs();
    return ctx;
  }

  void Handle(const HttpRequest& req, Reply reply) {
    if (req.target.empty() || req.target[0] != '/' || req.target.size() > kMaxTarget) {
      return reply(Page(400, MessagePage(Context(nullptr, ""), "Bad request", "Bad address.")));
    }
    const size_t q = req.target.find('?');
    const std::string path = req.target.substr(0, q);
    const std::string query = q == std::string::npos ? "" : req.target.substr(q + 1);
    if (path == "/static/muster.css" || path == "/static/muster.js") {
      HttpResponse r;
      const bool css = path == "/static/muster.css";
      r.content_type = css ? "text/css; charset=utf-8" : "text/javascript; charset=utf-8";
      r.body = css ? StyleSheet() : Script();
      Harden(r);
      return reply(std::move(r));
    }
    const TimeMs now = options_.clock->NowMs();
    if (path == "/login") {
      // A HEAD (a link preview, a prefetch) must not use the address up.
      if (req.head) return reply(Page(200, ""));
      return LogIn(QueryValue(query, "token"), now, std::move(reply));
    }
    const std::optional<WebSessions::Session> session =
        sessions_.Find(CookieValue(req.cookie, kCookie), now);
    const std::string prefix = session ? "/s/" + session->path + "/" : "";
    if (!session || path.rfind(prefix, 0) != 0) {
      if (session && path == "/") return Redirect(prefix, {}, std::move(reply));
      return reply(Page(401, MessagePage(Context(nullptr, ""), "Log in",
                                         "Run `muster web` on a host of the cluster and open the "
                                         "address it prints (it is good for one minute).")));
    }
    // A user's connections at once are bounded (a reader who never reads its big answers would
    // otherwise hold every connection): each one counts until its connection is over.
    const std::string user = session->user.name;
    {
      std::lock_guard<std::mutex> l(busy_->mu);
      int& n = busy_->by_user[user];
      if (n >= kMaxRequestsPerUser) {
        HttpResponse r = Page(429, MessagePage(Context(&*session, ""), "Too many requests",
                                               "Too many pages at once; try again."));
        r.headers.push_back({"Retry-After", "1"});
        return reply(std::move(r));
      }
      ++n;
    }
    Reply counted = [busy = busy_, user, reply = std::move(reply)](HttpResponse r) {
      r.finished = [busy, user] {
        std::lock_guard<std::mutex> l(busy->mu);
        if (--busy->by_user[user] <= 0) busy->by_user.erase(user);
      };
      reply(std::move(r));
    };
    Route(*session, path.substr(prefix.size()), std::move(counted));
  }

  void LogIn(const std::string& token, TimeMs now, Reply reply) {
    std::optional<WebSessions::Session> s = sessions_.Redeem(token, now);
    if (!s) {
      return reply(Page(401, MessagePage(Context(nullptr, ""), "Log in",
                                         "This login address was used already or is too old: "
                                         "run `muster web` again.")));
    }
    spdlog::info("web: logged in user={} uid={}", s->user.name, s->user.uid);
    const std::string root = "/s/" + s->path + "/";
    std::string cookie =
        std::string(kCookie) + "=" + s->id + "; Path=" + root +
        "; HttpOnly; SameSite=Strict; Max-Age=" + std::to_string(WebSessions::kSessionTtlMs / 1000);
    if (Secure()) cookie += "; Secure";
    Redirect(root, cookie, std::move(reply));
  }

  bool Secure() {
    std::lock_guard<std::mutex> l(mu_);
    return secure_;
  }

  void Redirect(const std::string& to, const std::string& cookie, Reply reply) {
    HttpResponse r;
    r.status = 303;
    r.headers.push_back({"Location", to});
    if (!cookie.empty()) r.headers.push_back({"Set-Cookie", cookie});
    Harden(r);
    reply(std::move(r));
  }

  // Asks the user API as the session's user for a `Resp`.
  template <class Resp>
  void Ask(const WebUser& user, uint32_t method, const google::protobuf::MessageLite& req,
           std::function<void(Result<Resp>)> done) {
    options_.fetch(user, method, req.SerializeAsString(),
                   [done = std::move(done)](Status s, std::string payload) {
                     if (!s.ok()) return done(s);
                     Resp resp;
                     if (!resp.ParseFromString(payload)) {
                       return done(Internal("the controller's answer does not parse"));
                     }
                     done(std::move(resp));
                   });
  }

  // Every page of the running and suspended jobs the user may see, from `after` on, into `all`
  // (a listing comes in pages of 20,000; at most kMaxRunningPages of them).
  void AskRunning(const WebUser& user, std::shared_ptr<v1::ListJobsResponse> all, uint64_t after,
                  std::function<void(Status)> done, int page = 0) {
    v1::ListJobsRequest req;
    req.add_states(v1::RUNNING);
    req.add_states(v1::SUSPENDED);
    req.set_after_id(after);
    Ask<v1::ListJobsResponse>(
        user, v1::METHOD_LIST_JOBS, req,
        [this, user, all, done = std::move(done), page](Result<v1::ListJobsResponse> r) mutable {
          if (!r.ok()) return done(r.status());
          for (v1::JobInfo& j : *r->mutable_jobs()) *all->add_jobs() = std::move(j);
          if (r->next_after_id() == 0 || page + 1 >= kMaxRunningPages) return done(Status::Ok());
          AskRunning(user, all, r->next_after_id(), std::move(done), page + 1);
        });
  }

  // The page for an error the API gave.
  void Failed(const WebSessions::Session& s, const Status& st, Reply& reply) {
    reply(Page(HttpStatusOf(st), MessagePage(Context(&s, ""), "Not shown", st.message())));
  }

  void Route(const WebSessions::Session& s, const std::string& rest, Reply reply) {
    const WebUser& u = s.user;
    if (rest == "logout") {
      sessions_.End(s.id);
      spdlog::info("web: logged out user={}", u.name);
      return Redirect("/", std::string(kCookie) + "=; Path=/s/" + s.path + "/; Max-Age=0",
                      std::move(reply));
    }
    if (rest.empty()) {
      // The map: the nodes, and the running jobs' GPUs (those the caller may see).
      return Ask<v1::ListNodesResponse>(
          u, v1::METHOD_LIST_NODES, v1::ListNodesRequest(),
          [this, s, reply](Result<v1::ListNodesResponse> nodes) mutable {
            if (!nodes.ok()) return Failed(s, nodes.status(), reply);
            auto running = std::make_shared<v1::ListJobsResponse>();
            AskRunning(s.user, running, 0,
                       [this, s, reply, running, nodes = std::move(*nodes)](Status st) mutable {
                         if (!st.ok()) return Failed(s, st, reply);
                         reply(Page(200, NodesPage(Context(&s, "nodes"), nodes, *running)));
                       });
          });
    }
    if (rest == "queue" || rest == "api/jobs") {
      const bool json = rest != "queue";
      return Ask<v1::ListJobsResponse>(
          u, v1::METHOD_LIST_JOBS, v1::ListJobsRequest(),
          [this, s, reply, json](Result<v1::ListJobsResponse> jobs) mutable {
            if (!jobs.ok()) return Failed(s, jobs.status(), reply);
            reply(json ? Json(JobsJson(*jobs)) : Page(200, QueuePage(Context(&s, "queue"), *jobs)));
          });
    }
    if (rest == "api/nodes") {
      return Ask<v1::ListNodesResponse>(
          u, v1::METHOD_LIST_NODES, v1::ListNodesRequest(),
          [this, s, reply](Result<v1::ListNodesResponse> nodes) mutable {
            if (!nodes.ok()) return Failed(s, nodes.status(), reply);
            reply(Json(NodesJson(*nodes)));
          });
    }
    if (rest == "accounts" || rest == "api/shares") {
      const bool json = rest != "accounts";
      v1::ListSharesRequest req;
      req.set_with_accounts(true);
      return Ask<v1::ListSharesResponse>(
          u, v1::METHOD_LIST_SHARES, req,
          [this, s, reply, json](Result<v1::ListSharesResponse> shares) mutable {
            if (!shares.ok()) return Failed(s, shares.status(), reply);
            reply(json ? Json(SharesJson(*shares))
                       : Page(200, AccountsPage(Context(&s, "accounts"), *shares)));
          });
    }
    std::optional<uint64_t> id = JobIdIn(rest, "job/");
    const bool json = !id && (id = JobIdIn(rest, "api/job/"));
    if (id) {
      v1::GetJobRequest req;
      req.set_job_id(*id);
      return Ask<v1::GetJobResponse>(
          u, v1::METHOD_GET_JOB, req,
          [this, s, reply, json](Result<v1::GetJobResponse> job) mutable {
            if (!job.ok()) return Failed(s, job.status(), reply);
            reply(json ? Json(JobJson(job->job()))
                       : Page(200, JobPage(Context(&s, "queue"), job->job())));
          });
    }
    reply(Page(404, MessagePage(Context(&s, ""), "Not found", "There is no such page.")));
  }

  // Connections a user holds now; shared with the connections, which may outlive this object.
  struct Busy {
    std::mutex mu;
    std::map<std::string, int> by_user;
  };
  static constexpr int kMaxRequestsPerUser = 4;
  static constexpr int kMaxRunningPages = 50;

  WebOptions options_;
  std::shared_ptr<Busy> busy_ = std::make_shared<Busy>();
  WebSessions sessions_;
  metrics::HttpServer http_;
  std::mutex mu_;
  std::string base_;     // mu_: the address login links start with
  bool secure_ = false;  // mu_ (set once by Listen): cookies only over HTTPS
};

WebServer::WebServer(boost::asio::io_context& io, WebOptions options)
    : impl_(std::make_unique<Impl>(io, std::move(options))) {}
WebServer::~WebServer() = default;
Result<int> WebServer::Listen() { return impl_->Listen(); }
void WebServer::Close() { impl_->Close(); }
Result<v1::WebLoginResponse> WebServer::Login(const WebUser& user) { return impl_->Login(user); }

}  // namespace muster::web
