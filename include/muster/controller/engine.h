// The controller's state and logic, as a facade over its managers (src/controller/):
//
//   JobManager        the job table, the one writer of job records, the job state machine
//                     (job_state_machine.cc), arrays, agents' job reports, stored bytes
//   NodeManager       registration, sessions, liveness, drain/resume, health
//   ResourceLedger    what each job holds on each node; the only place resources change hands
//   SchedulerLoop     the pass (prepare / compute / apply), mechanism only, --test-only
//   PassPolicy        what the pass asks policy, in order (DefaultPassPolicy is Muster's)
//   ClusterViews      the live and capacity views, "can it ever run"
//   SubmissionPipeline  a submission's named stages
//   StepManager       srun steps inside allocations (layout in core/step_layout)
//   AllocationManager srun/salloc allocations and their clients
//   JobModifier       scontrol update and top of pending jobs
//   AccountManager, QosManager, FairShare, LimitTracker, QuotaBook, ReservationManager,
//   DependencyTracker, Preemptor    the policy managers (the default policy asks them)
//   JobViews, NodeViews, JobExplainer   what clients see
//   AuditLog, HistoryRetention      what is kept, and for how long
// Who may do what is decided by the access rules (muster/controller/access.h) alone.
//
// Deterministic: it consumes events (user requests, agent messages, Tick(now)) and produces replies
// plus commands for agents (TakeOutgoing). It reads no clock, opens no socket and knows no gRPC,
// so the daemon, the tests and the benchmarks drive the same code; the ControllerRunner
// (controller_runner.h) owns it on a strand. Every state change is committed to the StateStore
// before the reply or command that depends on it leaves the engine (write-ahead).
//
// Strand-confined: call every method from one thread (the controller strand) at a time.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "muster/common/clock.h"
#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/controller/cluster_metrics.h"
#include "muster/core/types.h"
#include "muster/store/state_store.h"
#include "muster/v1/controller.pb.h"
#include "muster/v1/node.pb.h"
#include "muster/v1/records.pb.h"

namespace muster::controller {

// Who is asking, as established by the transport: SO_PEERCRED on the Unix socket, a MUNGE
// credential over TCP. Only the access rules (access.h) read the admin and operator flags.
struct Caller {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::string user;
  bool is_admin = false;     // root or listed in the config's admins
  bool is_operator = false;  // listed in the config's operators: drains and resumes nodes
  std::string origin;        // "local" or the client's address (the audit log says it)
};

// A command for one node's agent, or (close_session) an order to drop its session so that the
// agent registers again and reports what it still runs.
struct Outgoing {
  std::string node;
  v1::ControllerMessage message;
  bool close_session = false;
  std::string close_reason;  // what the agent is told; empty: its node was declared down
};

// A mail a job's --mail-type asked for (Slurm's MailProg): what goes out once the change behind
// it is durable, on the active controller only. The daemon runs the configured mail_prog as
// `mail_prog -s SUBJECT RECIPIENT` with `env` (SLURM_JOB_* and SLURM_ARRAY_*) added to a fixed one.
struct MailNotice {
  uint64_t job_id = 0;
  std::string recipient;
  std::string subject;
  std::vector<std::pair<std::string, std::string>> env;
};

struct EngineOptions {
  // The config file's; the engine lays the partitions changed live (stored) over it.
  Config config;
  // Produces job credentials; tests inject a deterministic one.
  std::function<std::string()> make_credential;
  // The epoch is at least this (a leader elected through etcd: the leader key's revision), so
  // that agents refuse a former leader that comes back.
  uint64_t min_epoch = 0;
};

// squeue's rows, visited in id order. `row` holds what changes as the job runs; for a brief list
// `spec_fields` holds the rest, a JobInfo's encoded fields kept per job (squeue reads 10,000
// rows at a time). A row's full encoding is spec_fields followed by row's own encoding (for a
// field present in both, the later value wins); for a full list spec_fields is empty.
// Returns false when the page is full: the listing stops after that row.
using JobRowVisitor = std::function<bool(const v1::JobInfo& row, std::string_view spec_fields)>;

class AllocationManager;
class ClusterViews;
class EngineContext;
class HistoryRetention;
class AuditLog;
class AccountManager;
class LicenseBook;
class LimitTracker;
class Preemptor;
class QuotaBook;
class QosManager;
class ReservationManager;
class FairShare;
class DependencyTracker;
class JobExplainer;
class JobModifier;
class JobMail;
class JobManager;
class JobViews;
class NodeManager;
class NodeViews;
class PassPolicy;
class ResourceLedger;
class SchedulerLoop;
class StepManager;
class SubmissionPipeline;

class Engine {
 public:
  // Loads the durable state, starts a new epoch (persisted before returning) and rebuilds
  // allocations of running jobs. Corrupt records are reported in recovery_problems().
  static Result<std::unique_ptr<Engine>> Create(EngineOptions options, store::StateStore* store,
                                                TimeMs now);
  ~Engine();

  // ---- User and admin API: one handler layer for every transport. ----
  // Errors: INVALID_ARGUMENT (malformed request), NOT_FOUND (unknown partition),
  // FAILED_PRECONDITION (can never run here, with what to change), RESOURCE_EXHAUSTED (queue
  // full), INTERNAL (the state store failed; nothing was accepted).
  Result<v1::SubmitJobResponse> SubmitJob(const Caller& caller, const v1::SubmitJobRequest& req,
                                          TimeMs now);
  // Per-job results: NOT_FOUND, PERMISSION_DENIED (not your job), or OK.
  Result<v1::CancelJobResponse> CancelJob(const Caller& caller, const v1::CancelJobRequest& req,
                                          TimeMs now);
  // Every read of jobs is on a caller's behalf and sees what the caller may (private_data =
  // ["jobs"]: only their own; admins and operators everything): a listing is narrowed to the
  // caller's jobs, one job that is another's is PERMISSION_DENIED. There is no read without a
  // caller, so a transport cannot forget to ask.
  Result<v1::GetJobResponse> GetJob(const Caller& caller, const v1::GetJobRequest& req) const;
  // squeue: the matching jobs' rows after req.after_id, in id order, to `visit` (the transport
  // encodes them) until it says the page is full. Returns the last row's id when it stopped
  // early (the next page's after_id), 0 when the listing is complete.
  uint64_t VisitJobs(const Caller& caller, const v1::ListJobsRequest& req,
                     const JobRowVisitor& visit) const;
  // The same rows as one message, every page (tests and callers that want the structure).
  Result<v1::ListJobsResponse> ListJobs(const Caller& caller, const v1::ListJobsRequest& req) const;
  // With private_data jobs, a node lists only the caller's jobs on it.
  Result<v1::ListNodesResponse> ListNodes(const Caller& caller, const v1::ListNodesRequest& req,
                                          TimeMs now) const;
  // PERMISSION_DENIED for non-admins; INVALID_ARGUMENT for a drain without reason or a resume of a
  // node that is neither drained nor down; NOT_FOUND for unknown nodes.
  Result<v1::UpdateNodeResponse> UpdateNode(const Caller& caller, const v1::UpdateNodeRequest& req,
                                            TimeMs now);
  Result<v1::ControllerInfoResponse> ControllerInfo() const;
  // sdiag's counts (the timings are the runner's): nodes, responding ones, jobs, and who
  // stores the most scripts (admins and operators see the top users, others their own row).
  void FillDiagnostics(const Caller& caller, v1::DiagnosticsResponse* resp) const;
  // Everything Prometheus scrapes from the engine (the runner adds its timings).
  ClusterMetrics Metrics() const;
  // A step inside a running job (see StepManager). UNAVAILABLE while the job pends, its nodes are
  // still starting, or other steps hold what it needs ("Requested nodes are busy": the client
  // retries); FAILED_PRECONDITION when the job can never hold it; PERMISSION_DENIED unless it is
  // the caller's.
  Result<v1::CreateStepResponse> CreateStep(const Caller& caller, const v1::CreateStepRequest& req,
                                            TimeMs now);
  // Interactive allocations (srun/salloc outside a job). Release ends one (its client is done);
  // Attach binds it to the caller's connection, and AllocationClientGone (the transport saw that
  // connection close) ends it.
  Result<v1::ReleaseAllocationResponse> ReleaseAllocation(const Caller& caller,
                                                          const v1::ReleaseAllocationRequest& req,
                                                          TimeMs now);
  Result<v1::AttachAllocationResponse> AttachAllocation(const Caller& caller,
                                                        const v1::AttachAllocationRequest& req,
                                                        TimeMs now);
  void AllocationClientGone(uint64_t job_id, TimeMs now);
  // scontrol hold/release/requeue. Per-job results: NOT_FOUND, PERMISSION_DENIED, or
  // FAILED_PRECONDITION (not pending / not running / not requeueable).
  Result<v1::UpdateJobResponse> UpdateJob(const Caller& caller, const v1::UpdateJobRequest& req,
                                          TimeMs now);
  // muster explain: why a pending job waits (see JobExplainer). NOT_FOUND for unknown jobs.
  Result<v1::ExplainJobResponse> ExplainJob(const Caller& caller, const v1::ExplainJobRequest& req,
                                            TimeMs now) const;
  // Accounts and users' associations (admins change them; everyone may list them).
  Result<v1::UpdateAccountResponse> UpdateAccount(const Caller& caller,
                                                  const v1::UpdateAccountRequest& req, TimeMs now);
  Result<v1::UpdateUserResponse> UpdateUser(const Caller& caller, const v1::UpdateUserRequest& req,
                                            TimeMs now);
  // With the QoS; what private_data hides from the caller left out.
  Result<v1::ListAccountsResponse> ListAccounts(const Caller& caller) const;
  Result<v1::UpdateQosResponse> UpdateQos(const Caller& caller, const v1::UpdateQosRequest& req,
                                          TimeMs now);
  // Advance reservations (admins change them; everyone may list them).
  Result<v1::UpdateReservationResponse> UpdateReservation(const Caller& caller,
                                                          const v1::UpdateReservationRequest& req,
                                                          TimeMs now);
  // With private_data users (or accounts), a reservation lists only the caller among its users
  // (or only the caller's accounts).
  Result<v1::ListReservationsResponse> ListReservations(const Caller& caller,
                                                        const v1::ListReservationsRequest& req,
                                                        TimeMs now) const;
  // sshare: the fair-share tree with each line's shares, usage and factor.
  Result<v1::ListSharesResponse> ListShares(const Caller& caller, const v1::ListSharesRequest& req,
                                            TimeMs now) const;
  // muster audit: the audit log (admins and operators).
  Result<v1::ListAuditResponse> ListAudit(const Caller& caller, const v1::ListAuditRequest& req,
                                          TimeMs now) const;
  // sacct: live jobs and the archived history (read from the store), filtered.
  Result<v1::ListAccountingResponse> ListAccounting(const Caller& caller,
                                                    const v1::ListAccountingRequest& req,
                                                    TimeMs now) const;
  // The same in two parts, so that scanning 100,000 archived jobs does not hold the controller:
  // PrepareAccounting reads the live jobs (on the strand); ScanAccounting adds the archived ones
  // from the store (any thread: the store's reads are thread-safe and see one snapshot).
  struct AccountingQuery {
    v1::ListAccountingRequest req;
    TimeMs end_ms = 0;
    // The matching live jobs after req.after_id: the first page's worth, and whether more
    // were left out.
    std::map<uint64_t, v1::JobInfo> live;
    bool live_more = false;
    store::StateStore* store = nullptr;
  };
  AccountingQuery PrepareAccounting(const Caller& caller, const v1::ListAccountingRequest& req,
                                    TimeMs now) const;
  static Result<v1::ListAccountingResponse> ScanAccounting(const AccountingQuery& query);

  // ---- Agents. ----
  // NOT_FOUND for a node the config does not define.
  Result<v1::RegisterResponse> RegisterNode(const v1::RegisterRequest& req, TimeMs now);
  // Binds a Session stream to a registered node; reconciles the jobs it reported at Register.
  // FAILED_PRECONDITION when the node has not registered with this instance id.
  Status AttachSession(const v1::Hello& hello, TimeMs now);
  void DetachSession(const std::string& node, const std::string& instance_id);
  void OnAgentMessage(const std::string& node, const v1::AgentMessage& msg, TimeMs now);

  // ---- Time. ----
  // Liveness sweep (NOT_RESPONDING, DOWN and the requeue of their jobs), allocations' limits,
  // and retention.
  void Tick(TimeMs now);
  // True when something happened that a scheduling pass should look at.
  bool schedule_requested() const;
  // A scheduling pass in three steps, so that the long middle one can run off the strand:
  // PreparePass resolves what the jobs themselves say (dependencies, deadlines), lets the pass
  // policy do what comes before a pass (fair-share decay, resuming suspended jobs) and snapshots
  // the nodes and the queue; ComputePass is the pure core (any thread, no access to the engine);
  // ApplyPass checks every start against the live state (the world may have moved on meanwhile),
  // commits the ones that still fit, and lets the policy act for those left waiting
  // (preemption).
  struct PassInput {
    TimeMs now = 0;
    core::ClusterView view;
    std::vector<core::PendingJob> queue;
    core::SchedulerConfig config;
  };
  // nullopt when no job can be considered.
  std::optional<PassInput> PreparePass(TimeMs now);
  static core::SchedulePass ComputePass(const PassInput& in);
  void ApplyPass(const core::SchedulePass& pass, TimeMs now);
  // All three at once (tests, and callers that do not mind the wait).
  void RunSchedulePass(TimeMs now);

  std::vector<Outgoing> TakeOutgoing();
  // The mails decided since the last call (none unless controller.mail_prog is set); the runner
  // hands them to its mail sender once what they report is durable.
  std::vector<MailNotice> TakeMail();

  // ---- Reconfiguration (ControllerRunner::Reconfigure replaces the engine with one made from
  // the store under the new config, as a restart would). ----
  // FAILED_PRECONDITION, naming every conflict and the jobs behind it, when `next` would take
  // away what an active job names or holds: a partition, account, QoS or license it names, a
  // node it runs on, or node resources below what it holds there.
  Status CheckReconfiguration(const Config& next) const;
  // Writes what only memory holds yet (fair-share usage since the last flush).
  void PrepareHandOver(TimeMs now);
  // A replacement takes over the counters since the start (metrics, sdiag) and the start time.
  void ContinueFrom(const Engine& previous);
  // The audit log's entry for a reconfiguration (or an attempt): `detail` says what changed.
  void AuditReconfiguration(const Caller& caller, const std::string& source,
                            const std::string& detail, const Status& result, TimeMs now);

  // ---- Partitions changed live (`muster partition`, scontrol create|update|delete partition;
  // engine_partitions.cc). ControllerRunner::ChangePartition plans, commits, then replaces the
  // engine as a reconfiguration does. ----
  struct PartitionPlan {
    std::string name;
    std::optional<v1::PartitionRecord> record;  // none: the partition's record goes
    std::string summary;                        // "partition debug created"
    std::vector<v1::PartitionRecord> records;   // every stored record after the change
  };
  // PERMISSION_DENIED for non-admins; the change's own errors (partition_overlay.h); and
  // FAILED_PRECONDITION, naming the jobs, when it would take away what an active job names or
  // holds (as CheckReconfiguration).
  Result<PartitionPlan> PlanPartitionChange(const Caller& caller,
                                            const v1::UpdatePartitionRequest& req,
                                            TimeMs now) const;
  // Stores the change (and this engine's list of records follows it).
  Status CommitPartitionChange(const PartitionPlan& plan);
  void AuditPartitionChange(const Caller& caller, const v1::UpdatePartitionRequest& req,
                            const std::string& summary, const Status& result, TimeMs now);
  Result<v1::ListPartitionsResponse> ListPartitions(const Caller& caller) const;
  // The config file's, before the live partitions were laid over it (config() is with them).
  const Config& file_config() const { return file_config_; }
  const std::vector<v1::PartitionRecord>& partition_records() const { return partition_records_; }

  // ---- Node features, weights and GRES set live (`muster node update|reset`, scontrol update
  // NodeName= Features=/Weight=/Gres=; engine_node_settings.cc). ControllerRunner::ChangeNodes
  // plans, commits, then replaces the engine as for a partition. ----
  struct NodeSettingsPlan {
    std::vector<std::string> nodes;  // the nodes whose settings change
    // Their settings after the change (a node without an entry has none left).
    std::map<std::string, v1::NodeSettings> settings;
    std::string summary;  // "node1,node2: weight 10", for the audit log
  };
  // PERMISSION_DENIED for non-admins; the change's own errors (node_overlay.h); and
  // FAILED_PRECONDITION, naming the jobs, when a node would have less than its jobs hold.
  Result<NodeSettingsPlan> PlanNodeSettings(const Caller& caller, const v1::UpdateNodeRequest& req,
                                            TimeMs now) const;
  Status CommitNodeSettings(const NodeSettingsPlan& plan);
  void AuditNodeSettings(const Caller& caller, const v1::UpdateNodeRequest& req,
                         const std::string& summary, const Status& result, TimeMs now);
  // Every node's live settings, from the node records (nodes without any left out).
  std::map<std::string, v1::NodeSettings> node_settings() const;

  uint64_t epoch() const;
  TimeMs start_time_ms() const { return start_time_ms_; }
  const std::vector<std::string>& recovery_problems() const { return recovery_problems_; }
  const Config& config() const;

  // Invariant check for tests: the ledger's own invariants (no unit held twice, free maps equal
  // to the holdings), every holding matches its job's record, every running job holds all of its
  // (live) nodes, and the job walk order mirrors the table. The first violation, as INTERNAL.
  Status CheckInvariantsForTest() const;

 private:
  Engine(EngineOptions options, store::StateStore* store);
  // Privacy: a request narrowed to what the caller may read; PERMISSION_DENIED for one job
  // that is another's.
  v1::ListJobsRequest ScopedToCaller(const Caller& caller, const v1::ListJobsRequest& req) const;
  v1::ListAccountingRequest ScopedToCaller(const Caller& caller,
                                           const v1::ListAccountingRequest& req) const;
  Status CheckJobVisible(const Caller& caller, uint64_t job_id) const;
  Status Recover(store::LoadedState state, TimeMs now, uint64_t min_epoch);
  // Logs when the store's disk runs short of, or has again, room for new jobs (each tick).
  void WatchSpace();

  // One audit entry for what the caller did, or tried, to jobs that are not its own.
  void AuditForeignJobs(const Caller& caller, const std::string& action, const std::string& detail,
                        const google::protobuf::RepeatedPtrField<v1::CancelJobResult>& results,
                        TimeMs now);

  std::unique_ptr<EngineContext> ctx_;
  std::unique_ptr<ResourceLedger> ledger_;
  std::unique_ptr<NodeManager> nodes_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<JobMail> mail_;
  std::unique_ptr<StepManager> steps_;
  std::unique_ptr<AllocationManager> allocations_;
  std::unique_ptr<JobViews> job_views_;
  std::unique_ptr<NodeViews> node_views_;
  std::unique_ptr<HistoryRetention> history_;
  std::unique_ptr<AuditLog> audit_;
  std::unique_ptr<AccountManager> accounts_;
  std::unique_ptr<FairShare> fair_share_;
  std::unique_ptr<DependencyTracker> dependencies_;
  std::unique_ptr<QosManager> qos_;
  std::unique_ptr<ReservationManager> reservations_;
  std::unique_ptr<LimitTracker> limits_;
  std::unique_ptr<QuotaBook> quotas_;
  std::unique_ptr<ClusterViews> views_;
  std::unique_ptr<Preemptor> preemptor_;
  std::unique_ptr<LicenseBook> licenses_;
  std::unique_ptr<PassPolicy> policy_;  // DefaultPassPolicy
  std::unique_ptr<SchedulerLoop> scheduler_;
  std::unique_ptr<JobExplainer> explainer_;
  std::unique_ptr<JobModifier> modifier_;
  std::unique_ptr<SubmissionPipeline> submissions_;
  TimeMs start_time_ms_ = 0;
  Config file_config_;
  std::vector<v1::PartitionRecord> partition_records_;  // as stored, laid over file_config_
  std::vector<std::string> recovery_problems_;
  std::string space_problem_;  // why new jobs are refused (a nearly full disk); empty: they are not
};

}  // namespace muster::controller
