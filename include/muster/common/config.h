// The one configuration file shared by musterctld, musterd and the CLI (TOML,
// /etc/muster/muster.toml by default). Every key is documented in docs/config.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "muster/common/status.h"

namespace muster {

inline constexpr const char* kDefaultConfigPath = "/etc/muster/muster.toml";

// Whether "host:port" names a loopback address (127.0.0.0/8, ::1, localhost).
bool IsLoopbackAddress(const std::string& host_port);

// Whether a node name is one Muster accepts: letters, digits, '.', '_' and '-', not starting
// with '.' or '-', at most 64 characters. Names become paths (spool, cgroups, certificates).
bool IsValidNodeName(const std::string& name);
// An account or user name: 1-64 of [A-Za-z0-9._-], not starting with '.' or '-'.
bool IsValidAccountName(const std::string& name);

struct ControllerConfig {
  std::string socket_path = "/run/muster/musterctld.sock";  // user API (framed protobuf)
  // The user API over TCP for commands on other hosts (login and compute nodes), authenticated
  // with MUNGE: where they connect ("head01:6819"); empty: the socket only.
  std::string api_address;
  // What musterctld binds for it; empty: api_address. ("0.0.0.0:6819" where the head node's
  // name resolves to a loopback address on the head node itself.)
  std::string api_listen;
  // Requests per second one user may make (a token bucket of user_request_burst); beyond it the
  // user's requests wait their turn. 0: no limit. Root is not limited.
  uint32_t user_request_rate = 100;
  uint32_t user_request_burst = 200;
  std::string agent_address = "127.0.0.1:6817";  // where agents connect
  // Prometheus' /metrics over HTTP ("0.0.0.0:6820"); empty: off. Scrapers must send the bearer
  // token in metrics_token_file (required with it).
  std::string metrics_address;
  std::string metrics_token_file;
  // The read-only web view ("127.0.0.1:6821"); empty: off. Users log in through `muster web`,
  // which asks the controller (authenticated as for any command) for a one-time login address.
  std::string web_address;
  // The address users' browsers reach it by (behind a TLS proxy: "https://muster.example.org");
  // empty: http:// and web_address.
  std::string web_url;
  // Without [tls], an agent_address beyond loopback is refused unless this says, in so many
  // words, that the network between the hosts is trusted.
  bool insecure = false;
  std::string state_dir = "/var/lib/muster";
  // Changes written while a sync is under way share the next one (a reply or an agent command
  // still waits until its change is on disk). false: one sync per change, on the strand.
  bool group_commit = true;
  // Free space kept on state_dir's disk for what is already admitted (store::SpaceGuard): below
  // it new jobs are refused, below a quarter of it nothing is written. 0: no checks.
  uint32_t state_reserve_mb = 128;
  std::string log_level = "info";
  std::string log_file;  // empty: stderr (journald under systemd)
  // "text" (a line of key=value fields) or "json" (an object a line, job=/node=/user= fields
  // lifted into keys); under systemd without a log_file, text goes to the journal with them as
  // MUSTER_JOB=, MUSTER_NODE=, ... fields.
  std::string log_format = "text";
  // A hot standby: the [[controllers]] elect their leader through etcd (its v3 API, host:port
  // of its client URLs, loopback only yet). Empty: one controller, no election.
  std::vector<std::string> etcd_endpoints;
  // Where the election's keys live; empty: "/muster/<cluster_name>/".
  std::string etcd_prefix;
  // etcd knows the controllers by a client certificate from a CA of its own (`muster certs
  // --etcd`), and they know it by its certificate naming "etcd": required with etcd_endpoints.
  std::string etcd_ca_file;
  std::string etcd_cert_file;
  std::string etcd_key_file;
  // The leader's etcd lease: a leader that stops answering is replaced this long after.
  uint32_t leader_lease_s = 3;
  // Slurm's MailProg: the program that mails users what their --mail-type asked for, run as
  // `mail_prog -s SUBJECT RECIPIENT` with the job's SLURM_JOB_* in its environment (an absolute
  // path). Empty: no mail is sent.
  std::string mail_prog;
  // Who it runs as when the controller runs as root (never root itself; Slurm's SlurmUser).
  std::string mail_prog_user = "nobody";

  bool operator==(const ControllerConfig&) const = default;
};

// One of several controllers ([[controllers]]): one leads, the others follow its state and take
// over when it fails. Empty fields take [controller]'s value.
struct ControllerHostConfig {
  std::string name;           // musterctld --name; default: the host's name
  std::string agent_address;  // where agents and standbys reach it (required)
  std::string api_address;
  std::string api_listen;
  std::string socket_path;
  std::string state_dir;

  bool operator==(const ControllerHostConfig&) const = default;
};

struct SchedulingConfig {
  uint32_t sched_min_interval_ms = 5;     // coalesces bursts of events into one pass
  uint32_t sched_max_interval_ms = 1000;  // a pass at least this often
  uint32_t kill_grace_ms = 30'000;        // SIGTERM -> SIGKILL (Slurm's KillWait)
  uint32_t heartbeat_interval_ms = 5'000;
  uint32_t node_not_responding_ms = 15'000;  // silence before NOT_RESPONDING
  uint32_t node_down_ms = 60'000;            // silence before DOWN (jobs requeued)
  // A node told to reboot (`muster node reboot`) must register again, from a new agent, within
  // this long; else it is drained "reboot timed out" (Slurm's ResumeTimeout for reboots).
  uint32_t reboot_timeout_s = 600;
  uint32_t finished_job_retention_ms = 300'000;  // finished jobs stay visible (Slurm's MinJobAge)
  uint32_t max_job_count = 1'000'000;            // pending + running jobs
  uint32_t max_array_size = 1001;                // job array task ids are below this (MaxArraySize)
  // Pending jobs (array tasks each) one user may have at once; 0: no limit. Root is exempt.
  uint32_t max_pending_jobs_per_user = 50'000;
  // Script, environment and argument bytes (MiB) all of one user's jobs may keep in the state
  // store, from submission until archived; a larger max_stored_mb_per_user of the job's QoS or
  // account raises it for that job. 0: no limit. Root is exempt. 50,000 jobs at the 4 MiB
  // script limit would be 200 GB.
  uint32_t max_stored_mb_per_user = 1024;
  // Finished jobs (with their steps) stay in the accounting history (sacct) this long; 0: forever.
  uint32_t accounting_retention_days = 365;
  // The audit log (privileged actions, refused attempts) keeps entries this long; 0: forever.
  uint32_t audit_retention_days = 365;
  // An srun/salloc allocation whose client is not connected (after a controller restart, or a
  // client that died before attaching) is ended after this long.
  uint32_t allocation_grace_ms = 60'000;
  // A step's credential (what srun shows an agent to start the step there) is good this long
  // after the controller makes it (Slurm's cred_expire); the nodes' clocks must agree this well.
  uint32_t step_credential_lifetime_ms = 120'000;
  // How accounts are ordered for the fair-share factor: "fair_tree" (usage over time, Slurm's
  // Fair Tree) or "drf" (dominant resource fairness over what runs now).
  std::string fairshare_algorithm = "fair_tree";
  // Fair-share usage halves every this long (Slurm's PriorityDecayHalfLife).
  uint64_t fairshare_half_life_ms = 7ULL * 86'400'000;
  // Backfill: how many blocked jobs get a reservation per pass (1 = EASY; 0 = no backfill).
  uint32_t backfill_depth = 100;
  // "standard": a lower job starts where it touches no reservation during its time limit;
  // "strict": only if it also ends before the earliest reserved start (the RLScheduler paper's
  // variant, one of muster-sim's baselines).
  std::string backfill = "standard";
  // Who goes first: "multifactor" (the weights below, fair share and QoS: Muster's) or one of the
  // published orderings muster-sim compares it with: "fcfs" (submission), "sjf" (shortest time
  // limit), "wfp3", "unicep", "f1" (docs/scheduling-quality.md gives their formulas).
  std::string order = "multifactor";
  // With a published order: a job that has waited this long (from submission or --begin) is
  // protected (0: never). Protected jobs go before unprotected ones, in submission order, and
  // only they take reservations; the others start only where they fit now (selective
  // reservations). The knob that trades the orders' low slowdowns
  // against how long the largest jobs may wait (docs/scheduling-quality.md).
  uint64_t protect_after_ms = 0;
  // The order backfill tries the jobs left once backfill_depth reservations are made:
  // "priority" (the queue's own), "shortest" (shortest time limit first) or "area" (smallest
  // time limit x processors first).
  std::string backfill_order = "priority";
  // How a job's nodes are chosen: "topology" (the smallest subtree of the fabric that holds the
  // gang, then best fit: Muster's), or muster-sim's baselines "first_fit" (the lowest-numbered
  // nodes that fit) and "random" (drawn from those that fit, with placement_seed).
  std::string placement = "topology";
  uint64_t placement_seed = 0;
  // --switches=N without @time waits this long for N leaf switches (Slurm's max_switch_wait);
  // it also caps a user's @time.
  uint32_t max_switch_wait_ms = 300'000;
  // Multifactor priority weights (Slurm's PriorityWeight*); each factor is 0..1.
  uint32_t priority_weight_age = 1000;
  uint32_t priority_weight_size = 1000;
  uint32_t priority_weight_partition = 1000;
  uint32_t priority_weight_qos = 1000;
  uint32_t priority_weight_fairshare = 10000;
  uint64_t priority_max_age_ms = 7ULL * 24 * 3600 * 1000;  // age factor reaches 1 here
  // A job that started less than this long ago is not preempted (Slurm's PreemptExemptTime).
  uint64_t preempt_min_runtime_ms = 0;
  // At most this many pending jobs per pass look for victims to preempt.
  uint32_t max_preemptors_per_pass = 8;
  // A job whose --dependency can never be satisfied is cancelled (reason
  // DependencyNeverSatisfied) instead of pending until someone does (Slurm's
  // kill_invalid_depend); sbatch --kill-on-invalid-dep=yes|no decides per job.
  bool kill_invalid_depend = false;
  // scontrol top for users on their own jobs (Slurm's enable_user_top); admins always may.
  bool enable_user_top = false;
  // The resource limits sbatch and srun hand the job's tasks from the submitting shell when
  // --propagate is not given (Slurm's PropagateResourceLimits and ...Except): comma-separated
  // ALL, NONE, AS, CORE, CPU, DATA, FSIZE, MEMLOCK, NOFILE, NPROC, RSS, STACK. The nodes never
  // let them exceed their own hard limits.
  std::string propagate_resource_limits = "ALL";
  std::string propagate_resource_limits_except;

  bool operator==(const SchedulingConfig&) const = default;
};

struct AgentConfig {
  std::string spool_dir = "/var/spool/muster";
  // Where each job's state, batch script and exit record live (job<ID> directories, one more
  // level per node name as the spool). Empty: inside spool_dir. A tmpfs (/run/musterd) saves the
  // disk's inode churn of short jobs; it survives agent restarts, and after a reboot the jobs are
  // gone anyway.
  std::string job_state_dir;
  std::string step_address = "127.0.0.1:0";  // `muster run` connects here; port 0 = any
  std::string log_level = "info";
  std::string log_format = "text";  // as [controller] log_format
  // GPU health (NVML XID events, ECC, row remapping, fallen off the bus) is checked this often.
  uint32_t gpu_health_interval_ms = 5000;
  // The admin's node check: run every health_check_interval_s; a non-zero exit drains the node
  // with the program's first output line as the reason. Empty: none.
  std::string health_check_program;
  uint32_t health_check_interval_s = 300;
  uint32_t health_check_timeout_s = 60;
  // Stopping musterd leaves batch jobs running (re-adopted at the next start), as slurmd does;
  // true makes a stop end them (the local test cluster, so that `muster local down` is clean).
  bool kill_jobs_on_stop = false;
  // Where job cgroups (v2) go: "" finds the hierarchy and the agent's place in it, "none" turns
  // them off, a directory puts them there (<dir>/<node>/job_<id>).
  std::string cgroup_root;
  // The admin's prolog and epilog (Slurm's Prolog/Epilog): run as root with a clean environment
  // (SLURM_JOB_ID, SLURM_JOB_USER, ... never the user's) before a job starts on the node and
  // after its last process there is gone. A failed prolog drains the node and requeues the job;
  // a failed epilog drains the node.
  std::string prolog;
  std::string epilog;
  uint32_t prolog_timeout_s = 300;
  uint32_t epilog_timeout_s = 300;
  // What `muster node reboot` runs, as root, once the node has no job (Slurm's RebootProgram):
  // e.g. "/usr/sbin/reboot". Empty: this node refuses reboots.
  std::string reboot_program;
  // The agent's own `/metrics` for Prometheus (tasks, GPU health and XIDs, cgroups, launch
  // latency): host:port, empty for none. Scrapers present the bearer token of
  // metrics_token_file (root's, mode 0600), as the controller's.
  std::string metrics_address;
  std::string metrics_token_file;

  bool operator==(const AgentConfig&) const = default;
};

// Mutual TLS between musterctld and the agents. Either every file is set or none is. "%n" in
// the node paths stands for the node's name, so that one config serves every host (and several
// agents on one host, as the local cluster runs them).
struct TlsConfig {
  std::string ca_file;               // the CA (or CAs, one after another) both sides trust
  std::string controller_cert_file;  // musterctld's certificate: names controller_name
  std::string controller_key_file;
  std::string node_cert_file;  // each node's own certificate: names the node
  std::string node_key_file;
  // The name agents expect in the controller's certificate, whatever host it runs on.
  std::string controller_name = "musterctld";

  bool enabled() const { return !ca_file.empty(); }
  // node_cert_file / node_key_file with %n replaced.
  std::string NodeCertFile(const std::string& node) const;
  std::string NodeKeyFile(const std::string& node) const;

  bool operator==(const TlsConfig&) const = default;
};

// Without [tls], how an agent proves it speaks for its node ([node_auth]): each node has its own
// random key in a file only root (or the daemon's user) can read; the agent answers the
// controller's challenge with an HMAC under it, and the controller, which holds every node's key,
// checks it. "%n" stands for the node's name, so one line serves the controller and every node.
struct NodeAuthConfig {
  std::string key_file;  // e.g. "/etc/muster/node-keys/%n.key"; empty: not configured

  bool enabled() const { return !key_file.empty(); }
  std::string KeyFile(const std::string& node) const;

  bool operator==(const NodeAuthConfig&) const = default;
};

// What a job's usage costs, in billing units per second, for fair-share ([billing]).
struct BillingConfig {
  double cpu = 0;                           // per allocated CPU
  double mem_gb = 0;                        // per GB of allocated memory
  double gpu = 1.0;                         // per GPU of a type gpu_types does not name
  std::map<std::string, double> gpu_types;  // per GPU of that type, e.g. h100 = 2.0

  bool operator==(const BillingConfig&) const = default;
};

struct MungeConfig {
  std::string socket = "/run/munge/munge.socket.2";  // munged's socket on every host
  // The longest-lived credential the controller accepts (`muster` makes 60 s ones): one made to
  // live for days is a bearer token for whoever copies it before it is used.
  uint32_t max_ttl_s = 60;

  bool operator==(const MungeConfig&) const = default;
};

struct PartitionConfig {
  std::string name;
  std::string nodes_expr;
  std::vector<std::string> nodes;
  bool is_default = false;
  int64_t max_time_ms = 0;      // 0: unlimited
  int64_t default_time_ms = 0;  // 0: max_time_ms
  uint32_t priority_tier = 1;
  // How this partition's jobs give way to jobs of a partition with a higher priority_tier on the
  // same nodes (Slurm's preempt/partition_prio): "off" (never), "requeue", "cancel" or
  // "suspend" (stopped in place, keeping GPUs and memory, continued when its CPUs are free).
  std::string preempt_mode = "off";
  uint64_t grace_time_ms = 0;  // signal -> SIGKILL for its preempted jobs; 0: kill_grace
  // Who may submit to it (user names or numeric uids): when allowed_uids is set, only those;
  // never those in denied_uids. Admins always may.
  std::vector<std::string> allowed_uids;
  std::vector<std::string> denied_uids;

  bool operator==(const PartitionConfig&) const = default;
};

// Limits of an account (with its sub-accounts) or of a QoS: Slurm's Grp* (the whole account or
// QoS) and Max* (per user, per job) limits. Unset: none. GPU maps are per GPU type; "" is any.
struct LimitsConfig {
  std::optional<uint32_t> grp_jobs;    // running jobs
  std::optional<uint32_t> grp_submit;  // pending and running jobs
  std::optional<uint32_t> grp_nodes;   // nodes held by running jobs
  std::map<std::string, uint32_t> grp_gpus;
  std::optional<uint32_t> max_jobs_per_user;
  std::optional<uint32_t> max_submit_per_user;
  std::map<std::string, uint32_t> max_gpus_per_user;
  std::optional<uint32_t> max_gpus_per_job;
  std::optional<uint32_t> max_nodes_per_job;
  std::optional<int64_t> max_wall_ms;
  std::optional<uint32_t> grp_stored_mb;           // stored scripts and environments (MiB)
  std::optional<uint32_t> max_stored_mb_per_user;  // the same, of one user

  bool operator==(const LimitsConfig&) const = default;
};

// An account's quota of one GPU type (quota = { h100 = { guaranteed = 16, max = 32 } }).
struct QuotaConfig {
  uint32_t guaranteed = 0;
  std::optional<uint32_t> max;            // unset: only the cohort bounds it (without: guaranteed)
  std::optional<uint32_t> lending_limit;  // unset: all its idle guaranteed GPUs

  bool operator==(const QuotaConfig&) const = default;
};

// An account of the sharing tree ([[accounts]]); the tree's root, "root", is implicit.
struct AccountConfig {
  std::string name;
  std::string parent = "root";
  uint32_t shares = 1;  // fair-share weight among its siblings
  std::string description;
  std::vector<std::string>
      users;  // associated users (the first account naming a user is its default)
  LimitsConfig limits;
  std::vector<std::string> qos;  // QoS its jobs may use; empty: as its parent (root: any)
  std::string default_qos;       // empty: as its parent (root: "normal")
  std::map<std::string, QuotaConfig> quotas;  // by GPU type
  std::string cohort;  // accounts of one cohort lend each other idle guaranteed GPUs
  // Users who manage its sub-accounts and the users under it (sacctmgr add coordinator).
  std::vector<std::string> coordinators;

  bool operator==(const AccountConfig&) const = default;
};

// A quality of service ([[qos]]). "normal" exists unless the config defines it.
struct QosConfig {
  std::string name;
  std::string description;
  uint32_t priority = 0;
  std::vector<std::string> preempt;      // QoS whose jobs this one's may preempt
  std::string preempt_mode = "requeue";  // requeue, cancel or suspend: how its jobs give way
  double usage_factor = 1.0;
  uint64_t grace_time_ms = 0;
  bool deny_on_limit = false;  // flags = ["DenyOnLimit"]
  LimitsConfig limits;

  bool operator==(const QosConfig&) const = default;
};

struct NodeConfig {
  std::string name;
  uint32_t cpus = 1;
  uint64_t memory_mb = 1024;
  uint32_t gpus = 0;
  std::string gpu_type;  // e.g. "h100"; empty when the node has no GPUs
  std::string topology;  // tiers above the node, e.g. "spine1/leaf3"
  std::vector<std::string> features;
  std::string nvlink_domain;  // multi-node NVLink domain (NVL72-style rack); empty: none
  // Temporary disk space the node offers each job (Slurm's TmpDisk): what --tmp asks for. Not
  // measured or counted: jobs asking for more than this do not run here.
  uint64_t tmp_disk_mb = 0;
  // Counted resources besides whole GPUs: MIG slices (name "gpu", type = the profile) and other
  // GRES ("nvme"), and GPU shards (`shards_per_gpu` on every whole GPU).
  struct Gres {
    std::string name, type;
    uint32_t count = 0;
    bool operator==(const Gres&) const = default;
  };
  std::vector<Gres> gres;
  uint32_t shards_per_gpu = 0;
  // Slurm's Weight: of the nodes that could take a job, those of the lowest weight are used
  // first (topology choosing among them), heavier ones only when those are not enough.
  uint32_t weight = 1;

  bool operator==(const NodeConfig&) const = default;
};

struct Config {
  std::string source;  // file the config came from
  std::string cluster_name = "muster";
  std::vector<std::string> admins;     // user names or numeric uids; root is always an admin
  std::vector<std::string> operators;  // may drain and resume nodes and read the audit log
  // private_data (Slurm's PrivateData): what users other than admins and operators may not see
  // of others. jobs: others' jobs and their accounting records. usage: others' fair-share rows,
  // accounting records and quota use (only the caller's own, and the accounts above them).
  // accounts: accounts other than the caller's and those above them. users: other users'
  // associations.
  struct PrivateData {
    bool jobs = false;
    bool usage = false;
    bool accounts = false;
    bool users = false;
    bool operator==(const PrivateData&) const = default;
  } private_data;
  ControllerConfig controller;
  std::vector<ControllerHostConfig> controllers;  // a hot standby's controllers, in order
  SchedulingConfig scheduling;
  AgentConfig agent;
  TlsConfig tls;
  NodeAuthConfig node_auth;
  MungeConfig munge;
  BillingConfig billing;
  std::vector<PartitionConfig> partitions;
  std::vector<NodeConfig> nodes;        // in configuration order
  std::vector<AccountConfig> accounts;  // parents before children (checked: a tree under root)
  std::vector<QosConfig> qos;           // checked: known names, no preemption cycles
  // [licenses]: counted cluster-wide resources jobs hold while they run (-L/--licenses).
  std::map<std::string, uint32_t> licenses;

  const NodeConfig* FindNode(const std::string& name) const;
  const PartitionConfig* FindPartition(const std::string& name) const;
  const PartitionConfig* DefaultPartition() const;
};

// Parses TOML text. Errors are INVALID_ARGUMENT with "source:line: key: problem".
Result<Config> ParseConfig(const std::string& text, const std::string& source);

// Reads and parses a file. NOT_FOUND when it does not exist.
Result<Config> LoadConfig(const std::string& path);

// Where the controllers are, in the order to try them: every [[controllers]] entry's (with
// [controller]'s values for what an entry leaves out), else [controller]'s one. Duplicates once.
std::vector<std::string> ControllerAgentAddresses(const Config& c);
std::vector<std::string> ControllerApiAddresses(const Config& c);  // the non-empty ones
std::vector<std::string> ControllerSocketPaths(const Config& c);
// The config as controller `name` runs it: [controller]'s addresses, socket and state_dir
// replaced by its [[controllers]] entry's. NOT_FOUND when [[controllers]] does not list it;
// without [[controllers]], the config as it is.
Result<Config> ConfigForController(const Config& c, const std::string& name);
// The name musterctld goes by without --name: the host's name, or its first label when only that
// is among [[controllers]].
std::string DefaultControllerName(const Config& c);

// The config path to use: explicit (a --config flag) if given, else $MUSTER_CONF, else the default.
std::string ResolveConfigPath(const std::string& explicit_path);

}  // namespace muster
