#include "muster/ha/etcd_election.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "election_rules.h"
#include "etcd/election.grpc.pb.h"
#include "muster/common/strings.h"

namespace muster::ha {
namespace {

using Clock = std::chrono::steady_clock;  // gRPC deadlines take the system clock

Status FromGrpc(const grpc::Status& s, const std::string& what) {
  const std::string words = "etcd " + what + ": " + s.error_message();
  switch (s.error_code()) {
    case grpc::StatusCode::OK:
      return Status::Ok();
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Unavailable(words);
    case grpc::StatusCode::NOT_FOUND:
      return NotFound(words);
    default:
      return Internal(words);
  }
}

class EtcdElectionImpl final : public EtcdElection {
 public:
  explicit EtcdElectionImpl(EtcdElectionOptions o) : o_(std::move(o)) {
    // Reconnect within a poll or so: gRPC's default backoff (from 1 s, growing to minutes)
    // would leave a controller started before etcd, or cut off from it for a while, deaf to
    // etcd for far longer than a failover may take.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);  // gRPC's connect timeout, in fact
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = o_.tls->ca_pem;
    tls.pem_cert_chain = o_.tls->cert_pem;
    tls.pem_private_key = o_.tls->key_pem;
    const auto credentials = grpc::SslCredentials(tls);
    args.SetSslTargetNameOverride(o_.tls_server_name);
    for (const std::string& e : o_.endpoints) {
      auto channel = grpc::CreateCustomChannel(e, credentials, args);
      endpoints_.push_back({etcdserverpb::KV::NewStub(channel),
                            etcdserverpb::Lease::NewStub(channel),
                            etcdserverpb::Watch::NewStub(channel)});
    }
  }
  ~EtcdElectionImpl() override { Stop(); }

  Result<Leadership> Leader() override {
    etcdserverpb::RangeRequest req;
    req.set_key(o_.key);
    etcdserverpb::RangeResponse resp;
    MUSTER_RETURN_IF_ERROR(Call("range", [&](size_t i, grpc::ClientContext* ctx) {
      return endpoints_[i].kv->Range(ctx, req, &resp);
    }));
    if (resp.kvs_size() == 0) return NotFound("no controller leads (" + o_.key + " is not set)");
    return Of(resp.kvs(0));
  }

  Result<Leadership> Campaign(std::function<void()> on_lost) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      on_lost_ = std::move(on_lost);
    }
    bool warned = false;
    while (!stop_) {
      Result<Leadership> won = TryOnce();
      if (won.ok()) return won;
      if (won.status().code() != StatusCode::kUnavailable &&
          won.status().code() != StatusCode::kAlreadyExists &&
          won.status().code() != StatusCode::kFailedPrecondition) {
        return won.status();
      }
      // Once per outage, not at every poll.
      const bool unavailable = won.status().code() == StatusCode::kUnavailable;
      if (unavailable && !warned) spdlog::warn("leader election: {}", won.status().message());
      warned = unavailable;
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait_for(lock, o_.poll, [&] { return stop_.load(); });
    }
    return Status{StatusCode::kCancelled, "the campaign was stopped"};
  }

  int64_t observed_epoch() const override { return seen_epoch_; }

  bool leading() const override {
    if (!leading_) return false;
    std::lock_guard<std::mutex> lock(mu_);
    return Clock::now() < confirmed_at_ + ttl_ - ttl_ / 10;
  }

  Status RecordInSync(const std::string& name, bool in_sync) override {
    if (o_.state_prefix.empty()) return FailedPrecondition("leader election: no state_prefix");
    int64_t epoch = epoch_;
    if (!leading() || epoch == 0) return FailedPrecondition("this controller no longer leads");
    etcdserverpb::TxnRequest txn;
    etcdserverpb::Compare* c = txn.add_compare();
    c->set_key(o_.key);
    c->set_target(etcdserverpb::Compare::CREATE);
    c->set_result(etcdserverpb::Compare::EQUAL);
    c->set_create_revision(epoch);  // our leader key, not a later leader's
    const std::string key = o_.state_prefix + "insync/" + name;
    if (in_sync) {
      etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
      put->set_key(key);
      put->set_value(std::to_string(epoch));
    } else {
      txn.add_success()->mutable_request_delete_range()->set_key(key);
    }
    etcdserverpb::TxnResponse resp;
    MUSTER_RETURN_IF_ERROR(Call("txn", [&](size_t i, grpc::ClientContext* ctx) {
      return endpoints_[i].kv->Txn(ctx, txn, &resp);
    }));
    if (!resp.succeeded()) {
      return FailedPrecondition("this controller no longer leads (epoch " + std::to_string(epoch) +
                                " is gone from etcd)");
    }
    return Status::Ok();
  }

  void Resign() override {
    int64_t lease = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      lease = lease_;
      lease_ = 0;
      leading_ = false;
      epoch_ = 0;
    }
    StopKeepAlive();
    StopWatch();
    if (lease == 0) return;
    etcdserverpb::LeaseRevokeRequest req;
    req.set_id(lease);
    etcdserverpb::LeaseRevokeResponse resp;
    Status st = Call("lease revoke", [&](size_t i, grpc::ClientContext* ctx) {
      return endpoints_[i].lease->LeaseRevoke(ctx, req, &resp);
    });
    if (!st.ok()) spdlog::warn("leader election: resigning: {}", st.message());
  }

  void Stop() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    StopKeepAlive();
    StopWatch();
    leading_ = false;
  }

 private:
  struct Endpoint {
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
    std::unique_ptr<etcdserverpb::Watch::Stub> watch;
  };

  static Leadership Of(const etcdserverpb::KeyValue& kv) {
    return Leadership{kv.value(), kv.create_revision(), kv.lease()};
  }

  // One call, tried on each endpoint in turn from the last that answered, until one does.
  template <typename Fn>
  Status Call(const std::string& what, Fn fn) {
    Status last = Unavailable("no etcd endpoint configured");
    for (size_t n = 0; n < endpoints_.size(); ++n) {
      const size_t i = (current_ + n) % endpoints_.size();
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + o_.rpc_timeout);
      ctx.set_wait_for_ready(true);  // a connection being made again is waited for, in time
      grpc::Status s = fn(i, &ctx);
      if (s.ok()) {
        current_ = i;
        return Status::Ok();
      }
      last = FromGrpc(s, what + " at " + o_.endpoints[i]);
      if (last.code() != StatusCode::kUnavailable) return last;
    }
    return last;
  }

  // A lease of our own: the one we have while etcd keeps it, else a new one with keep-alives.
  Result<int64_t> OurLease() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (lease_ != 0) return lease_;
    }
    StopKeepAlive();  // a previous lease's thread, if its lease expired
    etcdserverpb::LeaseGrantRequest req;
    req.set_ttl(o_.ttl_s);
    etcdserverpb::LeaseGrantResponse resp;
    const Clock::time_point sent = Clock::now();
    MUSTER_RETURN_IF_ERROR(Call("lease grant", [&](size_t i, grpc::ClientContext* ctx) {
      return endpoints_[i].lease->LeaseGrant(ctx, req, &resp);
    }));
    if (!resp.error().empty() || resp.id() == 0) {
      return Internal("etcd refused a lease: " + resp.error());
    }
    std::lock_guard<std::mutex> lock(mu_);
    lease_ = resp.id();
    ttl_ = std::chrono::seconds(resp.ttl() > 0 ? resp.ttl() : o_.ttl_s);
    confirmed_at_ = sent;
    keep_alive_stop_ = false;
    keep_alive_ = std::thread([this, lease = lease_] { KeepAlive(lease); });
    return lease_;
  }

  // The leader key, unless someone has it; with state_prefix, only for a candidate that may lead.
  etcdserverpb::TxnRequest TakeLeadTxn(int64_t lease, bool first_ever) const {
    etcdserverpb::TxnRequest txn;
    etcdserverpb::Compare* c = txn.add_compare();
    c->set_key(o_.key);
    c->set_target(etcdserverpb::Compare::CREATE);
    c->set_result(etcdserverpb::Compare::EQUAL);
    c->set_create_revision(0);  // the key does not exist
    etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
    put->set_key(o_.key);
    put->set_value(o_.candidate);
    put->set_lease(lease);
    txn.add_failure()->mutable_request_range()->set_key(o_.key);
    if (o_.state_prefix.empty()) return txn;
    const std::string initialized = o_.state_prefix + "initialized";
    const std::string insync = o_.state_prefix + "insync/";
    const std::string mine = insync + o_.candidate;
    c = txn.add_compare();
    c->set_target(etcdserverpb::Compare::CREATE);
    if (first_ever) {
      c->set_key(initialized);
      c->set_result(etcdserverpb::Compare::EQUAL);
      c->set_create_revision(0);
    } else {
      c->set_key(mine);
      c->set_result(etcdserverpb::Compare::GREATER);
      c->set_create_revision(0);
    }
    put = txn.add_success()->mutable_request_put();
    put->set_key(initialized);
    put->set_value(o_.candidate);
    put = txn.add_success()->mutable_request_put();
    put->set_key(mine);
    put->set_value("leader");
    // Everyone else out of the in-sync set: the two ranges either side of our own key (etcd
    // refuses a put and a delete of the same key in one transaction).
    etcdserverpb::DeleteRangeRequest* below = txn.add_success()->mutable_request_delete_range();
    below->set_key(insync);
    below->set_range_end(mine);
    etcdserverpb::DeleteRangeRequest* above = txn.add_success()->mutable_request_delete_range();
    above->set_key(mine + std::string(1, '\0'));
    std::string end = insync;
    end.back() = static_cast<char>(end.back() + 1);  // just past every key under insync/
    above->set_range_end(end);
    return txn;
  }

  // kAlreadyExists: someone else leads (logged once per leader); kFailedPrecondition: no one
  // leads but this candidate may not (not in sync).
  Result<Leadership> TryOnce() {
    MUSTER_ASSIGN_OR_RETURN(int64_t lease, OurLease());
    etcdserverpb::TxnResponse resp;
    CampaignVerdict verdict;
    bool first_ever = false;
    while (true) {
      const etcdserverpb::TxnRequest txn = TakeLeadTxn(lease, first_ever);
      resp.Clear();
      Status st = Call("txn", [&](size_t i, grpc::ClientContext* ctx) {
        return endpoints_[i].kv->Txn(ctx, txn, &resp);
      });
      if (st.code() == StatusCode::kNotFound) {  // our lease expired in between: a new one
        std::lock_guard<std::mutex> lock(mu_);
        if (lease_ == lease) lease_ = 0;
        return Unavailable(st.message());
      }
      MUSTER_RETURN_IF_ERROR(st);
      verdict = JudgeCampaign(resp, lease, o_.candidate);
      if (verdict.kind != CampaignVerdict::kNobodyLeads || o_.state_prefix.empty()) break;
      if (first_ever) {
        if (!refused_logged_) {
          spdlog::warn(
              "leader election: no controller leads, and {} may not take over: it is not in "
              "sync with the last leader (a standby that had every acknowledged change must, "
              "or that leader must come back)",
              o_.candidate);
          refused_logged_ = true;
        }
        return FailedPrecondition(o_.candidate + " is not in sync");
      }
      first_ever = true;  // not in sync: only a cluster that never had a leader would do
    }
    const Leadership& now = verdict.leader;
    switch (verdict.kind) {
      case CampaignVerdict::kWeLead:
        break;
      case CampaignVerdict::kForeignKey:
        refused_logged_ = false;
        RemoveForeignKey(now.leader, verdict.mod_revision);
        return Unavailable("removed a leader key no candidate wrote; campaigning again");
      case CampaignVerdict::kOtherLeads:
        refused_logged_ = false;
        if (!IsCandidate(now.leader) && now.epoch != unknown_epoch_) {
          // Perhaps a controller of a newer config (one being rolled out): said, and waited out
          // like any leader, never removed (that would depose a rightful one).
          spdlog::error(
              "leader election: the leader key {} names '{}', which is not among [[controllers]] "
              "here; {} keeps campaigning until its lease ends (a config not yet updated here, "
              "or another etcd client: check who holds etcd's client certificates)",
              o_.key, Printable(now.leader), o_.candidate);
          unknown_epoch_ = now.epoch;
        }
        if (now.epoch != seen_epoch_) {
          spdlog::info("leader election: {} leads (epoch {}); {} stands by", Printable(now.leader),
                       now.epoch, o_.candidate);
          seen_epoch_ = now.epoch;
        }
        return AlreadyExists(Printable(now.leader) + " leads");
      case CampaignVerdict::kNobodyLeads:
      case CampaignVerdict::kUnclear:
        return Unavailable("the leader key changed under the election; trying again");
    }
    {
      // Only while the lease is still being kept alive: a keep-alive that gave it up in the
      // meantime would never tell us we lost the lead.
      std::lock_guard<std::mutex> lock(mu_);
      if (lease_ != lease) return Unavailable("our lease lapsed while we took the lead; again");
      leading_ = true;
      epoch_ = now.epoch;
    }
    StartWatch(now.epoch, lease);
    spdlog::info("leader election: {} leads (epoch {})", o_.candidate, now.epoch);
    return now;
  }

  bool IsCandidate(const std::string& name) const {
    return o_.candidates.empty() ||
           std::find(o_.candidates.begin(), o_.candidates.end(), name) != o_.candidates.end();
  }

  // Deletes that very key (the same modification only: a candidate's key written meanwhile
  // stays), saying so.
  void RemoveForeignKey(const std::string& names, int64_t mod_revision) {
    spdlog::error(
        "leader election: the leader key {} names '{}' and has no lease: no candidate wrote it "
        "(another etcd client did; check who holds etcd's client certificates). {} removes it "
        "and campaigns on",
        o_.key, Printable(names), o_.candidate);
    etcdserverpb::TxnRequest txn;
    etcdserverpb::Compare* c = txn.add_compare();
    c->set_key(o_.key);
    c->set_target(etcdserverpb::Compare::MOD);
    c->set_result(etcdserverpb::Compare::EQUAL);
    c->set_mod_revision(mod_revision);
    txn.add_success()->mutable_request_delete_range()->set_key(o_.key);
    etcdserverpb::TxnResponse resp;
    Status st = Call("txn", [&](size_t i, grpc::ClientContext* ctx) {
      return endpoints_[i].kv->Txn(ctx, txn, &resp);
    });
    if (!st.ok()) spdlog::warn("leader election: removing the foreign key: {}", st.message());
  }

  // The lead is gone (the lease, or the key): once, whoever notices first. With revoke (the key
  // changed while the lease lives on), the lease is given up too rather than kept renewed.
  void LoseLead(int64_t lease, const std::string& why, bool revoke = false) {
    std::function<void()> lost;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (lease_ == lease) lease_ = 0;
      if (leading_.exchange(false)) lost = on_lost_;
    }
    spdlog::warn("leader election: {} lost the lead ({})", o_.candidate, why);
    if (revoke) {
      StopKeepAlive();
      etcdserverpb::LeaseRevokeRequest req;
      req.set_id(lease);
      etcdserverpb::LeaseRevokeResponse resp;
      Status st = Call("lease revoke", [&](size_t i, grpc::ClientContext* ctx) {
        return endpoints_[i].lease->LeaseRevoke(ctx, req, &resp);
      });
      if (!st.ok()) spdlog::warn("leader election: giving up the lease: {}", st.message());
    }
    if (lost) lost();
  }

  void StartWatch(int64_t epoch, int64_t lease) {
    StopWatch();
    std::lock_guard<std::mutex> thread_lock(watch_thread_mu_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      watch_stop_ = false;
    }
    watch_ = std::thread([this, epoch, lease] { WatchKey(epoch, lease); });
  }

  void StopWatch() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      watch_stop_ = true;
      if (watch_ctx_) watch_ctx_->TryCancel();
    }
    wake_.notify_all();
    std::lock_guard<std::mutex> thread_lock(watch_thread_mu_);
    if (watch_.joinable() && watch_.get_id() != std::this_thread::get_id()) watch_.join();
  }

  // While leading: the leader key must stay the one we created (epoch), under our lease, never
  // modified. Checked by a read, then watched from the read's revision on: any event on the key
  // ends the lead at once. An etcd that does not answer is the keep-alive's business (the lease
  // runs out); the watch just starts again.
  void WatchKey(int64_t epoch, int64_t lease) {
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (watch_stop_ || stop_) return;
      }
      etcdserverpb::RangeRequest read;
      read.set_key(o_.key);
      etcdserverpb::RangeResponse now;
      Status st = Call("range", [&](size_t i, grpc::ClientContext* ctx) {
        return endpoints_[i].kv->Range(ctx, read, &now);
      });
      if (st.ok()) {
        if (std::string lost = LeadLostInRead(now, epoch, lease); !lost.empty()) {
          return LoseLead(lease, lost, true);
        }
        grpc::ClientContext ctx;
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (watch_stop_ || stop_) return;
          watch_ctx_ = &ctx;
        }
        auto stream = endpoints_[current_].watch->Watch(&ctx);
        etcdserverpb::WatchRequest create;
        create.mutable_create_request()->set_key(o_.key);
        create.mutable_create_request()->set_start_revision(now.header().revision() + 1);
        etcdserverpb::WatchResponse event;
        WatchVerdict verdict = WatchVerdict::kRestart;
        if (stream->Write(create)) {
          while (stream->Read(&event)) {
            verdict = JudgeWatch(event);
            if (verdict != WatchVerdict::kKeepWatching) break;
          }
        }
        ctx.TryCancel();
        stream->Finish();
        {
          std::lock_guard<std::mutex> lock(mu_);
          watch_ctx_ = nullptr;
        }
        if (verdict == WatchVerdict::kDeleted || verdict == WatchVerdict::kOverwritten) {
          return LoseLead(lease,
                          verdict == WatchVerdict::kDeleted ? "the leader key was deleted"
                                                            : "the leader key was overwritten",
                          true);
        }
      }
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait_for(lock, std::chrono::milliseconds(100),
                     [&] { return watch_stop_ || stop_.load(); });
    }
  }

  // Renews `lease` every third of its TTL, one short stream per renewal, until told to stop.
  // The lead is lost when etcd says the lease is gone, or when nine tenths of a TTL have passed
  // since the last renewal it confirmed was sent: etcd counts the TTL from when it received
  // that renewal, so the leader stops believing it leads before etcd can hand the key on.
  void KeepAlive(int64_t lease) {
    Clock::time_point next = Clock::now();
    int64_t granted = -1;
    while (true) {
      Clock::time_point give_up;
      std::chrono::milliseconds ttl;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ttl = ttl_;
        give_up = confirmed_at_ + ttl - ttl / 10;
        if (granted > 0) next = confirmed_at_ + ttl / 3;
        wake_.wait_until(lock, std::min(next, give_up),
                         [&] { return keep_alive_stop_ || stop_.load(); });
        if (keep_alive_stop_ || stop_) return;
      }
      const Clock::time_point sent = Clock::now();
      if (sent >= give_up) break;
      granted = -1;
      {
        grpc::ClientContext ctx;
        const auto left = std::min<Clock::duration>(o_.rpc_timeout, give_up - sent);
        ctx.set_deadline(std::chrono::system_clock::now() + left);
        auto stream = endpoints_[current_].lease->LeaseKeepAlive(&ctx);
        etcdserverpb::LeaseKeepAliveRequest req;
        req.set_id(lease);
        etcdserverpb::LeaseKeepAliveResponse resp;
        if (stream->Write(req) && stream->Read(&resp)) granted = JudgeKeepAlive(resp, lease);
        stream->WritesDone();
        stream->Finish().ok();
      }
      if (granted == 0) break;  // etcd no longer has it
      if (granted > 0) {
        std::lock_guard<std::mutex> lock(mu_);
        confirmed_at_ = sent;
        continue;
      }
      current_ = (current_ + 1) % endpoints_.size();  // no answer: the next endpoint, soon
      next = Clock::now() + std::chrono::milliseconds(100);
    }
    LoseLead(lease, "its lease " + std::to_string(lease) + ": " +
                        (granted == 0 ? "etcd let it expire" : "etcd did not confirm it in time"));
  }

  void StopKeepAlive() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      keep_alive_stop_ = true;
    }
    wake_.notify_all();
    if (keep_alive_.joinable() && keep_alive_.get_id() != std::this_thread::get_id()) {
      keep_alive_.join();
    }
  }

  const EtcdElectionOptions o_;
  std::vector<Endpoint> endpoints_;
  std::atomic<size_t> current_{0};
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> leading_{false};
  std::atomic<int64_t> epoch_{0};  // our leader key's create revision while we lead
  bool keep_alive_stop_ = false;
  int64_t lease_ = 0;  // guarded by mu_
  std::chrono::milliseconds ttl_{0};
  Clock::time_point confirmed_at_;
  std::function<void()> on_lost_;
  std::thread keep_alive_;
  std::mutex watch_thread_mu_;  // guards watch_ (the thread object); never taken under mu_
  std::thread watch_;
  bool watch_stop_ = false;                   // guarded by mu_
  grpc::ClientContext* watch_ctx_ = nullptr;  // guarded by mu_: the watch in progress
  std::atomic<int64_t> seen_epoch_{0};        // written by Campaign's thread
  int64_t unknown_epoch_ = 0;    // Campaign's thread only: a foreign leader already reported
  bool refused_logged_ = false;  // Campaign's thread only
};

}  // namespace

Result<std::unique_ptr<EtcdElection>> EtcdElection::Create(EtcdElectionOptions o) {
  if (o.endpoints.empty()) return InvalidArgument("leader election: no etcd endpoints");
  if (!o.tls) {
    return InvalidArgument(
        "leader election: etcd must know its clients: no TLS identity for etcd (controller "
        "etcd_ca_file, etcd_cert_file, etcd_key_file)");
  }
  if (o.candidate.empty()) return InvalidArgument("leader election: no candidate address");
  if (o.ttl_s < 1 || o.ttl_s > 60) return InvalidArgument("leader election: ttl_s must be 1-60");
  return std::unique_ptr<EtcdElection>(new EtcdElectionImpl(std::move(o)));
}

}  // namespace muster::ha
