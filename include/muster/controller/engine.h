// The controller's state and logic: jobs, nodes, partitions and the scheduling loop.
//
// Deterministic: it consumes events (user requests, agent messages, Tick(now)) and produces replies
// plus effects (commands for agents, taken with TakeOutgoing()). It reads no clock, opens no socket
// and knows no gRPC, so the daemon, the in-process tests and the simulator all drive the same code.
// Every state change is committed to the StateStore before the reply or command that depends on it
// leaves the engine (write-ahead).
//
// Strand-confined: call every method from one thread (the controller strand) at a time.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "muster/common/clock.h"
#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/controller/partition_limits.h"
#include "muster/core/priority.h"
#include "muster/core/types.h"
#include "muster/store/state_store.h"
#include "muster/v1/controller.pb.h"
#include "muster/v1/node.pb.h"
#include "muster/v1/records.pb.h"

namespace muster::controller {

// Who is asking, as established by the transport (SO_PEERCRED on the Unix socket).
struct Caller {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::string user;
  bool is_admin = false;  // root or listed in the config's admins
};

// A command for one node's agent, or (close_session) an order to drop its session so that the
// agent registers again and reports what it still runs.
struct Outgoing {
  std::string node;
  v1::ControllerMessage message;
  bool close_session = false;
};

struct EngineOptions {
  Config config;
  // Produces job credentials; tests and the simulator inject a deterministic one.
  std::function<std::string()> make_credential;
};

class Engine {
 public:
  // Loads the durable state, starts a new epoch (persisted before returning) and rebuilds
  // allocations of running jobs. Corrupt records are reported in recovery_problems().
  static Result<std::unique_ptr<Engine>> Create(EngineOptions options, store::StateStore* store,
                                                TimeMs now);

  // ---- User and admin API: one handler layer for every transport. ----
  // Errors: INVALID_ARGUMENT (malformed request), NOT_FOUND (unknown partition),
  // FAILED_PRECONDITION (can never run here, with what to change), RESOURCE_EXHAUSTED (queue
  // full), INTERNAL (the state store failed; nothing was accepted).
  Result<v1::SubmitJobResponse> SubmitJob(const Caller& caller, const v1::SubmitJobRequest& req,
                                          TimeMs now);
  // Per-job results: NOT_FOUND, PERMISSION_DENIED (not your job), or OK.
  Result<v1::CancelJobResponse> CancelJob(const Caller& caller, const v1::CancelJobRequest& req,
                                          TimeMs now);
  Result<v1::GetJobResponse> GetJob(const v1::GetJobRequest& req) const;
  Result<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest& req) const;
  // The same, serialized (a ListJobsResponse, jobs in id order). Built straight into bytes:
  // squeue asks for 10,000 jobs at a time, and a brief row is mostly bytes cached per job.
  std::string ListJobsWire(const v1::ListJobsRequest& req) const;
  Result<v1::ListNodesResponse> ListNodes(const v1::ListNodesRequest& req, TimeMs now) const;
  // PERMISSION_DENIED for non-admins; INVALID_ARGUMENT for a drain without reason or a resume of a
  // node that is neither drained nor down; NOT_FOUND for unknown nodes.
  Result<v1::UpdateNodeResponse> UpdateNode(const Caller& caller, const v1::UpdateNodeRequest& req,
                                            TimeMs now);
  Result<v1::ControllerInfoResponse> ControllerInfo() const;
  // A step inside a running job (see engine_steps.cc for the layout rules). UNAVAILABLE while
  // the job pends, its nodes are still starting, or other steps hold what it needs ("Requested
  // nodes are busy": the client retries); FAILED_PRECONDITION when the job can never hold it;
  // PERMISSION_DENIED unless it is the caller's.
  Result<v1::CreateStepResponse> CreateStep(const Caller& caller, const v1::CreateStepRequest& req,
                                            TimeMs now);
  // Interactive allocations (srun/salloc outside a job). Release ends one (its client is done);
  // Attach binds it to the caller's connection, and AllocationClientGone (the transport saw that
  // connection close) ends it.
  Result<v1::ReleaseAllocationResponse> ReleaseAllocation(const Caller& caller,
                                                          const v1::ReleaseAllocationRequest& req,
                                                          TimeMs now);
  Result<v1::AttachAllocationResponse> AttachAllocation(const Caller& caller,
                                                        const v1::AttachAllocationRequest& req);
  void AllocationClientGone(uint64_t job_id, TimeMs now);
  // scontrol hold/release/requeue. Per-job results: NOT_FOUND, PERMISSION_DENIED, or
  // FAILED_PRECONDITION (not pending / not running / not requeueable).
  Result<v1::UpdateJobResponse> UpdateJob(const Caller& caller, const v1::UpdateJobRequest& req,
                                          TimeMs now);
  // muster explain: why a pending job waits (see JobExplanation). NOT_FOUND for unknown jobs.
  Result<v1::ExplainJobResponse> ExplainJob(const v1::ExplainJobRequest& req, TimeMs now) const;
  // sacct: live jobs and the archived history (read from the store), filtered.
  Result<v1::ListAccountingResponse> ListAccounting(const v1::ListAccountingRequest& req,
                                                    TimeMs now) const;
  // The same in two parts, so that scanning 100,000 archived jobs does not hold the controller:
  // PrepareAccounting reads the live jobs (on the strand); ScanAccounting adds the archived ones
  // from the store (any thread: the store's reads are thread-safe and see one snapshot).
  struct AccountingQuery {
    v1::ListAccountingRequest req;
    TimeMs end_ms = 0;
    std::map<uint64_t, v1::JobInfo> live;  // the matching live jobs
    store::StateStore* store = nullptr;
  };
  AccountingQuery PrepareAccounting(const v1::ListAccountingRequest& req, TimeMs now) const;
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
  // Liveness sweep (NOT_RESPONDING, DOWN and the requeue of their jobs) and the retention purge.
  void Tick(TimeMs now);
  // True when something happened that a scheduling pass should look at.
  bool schedule_requested() const { return schedule_requested_; }
  // A scheduling pass in three steps, so that the long middle one can run off the strand:
  // PreparePass snapshots the nodes and the queue, ComputePass is the pure core (any thread, no
  // access to the engine), ApplyPass checks every start against the live state (the world may
  // have moved on meanwhile) and commits the ones that still fit.
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

  uint64_t epoch() const { return meta_.epoch(); }
  const std::vector<std::string>& recovery_problems() const { return recovery_problems_; }
  const Config& config() const { return options_.config; }

  // Invariant check for tests: no CPU or GPU is held by two jobs, and the free maps agree with
  // the allocations of the jobs holding each node. Returns a description of the first violation.
  Status CheckInvariantsForTest() const;

 private:
  struct JobEntry {
    v1::JobRecord rec;
    core::JobRequest request;             // derived from rec.spec
    std::set<std::string> started_nodes;  // nodes that acknowledged the launch (this run)
    // From the last scheduling pass (memory only; recomputed by every pass).
    TimeMs expected_start_ms = core::kNever;
    bool had_reservation = false;
    core::PriorityFactors priority;
    // Interactive allocations: whether a client connection holds it, and since when none does.
    bool client_attached = false;
    TimeMs orphan_since_ms = 0;
    // squeue's row, serialized, for the fields the spec alone decides (BriefSpecFields).
    std::string brief_spec_fields;
  };

  struct NodeEntry {
    NodeConfig config;
    v1::NodeRecord rec;   // admin state (persisted)
    core::NodeView view;  // capacity and free resources
    bool registered = false;
    bool session = false;
    bool down = false;  // declared lost; cleared by a new registration
    bool not_responding = false;
    TimeMs last_heard_ms = 0;
    std::string instance_id;
    std::string step_address;
    v1::NodeInventory inventory;
    std::set<uint64_t> jobs;              // jobs holding resources here (running or cleaning up)
    std::set<uint64_t> stale_jobs;        // reported by the agent but not ours: terminate first
    std::vector<uint64_t> reported_jobs;  // from the last Register, reconciled at AttachSession
    std::set<uint64_t> lost_jobs;         // ditto: started there once, state lost since
  };

  Engine(EngineOptions options, store::StateStore* store);

  Status Recover(TimeMs now);
  Status Commit(const store::Mutation& m, store::Durability durability = store::Durability::kSync);
  // For transitions the engine starts itself (a job ended, a node was lost): memory must never run
  // ahead of the store, so a failed write stops the controller; restart recovers the last durable
  // state and the agents report again.
  void CommitOrDie(const store::Mutation& m,
                   store::Durability durability = store::Durability::kSync);

  // Submission.
  // sbatch --test-only: a scheduling pass over the current queue with the job added, on a copy.
  v1::TestOnlyResult TestOnly(const v1::JobRecord& rec, const core::JobRequest& request,
                              TimeMs now) const;
  Status Normalize(v1::JobSpec& spec, int64_t* time_limit_ms) const;
  core::JobRequest BuildRequest(const v1::JobRecord& rec) const;

  // Job state machine.
  void FinishJob(JobEntry& job, v1::JobState state, const std::string& reason, TimeMs now,
                 store::Mutation& m);
  void TerminateOnNodes(JobEntry& job, const std::string& reason);
  void SendTerminate(const std::string& node, const JobEntry& job, const std::string& reason);
  void NodeLost(NodeEntry& node, const std::string& why, TimeMs now);
  void JobLostOnNode(JobEntry& job, const std::string& node_name, const std::string& why,
                     TimeMs now, store::Mutation& m);
  // Stops a running job everywhere and queues it again (or ends it as NODE_FAIL when it asked
  // for --no-requeue, CANCELLED when a cancel was already under way).
  void RequeueOrFail(JobEntry& job, const std::string& reason, const std::string& why, TimeMs now,
                     store::Mutation& m);
  // Hardware and health: what the node lacks against its configuration ("" when nothing), and
  // the drain (or automatic resume) that follows from it and from its GPUs' health.
  std::string HardwareShortfall(const NodeEntry& node) const;
  void ApplyNodeChecks(NodeEntry& node, TimeMs now, store::Mutation& m);
  void SetCheckDrain(NodeEntry& node, const std::string& by, const std::string& reason, TimeMs now,
                     store::Mutation& m);
  void OnGpuHealth(NodeEntry& node, const v1::GpuHealth& h, TimeMs now);
  void OnNodeHealth(NodeEntry& node, const v1::NodeHealth& h, TimeMs now);
  void ReleaseNode(JobEntry& job, NodeEntry& node);
  void HoldResources(const v1::JobRecord& rec);
  void OnBatchExited(NodeEntry& node, const v1::BatchExited& e, TimeMs now);
  void OnJobCleaned(NodeEntry& node, const v1::JobCleaned& e, TimeMs now);
  void OnJobStarted(NodeEntry& node, const v1::JobStarted& e, TimeMs now);
  void OnLaunchFailed(NodeEntry& node, const v1::JobLaunchFailed& e, TimeMs now);
  void SendLaunch(const JobEntry& job, size_t node_pos);
  // Steps and allocations (engine_steps.cc).
  void OnStepEnded(NodeEntry& node, const v1::StepEnded& e, TimeMs now);
  static void EndRunningSteps(v1::JobRecord& r, v1::JobState state, TimeMs now);
  // Nothing of the job runs on `node` any more: its running steps are over there (killed, or
  // lost with the node). True when a step changed.
  bool StepsEndedOnNode(JobEntry& job, const std::string& node, bool lost, TimeMs now);
  // The node's agent restarted: the step tasks it ran ended with it.
  void StepsLostOnNode(NodeEntry& node, TimeMs now, store::Mutation& m);
  // The caller's own (or, for an admin, any) interactive job: NOT_FOUND, PERMISSION_DENIED or
  // FAILED_PRECONDITION (a batch job) otherwise.
  Result<JobEntry*> CallersAllocation(const Caller& caller, uint64_t job_id);
  void EndAllocation(JobEntry& job, v1::JobState state, const std::string& reason,
                     const std::string& detail, TimeMs now, int32_t exit_code, int32_t signal);
  // Time limits and orphaned (never or no longer attached) allocations.
  void CheckAllocations(TimeMs now);
  // Drops history records older than accounting_retention_days (bounded work per call).
  void PurgeHistory(TimeMs now);
  void Send(const std::string& node, v1::ControllerMessage msg);

  // Views.
  NodeEntry* FindNode(const std::string& name);
  JobEntry* FindJob(uint64_t id);
  v1::JobInfo ToJobInfo(const JobEntry& job) const;
  static std::string BriefSpecFields(const v1::JobRecord& rec);
  // An admin-set priority, else the multifactor one of the last pass.
  static int64_t EffectivePriority(const JobEntry& job);
  static void FillPriorityFactors(const JobEntry& job, v1::PriorityFactors* out);
  void BriefStateFields(const JobEntry& job, v1::JobInfo* info) const;
  v1::NodeInfo ToNodeInfo(const NodeEntry& node, TimeMs now) const;
  v1::NodeState NodeStateOf(const NodeEntry& node) const;
  bool Schedulable(const NodeEntry& node) const;
  std::string WhyUnschedulable(const NodeEntry& node) const;  // "drained: bad fan", ...
  // The nodes as the scheduler sees them now (free resources, availability, running work).
  core::ClusterView LiveView(TimeMs now) const;
  core::PendingJob ToPendingJob(const JobEntry& job) const;
  static bool InPass(const v1::JobRecord& rec);  // pending, not held, not still cleaning up
  // The running work as the scheduler's profile sees it: what each job holds on each node and
  // when its time limit ends it.
  void AddRunningUse(core::ClusterView& view, TimeMs now) const;
  // A decision made on a snapshot still holds on the live state (job pending, nodes usable,
  // CPUs and GPUs free).
  bool StartStillValid(const core::JobStart& start) const;
  bool IsActive(const v1::JobRecord& rec) const;  // pending, running or cleaning up

  EngineOptions options_;
  store::StateStore* store_;
  v1::MetaRecord meta_;
  TimeMs start_time_ms_ = 0;
  std::map<uint64_t, JobEntry> jobs_;  // live and recently finished jobs, by id
  // The same entries as a flat array in id order (a map's nodes never move): squeue walks all
  // of them, and a walk over cold records is memory-bound; an array can be fetched ahead.
  std::vector<std::pair<uint64_t, const JobEntry*>> job_order_;
  void RebuildJobOrder();
  std::set<uint64_t> pending_;                      // ids of PENDING jobs (the scheduler's input)
  std::set<std::pair<TimeMs, uint64_t>> finished_;  // (end time, id) of finished jobs
  std::set<uint64_t> interactive_;                  // active srun/salloc allocations
  TimeMs last_history_purge_ms_ = 0;
  std::vector<NodeEntry> nodes_;  // configuration order
  std::map<std::string, size_t> node_index_;
  core::ClusterView base_view_;                  // partitions (node lists); nodes filled per pass
  std::vector<core::Reservation> reservations_;  // the last pass's, of jobs still waiting
  core::ClusterView capacity_view_;              // every node empty: for "can it ever run"
  core::SchedulerConfig sched_config_;
  core::PriorityScale priority_scale_;
  PartitionLimitMap partition_limits_;
  std::map<std::string, Status> ever_cache_;  // core::ShapeKey -> Place(kEver) answer
  TimeMs last_pass_ms_ = 0;
  std::vector<Outgoing> outgoing_;
  std::vector<std::string> recovery_problems_;
  bool schedule_requested_ = true;
};

}  // namespace muster::controller
