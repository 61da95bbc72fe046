// The scheduling core's value types: an immutable snapshot of the cluster in, decisions out.
// Plain C++ only: no I/O, no clocks, no threads, no protobuf (CI checks the includes).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "muster/core/reason.h"

namespace muster::core {

using JobId = uint64_t;
using NodeIndex = uint32_t;
using TimeMs = int64_t;

// "Never" on the time axis: a running job without a time limit, a forecast that cannot be made.
inline constexpr TimeMs kNever = INT64_MAX;

// A GPU whose socket (CPU package) is not known (NodeView::gpu_socket).
inline constexpr uint32_t kUnknownSocket = UINT32_MAX;

// One node as the scheduler sees it: capacity from configuration, free resources by index.
struct NodePlacement;

// A counted resource besides CPUs, memory and whole GPUs, allocated by unit index: the MIG
// slices of one profile (name "gpu", type "1g.10gb"), GPU shards (name "shard", several per
// GPU, shared without isolation), or a plain counted GRES ("nvme").
struct GresView {
  std::string name;
  std::string type;
  std::vector<bool> free;        // one per unit
  std::vector<uint32_t> on_gpu;  // shards: the whole GPU each unit belongs to; else empty

  bool shards() const { return !on_gpu.empty(); }
  uint32_t FreeUnits() const;
};

struct NodeView {
  std::string name;
  std::string topology;  // tiers above the node, outermost first: "spine1/leaf3"
  uint32_t cpus = 0;
  uint64_t memory_mb = 0;
  uint32_t gpus = 0;  // GPU indices 0 .. gpus-1
  std::string gpu_type;
  std::vector<std::string> features;  // for --constraint
  uint64_t tmp_disk_mb = 0;           // for --tmp (configured, not counted)
  std::string nvlink_domain;          // a multi-node NVLink domain (NVL72 rack); empty: none
  uint32_t weight = 1;                // lower weights are allocated first (Slurm's Weight)
  bool schedulable = false;  // registered, responding, not drained, nothing stale to clean up
  std::string unavailable;   // when not schedulable, why ("drained: bad fan"), for explanations

  // Locality inside the node, from the agent's topology (empty: unknown, all equal). GPUs in one
  // link group talk best (an NVLink island, or one PCIe switch); CPUs are preferred on the NUMA
  // nodes of the chosen GPUs.
  std::vector<uint32_t> gpu_link_group;  // size gpus, or empty
  std::vector<uint32_t> gpu_numa;        // size gpus, or empty
  std::vector<uint32_t> cpu_numa;        // size cpus, or empty
  // The socket (CPU package, 0 .. sockets-1) each GPU hangs off, as its agent reported it: size
  // gpus, kUnknownSocket where not known; empty when none is. For --gpus-per-socket.
  std::vector<uint32_t> gpu_socket;
  // The CPU layout the node's agent reported (hwloc): sockets, cores per socket, hardware threads
  // per core. 0: unknown (not registered yet, or no topology there); a request for a CPU shape
  // (JobRequest::AsksForCpuShape) never takes such a node.
  uint32_t sockets = 0;
  uint32_t cores_per_socket = 0;
  uint32_t threads_per_core = 0;

  std::vector<bool> cpu_free;  // size cpus
  uint64_t memory_free_mb = 0;
  std::vector<bool> gpu_free;  // size gpus
  // MIG slices, shards and other GRES. A whole GPU and the shards on it exclude each other: a
  // GPU is free only while none of its shards is taken, and its shards are free only while the
  // GPU is not taken whole.
  std::vector<GresView> gres;

  // Builds a node with everything free.
  static NodeView Empty(std::string name, uint32_t cpus, uint64_t memory_mb, uint32_t gpus,
                        std::string gpu_type, std::string topology);
  uint32_t FreeCpus() const;
  uint32_t FreeGpus() const;
  bool Idle() const;  // nothing allocated
  // Marks what `np` names taken (or free again), keeping whole GPUs and shards consistent.
  void Take(const NodePlacement& np);
  void Give(const NodePlacement& np);
};

struct PartitionView {
  std::string name;
  std::vector<NodeIndex> nodes;
  int64_t max_time_ms = 0;  // 0: unlimited
  uint32_t priority_tier = 1;
};

// Resources a running job holds on one node until it ends: the availability profile that
// backfill plans against. Jobs without a time limit release at kNever.
struct RunningUse {
  JobId job = 0;
  NodeIndex node = 0;
  TimeMs end_ms = kNever;
  uint32_t cpus = 0;
  uint32_t gpus = 0;
  uint64_t mem_mb = 0;
  std::vector<uint32_t> gres;  // units held per pool of the node (index into NodeView::gres)
};

// A limit on what a group of jobs may hold at once (an account's GPUs, a user's running jobs
// in a QoS): what running jobs use now and the most allowed. A pass adds what it starts.
struct LimitCounter {
  JobReason reason = JobReason::kNone;  // the pending reason of a job it holds back
  std::string what;                     // "account physics: GPUs (GrpTRES gres/gpu)"
  uint64_t used = 0;
  uint64_t max = 0;
};

// What a job adds to a counter when it starts.
struct LimitCharge {
  uint32_t counter = 0;  // index into ClusterView::limits
  uint64_t amount = 0;
};

// A GPU quota: what an account (with its sub-accounts) is guaranteed of one GPU type, how far
// it may go by borrowing the idle guaranteed GPUs its cohort lends, and how much of its own it
// lends. `used` is what its running jobs hold; a pass adds what it starts.
struct QuotaView {
  std::string what;  // "account physics: h100 GPUs"
  uint64_t guaranteed = 0;
  uint64_t max = 0;            // >= guaranteed; the ceiling with borrowing
  uint64_t lending_limit = 0;  // <= guaranteed
  uint64_t used = 0;
  int32_t cohort = -1;  // index into ClusterView::cohorts; -1: none (it never borrows)

  // Idle guaranteed GPUs it lends now, and what it borrows now.
  uint64_t Lends() const {
    return used >= guaranteed ? 0 : std::min(lending_limit, guaranteed - used);
  }
  uint64_t Borrows() const { return used > guaranteed ? used - guaranteed : 0; }
};

// Accounts that lend each other idle guaranteed GPUs of one type.
struct CohortView {
  std::string name;
  std::vector<uint32_t> members;  // indices into ClusterView::quotas
};

// An admin's advance reservation (scontrol create reservation): from start to end its nodes, or
// some GPUs on each of them, are kept for the jobs that name it, and no other job may hold
// them then. A recurring one (daily, weekly) comes as one entry per occurrence, same name.
struct AdvanceReservation {
  std::string name;
  TimeMs start_ms = 0;
  TimeMs end_ms = kNever;
  std::vector<NodeIndex> nodes;  // ascending
  std::vector<uint32_t> gpus;    // GPUs held on each node (parallel to nodes); empty: whole nodes
  bool maint = false;  // a maintenance window: a job that would run into it waits, saying so
  bool flex = false;   // its jobs may also start before it, run past it and use other nodes
};

// An immutable snapshot of nodes, partitions and running work for one pass.
struct ClusterView {
  std::vector<NodeView> nodes;
  std::vector<PartitionView> partitions;
  std::vector<RunningUse> running;   // one per (running job, node); may be empty
  std::vector<LimitCounter> limits;  // account and QoS limits that are set
  std::vector<QuotaView> quotas;     // GPU quotas (per account and GPU type)
  std::vector<CohortView> cohorts;
  std::vector<AdvanceReservation> advance;  // by start

  const PartitionView* FindPartition(const std::string& name) const;
};

// Units of a GRES each node must give: --gres=shard:2, --gres=nvme:1, or MIG slices
// (name "gpu" with the profile as type). An empty type matches any type of that name.
struct GresRequest {
  std::string name;
  std::string type;
  uint32_t count = 0;
};

// A normalised resource request: how many nodes, and what each node must give.
struct JobRequest {
  std::vector<std::string> partitions;  // candidates in order of preference; never empty
  uint32_t nodes = 1;
  // -N min-max: a gang of at least `min_nodes` and as many more as are free, up to `nodes`
  // (0: exactly `nodes`). Every node of such a job has the same slot (tasks_per_node equal).
  uint32_t min_nodes = 0;
  std::vector<uint32_t> tasks_per_node;  // size == nodes (block distribution)
  uint32_t cpus_per_task = 1;
  uint32_t min_cpus_per_node = 0;  // --mincpus: a node's slot holds at least this many CPUs
  uint64_t mem_per_node_mb = 0;    // 0: memory not reserved
  uint64_t min_tmp_disk_mb = 0;    // --tmp: nodes offering at least this much temporary disk
  uint32_t gpus_per_node = 0;      // whole GPUs
  std::string gpu_type;            // empty: any
  std::vector<GresRequest> gres;
  bool exclusive = false;  // whole nodes
  // -O/--overcommit: a node's slot is one task's CPUs (cpus_per_task), however many tasks it runs.
  bool overcommit = false;
  int64_t time_limit_ms = 0;

  // Node constraints. `features` is an OR of ANDs: a node qualifies when it has every feature of
  // at least one alternative ("a&b|c" is {{a,b},{c}}).
  std::vector<std::vector<std::string>> features;
  std::vector<std::string> required_nodes;  // all of them are in the gang
  std::vector<std::string> excluded_nodes;
  // Topology limits: at most `max_leaves` leaf switches (0: any), and the whole gang inside one
  // domain of `scope`.
  uint32_t max_leaves = 0;
  enum class Scope { kAny, kLeaf, kBlock, kNvlink };
  Scope scope = Scope::kAny;
  // --reservation: it runs only inside that advance reservation (on its nodes, while it lasts,
  // ending with it), unless the reservation is flex.
  std::string reservation;
  // CPU shape (-B S:C:T, --sockets-per-node, --cores-per-socket, --threads-per-core): every node
  // has at least this many sockets, cores per socket and threads per core (0: any). And
  // --ntasks-per-core / --ntasks-per-socket (and --hint=nomultithread, ntasks-per-core 1): a
  // node's slot holds at most N tasks per core (per socket) of the node, that is its tasks are
  // at most cores x N (sockets x N). Nodes whose topology is unknown qualify for none of them.
  uint32_t min_sockets = 0;
  uint32_t min_cores_per_socket = 0;
  uint32_t min_threads_per_core = 0;
  uint32_t ntasks_per_core = 0;
  uint32_t ntasks_per_socket = 0;
  // -S/--core-spec, --thread-spec: cores (threads) of every node set aside for the system (the
  // job holds its nodes whole, `exclusive`); a node qualifies when more cores (threads) than
  // that are left, and when its CPUs less the set-aside ones (cores times threads per core)
  // still hold the slot. Nodes whose topology is unknown do not, as for the shape above.
  uint32_t spec_cores = 0;
  uint32_t spec_threads = 0;
  // --gpus-per-socket: the node's GPUs are this many from each of `min_sockets` sockets (at least
  // one), gpus_per_node being that times the sockets. Only GPUs of a known socket count; a node
  // whose CPU topology is unknown qualifies as for the shape above.
  uint32_t gpus_per_socket = 0;

  // The smallest gang the job accepts.
  uint32_t MinNodes() const { return min_nodes > 0 && min_nodes < nodes ? min_nodes : nodes; }
  bool AsksForCpuShape() const {
    return min_sockets || min_cores_per_socket || min_threads_per_core || ntasks_per_core ||
           ntasks_per_socket || spec_cores || spec_threads || gpus_per_socket;
  }
};

// Inputs to a job's multifactor priority that come from outside the core (policies arrive
// in later issues; the core only weighs them).
struct PriorityInputs {
  double qos = 0;        // 0..1: the job's QoS priority normalised by the highest QoS
  double fairshare = 0;  // 0..1: the account's fair-share factor
  int64_t nice = 0;      // subtracted, as Slurm's --nice
  int64_t fixed = 0;     // an admin-set priority; non-zero replaces the computed one
  // A queue order of the pass policy's own (scheduling.order: the published heuristics
  // muster-sim compares with): replaces the weighted sum; `fixed` still wins.
  bool by_policy = false;
  int64_t policy_priority = 0;
};

struct PendingJob {
  JobId id = 0;
  TimeMs submit_time_ms = 0;
  JobRequest request;
  // --switches=N@wait: after waiting this long (from submission) the leaf limit is dropped;
  // negative: never dropped.
  TimeMs max_leaves_wait_ms = -1;
  PriorityInputs priority;
  // The job held a reservation in the previous pass. Such jobs are planned before any other so
  // that later, higher-priority arrivals cannot push them back again and again (no starvation).
  bool had_reservation = false;
  // It preempted running jobs to make room: it is planned before every other job, so that what
  // they free is its own and no other job (one that borrows, say) takes it first.
  bool preempting = false;
  // Where backfill tries it among the jobs left once the pass's reservations are made (higher
  // first), when SchedulerConfig::backfill_by_rank; the pass policy sets it.
  int64_t backfill_rank = 0;
  // Whether it takes a reservation when blocked (within backfill_depth). False: it starts only
  // where it fits now without touching a reservation and holds nothing meanwhile (selective
  // reservations: the pass policy protects only the jobs it judges to have waited long enough).
  bool reserve = true;
  // Limits it counts against: it starts only while each has room for it.
  std::vector<LimitCharge> limits;

  // Ways to run it, tried in order where there are any (a job that accepts several GPU types,
  // or whose account holds GPU quotas): each gives the request's GPU type and replaces `limits`.
  // The first whose limits and quota have room and that fits now starts; if none fits, the first
  // with room gets the reservation.
  struct Choice {
    std::string gpu_type;
    std::vector<LimitCharge> limits;
    int32_t quota = -1;  // index into ClusterView::quotas; -1: no quota applies
  };
  std::vector<Choice> choices;
};

// What a started job gets on one node, by index: never just counted.
struct NodePlacement {
  NodeIndex node = 0;
  std::vector<uint32_t> cpus;
  uint64_t mem_mb = 0;
  std::vector<uint32_t> gpus;
  uint32_t ntasks = 0;
  // GRES units by pool: (index into NodeView::gres, unit indices).
  std::vector<std::pair<uint32_t, std::vector<uint32_t>>> gres;
};

// A whole gang: every node or none.
struct Placement {
  std::string partition;
  TimeMs start_ms = 0;               // kNow: the `now` given; kWhen: the forecast start; kEver: 0
  std::vector<NodePlacement> nodes;  // ordered by node index; the first runs the batch script
};

struct JobStart {
  JobId job = 0;
  Placement placement;
  // It runs beyond its account's guaranteed quota: an owner who needs the GPUs back may preempt
  // it.
  bool borrowed = false;
};

// Why a job did not start in this pass (Resources, Priority, ReqNodeNotAvail, ...); `detail` is a
// sentence for people.
struct PendingReason {
  JobId job = 0;
  JobReason reason = JobReason::kNone;
  std::string detail;
  TimeMs expected_start_ms = kNever;  // the job's reservation, or an estimate; kNever: unknown
};

// Resources set aside for a blocked job from `start_ms`: no backfilled job may touch them then.
struct Reservation {
  JobId job = 0;
  std::string partition;
  TimeMs start_ms = 0;
  TimeMs end_ms = kNever;
  std::vector<NodeIndex> nodes;  // ascending
};

struct PassStats {
  uint32_t considered = 0;        // pending jobs looked at
  uint32_t classes = 0;           // distinct request shapes among them
  uint32_t forecasts = 0;         // start-time searches run (reservations and estimates)
  uint32_t backfilled = 0;        // jobs started below a reservation
  uint32_t skipped_by_class = 0;  // answered from their class without a search
};

struct SchedulePass {
  std::vector<JobStart> starts;
  std::vector<PendingReason> pending;
  std::vector<Reservation> reservations;
  PassStats stats;
};

// Weights of the multifactor priority (each factor is 0..1; priority = sum of weight x factor,
// minus nice). Ties go to the earlier submission, then the lower job id.
struct PriorityWeights {
  uint32_t age = 1000;        // grows linearly to 1 at max_age_ms
  uint32_t size = 1000;       // the job's share of the cluster's GPUs (or nodes, for CPU jobs)
  uint32_t partition = 1000;  // the partition's tier over the highest tier
  uint32_t qos = 1000;
  uint32_t fairshare = 10000;
  TimeMs max_age_ms = 7LL * 24 * 3600 * 1000;
};

// How a gang's nodes are chosen among those that can take it. kTopology is Muster's (the
// smallest subtree, then best fit); the others are muster-sim's baselines: the lowest-numbered
// nodes, or nodes drawn at random (placement_seed, the pass's time and the draw's number: the
// same inputs give the same draw).
enum class PlacementMode { kTopology, kFirstFit, kRandom };

struct SchedulerConfig {
  // How many blocked jobs (in priority order) get a reservation per pass: 1 is EASY backfill,
  // large values approach conservative backfill. 0 turns backfill off: a blocked job holds back
  // every lower-priority job of its partitions.
  uint32_t backfill_depth = 100;
  PriorityWeights weights;
  // Bound on the start-time search for one job (each round moves to the next release).
  uint32_t max_forecast_rounds = 32;
  // Strict backfill (scheduling.backfill = "strict", the RLScheduler paper's): a job may pass
  // one holding a reservation only if its time limit ends before the earliest reserved start,
  // not merely beside the reserved nodes.
  bool strict_backfill = false;
  // Once backfill_depth reservations are made, the jobs left are tried by their backfill_rank
  // rather than their priority (EASY with shortest-first backfill: reservations go in priority
  // order, which keeps the waiting from starving; the gaps go to the jobs that fit them best).
  bool backfill_by_rank = false;
  PlacementMode placement = PlacementMode::kTopology;
  uint64_t placement_seed = 0;
};

}  // namespace muster::core
