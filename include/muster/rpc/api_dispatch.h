// The one handler layer for the user API, whatever the transport: a method id and a serialized
// request in, a status and a serialized response out. The local socket server (and any other
// transport) only frames bytes and says who is calling; everything else happens here: parsing,
// the engine call on the controller's strand, encoding the reply, the allocations a connection
// holds (srun/salloc attach through it), and sacct's archive scan off the strand.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "muster/common/clock.h"
#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/controller/controller_runner.h"
#include "muster/controller/engine.h"

namespace muster::rpc {

struct ApiReply {
  Status status;
  std::string payload;  // serialized response when status is OK
};

// One client connection as the dispatch layer sees it: who it is, and the srun/salloc
// allocations attached through it (they end when it closes).
struct ClientSession {
  controller::Caller caller;
  std::string origin;                 // "local" (the Unix socket) or the TCP peer's address
  std::vector<uint64_t> allocations;  // strand-confined
};

// How the controller reads its config file again (the daemon's: the same file and
// [[controllers]] entry it started with).
using ConfigLoader = std::function<Result<Config>()>;

// Thread-safe entry points; the work runs on the runner's strand.
class ApiDispatcher {
 public:
  // `reconfigured` (optional) hears of each reconfiguration that took effect, on the strand.
  explicit ApiDispatcher(controller::ControllerRunner& runner, ConfigLoader load_config = nullptr,
                         std::function<void(const v1::ReconfigureResponse&)> reconfigured = nullptr)
      : runner_(runner),
        load_config_(std::move(load_config)),
        reconfigured_(std::move(reconfigured)) {}

  // One request. `done` gets the reply, on the strand (or on the query worker for sacct).
  // INVALID_ARGUMENT for a payload that does not parse, UNIMPLEMENTED for an unknown method,
  // INTERNAL for an unexpected exception (never fatal to the controller).
  void Dispatch(std::shared_ptr<ClientSession> session, uint32_t method, std::string payload,
                std::function<void(ApiReply)> done);
  // METHOD_WEB_LOGIN answers through this when the controller serves the web view (set before
  // any request; web/web_server.h). Without it the method is UNAVAILABLE.
  using WebLogin = std::function<Result<v1::WebLoginResponse>(const controller::Caller&)>;
  void SetWebLogin(WebLogin login) { web_login_ = std::move(login); }
  // The connection closed: the allocations it held end.
  void SessionClosed(std::shared_ptr<ClientSession> session);
  // scontrol reconfigure (METHOD_RECONFIGURE), and SIGHUP on the caller's behalf: reads the
  // config file again and hands it to ControllerRunner::Reconfigure (admins only; audited). The
  // allocations open connections hold are attached to the new engine. `done` runs on the
  // strand, once the new epoch is durable.
  void Reconfigure(const controller::Caller& caller,
                   std::function<void(Result<v1::ReconfigureResponse>)> done);

 private:
  Result<v1::ReconfigureResponse> ReconfigureOnStrand(const controller::Caller& asked_by);
  // muster partition ...: ControllerRunner::ChangePartition, then as after a reconfiguration.
  Result<v1::UpdatePartitionResponse> ChangePartitionOnStrand(
      const controller::Caller& asked_by, const v1::UpdatePartitionRequest& req);
  // muster node update|reset: ControllerRunner::ChangeNodes, then the same.
  Result<v1::UpdateNodeResponse> ChangeNodesOnStrand(const controller::Caller& asked_by,
                                                     const v1::UpdateNodeRequest& req);
  // What follows a change that replaced the engine: the open allocations reattached and the
  // server told the new epoch, as after a reconfiguration.
  void AfterEngineReplaced(TimeMs asked_at, uint64_t epoch);
  // After the engine was replaced: the allocations open connections hold, attached to the one
  // that now runs.
  void ReattachAllocations(TimeMs now);

  controller::ControllerRunner& runner_;
  WebLogin web_login_;
  ConfigLoader load_config_;
  std::function<void(const v1::ReconfigureResponse&)> reconfigured_;
  // Connections that attached allocations (strand-confined; expired ones are skipped).
  std::vector<std::weak_ptr<ClientSession>> holders_;
};

// The synchronous part of Dispatch, for every method but sacct's two-part scan. Strand-confined.
ApiReply DispatchApi(controller::Engine& engine, const controller::Caller& caller, uint32_t method,
                     const std::string& payload, TimeMs now);

// How many bytes of rows one page of a job listing holds (plus the row that crosses it). What a
// listing costs the controller, and what a client that asks and never reads makes it hold, is
// one page, however many jobs there are.
inline constexpr size_t kListPageBytes = 1 << 20;

// squeue's reply, a ListJobsResponse, built straight into bytes from the engine's rows (squeue
// asks for 10,000 jobs at a time, and a brief row is mostly bytes cached per job): one page,
// with next_after_id set when more follow. Only the rows `caller` may see.
std::string EncodeJobList(const controller::Engine& engine, const controller::Caller& caller,
                          const v1::ListJobsRequest& req, size_t page_bytes = kListPageBytes);

// Builds the caller from peer credentials: the user name from the passwd database, admin when
// root or listed (by name or uid) in config.admins. Thread-safe.
controller::Caller ResolveCaller(uint32_t uid, uint32_t gid, const Config& config);
// The caller's admin and operator flags as `config` lists them (each request takes them from
// the running config, so that a reconfiguration that removes an admin applies at once).
void ApplyRoles(controller::Caller& caller, const Config& config);

}  // namespace muster::rpc
