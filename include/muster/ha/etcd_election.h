// Leader election among controllers through etcd (its v3 API over gRPC): a lease-held leader
// key. Whoever creates the key leads while its lease lives; the key's create revision, which
// etcd makes larger for every later leader, is the fencing epoch that leader stamps on what it
// sends, so that a former leader that comes back finds its commands refused.
//
// A candidate grants itself a lease (ttl_s), then tries a guarded write: "if the key does not
// exist, create it with my address under my lease". It leads when that succeeds; otherwise it
// learns who leads and tries again when that leader's key is gone (its lease expired: it died,
// froze or lost etcd; or it resigned). A leader keeps its lease alive from a thread of its own
// and knows it lost the lead when etcd says the lease is gone or does not answer within the TTL,
// and it watches its key from another: a key changed or deleted under it (only an etcd client
// other than a candidate could) ends the lead at once.
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "muster/common/status.h"
#include "muster/common/tls_files.h"

namespace muster::ha {

struct EtcdElectionOptions {
  std::vector<std::string> endpoints;  // host:port of etcd's client URLs; tried in turn
  // etcd's CA and the client certificate this candidate presents (etcd runs with
  // --client-cert-auth): required, since an etcd that answers anyone lets any user on its host
  // stop or split the election. etcd's certificate must name tls_server_name.
  std::optional<TlsIdentity> tls;
  std::string tls_server_name = "etcd";
  // The candidates that may lead ([[controllers]]). A leader key naming anyone else, or held by
  // no lease, was not written by a candidate: it is said and removed, and the campaign goes on.
  // Empty: any value is a candidate's.
  std::vector<std::string> candidates;
  std::string key = "/muster/controller/leader";
  std::string candidate;  // this controller's address, the leader key's value
  int64_t ttl_s = 2;      // the lease: how long a leader that stops answering still leads
  // How often a follower looks whether the leader key is still there.
  std::chrono::milliseconds poll{200};
  std::chrono::milliseconds rpc_timeout{1000};
  // A hot standby's rule; empty: any candidate may lead. With it, a candidate takes the lead only
  // while `<state_prefix>insync/<candidate>` exists (the leader recorded that it has every change
  // acknowledged so far), or before anyone ever led (`<state_prefix>initialized` absent). The
  // winner records both, and that no one else is in sync (their copies are about to fall behind).
  std::string state_prefix;
};

struct Leadership {
  std::string leader;  // the leader key's value (its controller's address)
  int64_t epoch = 0;   // the leader key's create revision: the fencing epoch
  int64_t lease = 0;
};

class EtcdElection {
 public:
  static Result<std::unique_ptr<EtcdElection>> Create(EtcdElectionOptions options);
  virtual ~EtcdElection() = default;

  // Who leads now; NOT_FOUND when no one does, UNAVAILABLE when etcd cannot be reached.
  virtual Result<Leadership> Leader() = 0;
  // Returns once this candidate leads (its epoch), or CANCELLED once Stop was called;
  // UNAVAILABLE errors from etcd are retried until then. `on_lost` runs (on the keep-alive
  // or watch thread) when the lead is lost afterwards: etcd says the lease is gone, it went a
  // whole TTL without confirming it, or the leader key changed or vanished.
  // `on_lost` must not call back into the election (it runs on the election's own threads,
  // which Stop and Resign join): it should only signal the owner.
  virtual Result<Leadership> Campaign(std::function<void()> on_lost) = 0;
  // Whether this candidate still leads, as far as it knows: false from the moment a TTL may have
  // passed since etcd last confirmed its lease, even before the keep-alive thread notices.
  virtual bool leading() const = 0;
  // The epoch of the leader this candidate last saw leading while it campaigned (0: none yet):
  // that a standby is waiting behind that leader.
  virtual int64_t observed_epoch() const = 0;
  // The leader records whether standby `name` is in sync (with state_prefix). Refused
  // (FAILED_PRECONDITION) once this candidate no longer leads; UNAVAILABLE when etcd is away.
  virtual Status RecordInSync(const std::string& name, bool in_sync) = 0;
  // Gives the lead up at once (revokes the lease: the key goes with it), so that a standby
  // takes over without waiting for the TTL.
  virtual void Resign() = 0;
  // Ends a Campaign in progress and the keep-alives, without revoking (as a crash would).
  virtual void Stop() = 0;
};

}  // namespace muster::ha
