// One controller of a hot standby (controller.etcd_endpoints set). While another leads, it copies
// the leader's state into its own state directory (ReplicationFollower); when the leader is gone
// and this controller may take over (the leader recorded it as in sync, see EtcdElection), it
// wins the election and serves from that copy as a ControllerServer, with the leader key's
// revision as its epoch and its own standbys. It never goes back to standing by: a leader that
// loses the lead stops (musterctld exits, and systemd starts it again as a standby).
// Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "muster/common/clock.h"
#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/rpc/controller_server.h"

namespace muster::ha {

struct ControllerCandidateOptions {
  Config config;     // as this controller runs it (ConfigForController)
  std::string name;  // its [[controllers]] name: the leader key's value, its standby name
  int threads = 2;
  Clock* clock = SystemClock::Get();
  std::chrono::milliseconds ack_timeout{2000};  // a silent standby is dropped after this
};

class ControllerCandidate {
 public:
  // Validates options only; no I/O.
  static Result<std::unique_ptr<ControllerCandidate>> Create(ControllerCandidateOptions options);
  ~ControllerCandidate();

  // Opens the state directory and starts following and campaigning. FAILED_PRECONDITION when
  // the state directory is in use.
  Status Start();
  // Blocks until the candidate stopped: OK after Shutdown; ABORTED when it lost the lead; the
  // error when it won but could not serve.
  Status Wait();
  // Stops following or serving. A leader that `resign`s hands the lead on at once; one that does
  // not (as in a crash) leaves its standby to wait out its lease.
  void Shutdown(bool resign = true);

  bool leading() const;
  // While leading: the server (its ports, epoch, standbys in sync). Null otherwise.
  rpc::ControllerServer* server();
  // While standing by: the last change of the leader's applied here.
  uint64_t applied_seq() const;

 private:
  class Impl;
  explicit ControllerCandidate(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace muster::ha
