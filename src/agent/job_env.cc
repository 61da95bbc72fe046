#include "job_env.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "muster/common/hostlist.h"
#include "muster/common/strings.h"
#include "muster/keeper/child.h"

namespace muster::agent {
namespace {

// Ordered KEY -> VALUE with last-writer-wins, kept in first-insertion order for stable output.
class EnvBuilder {
 public:
  explicit EnvBuilder(const google::protobuf::RepeatedPtrField<std::string>& base) { SetAll(base); }
  EnvBuilder() = default;
  // KEY=VALUE entries, each over an earlier one of its name.
  template <typename Range>
  void SetAll(const Range& entries) {
    for (const auto& kv : entries) {
      size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) continue;
      Set(kv.substr(0, eq), kv.substr(eq + 1));
    }
  }
  void Set(const std::string& k, const std::string& v) {
    auto [it, inserted] = index_.try_emplace(k, entries_.size());
    if (inserted) {
      entries_.push_back({k, v});
    } else {
      entries_[it->second].second = v;
    }
  }
  // SLURM_X=v and MUSTER_X=v (SLURMD_NODENAME -> MUSTER_NODENAME).
  void Slurm(const std::string& suffix, const std::string& v) {
    Set("SLURM_" + suffix, v);
    Set("MUSTER_" + suffix, v);
  }
  const std::string* Get(const std::string& k) const {
    auto it = index_.find(k);
    return it == index_.end() ? nullptr : &entries_[it->second].second;
  }
  void SetIfMissing(const std::string& k, const std::string& v) {
    if (!index_.count(k)) Set(k, v);
  }
  void Unset(const std::string& k) {
    auto it = index_.find(k);
    if (it == index_.end()) return;
    entries_[it->second].first.clear();  // left out by Build
    index_.erase(it);
  }
  std::vector<std::string> Build() const {
    std::vector<std::string> out;
    out.reserve(entries_.size());
    for (const auto& [k, v] : entries_) {
      if (!k.empty()) out.push_back(k + "=" + v);
    }
    return out;
  }

 private:
  std::vector<std::pair<std::string, std::string>> entries_;
  std::map<std::string, size_t> index_;
};

const v1::NodeAllocation& ThisNode(const v1::LaunchJob& l) {
  static const v1::NodeAllocation kEmpty;
  const auto& nodes = l.allocation().nodes();
  return l.node_id() < static_cast<uint32_t>(nodes.size()) ? nodes[static_cast<int>(l.node_id())]
                                                           : kEmpty;
}

void AddJobVars(EnvBuilder& env, const v1::LaunchJob& l, const std::string& node_name,
                const std::string& config_path, const std::string& visible) {
  const v1::JobSpec& s = l.spec();
  std::vector<std::string> names;
  std::vector<uint32_t> tasks, cpus;
  for (const auto& na : l.allocation().nodes()) {
    names.push_back(na.node());
    tasks.push_back(na.ntasks());
    cpus.push_back(static_cast<uint32_t>(na.cpu_ids_size()));
  }
  const std::string id = std::to_string(l.job_id());
  const std::string nodelist = CompressHostlist(names);
  const v1::NodeAllocation& me = ThisNode(l);
  const std::string gpus = GpuList(l);
  env.Slurm("JOB_ID", id);
  env.Slurm("JOBID", id);
  env.Slurm("JOB_NAME", s.name());
  env.Slurm("JOB_NODELIST", nodelist);
  env.Slurm("NODELIST", nodelist);
  env.Slurm("JOB_NUM_NODES", std::to_string(names.size()));
  env.Slurm("NNODES", std::to_string(names.size()));
  // From the allocation: a -N min-max job may have got fewer nodes than it asked for.
  uint32_t ntasks = 0;
  for (uint32_t t : tasks) ntasks += t;
  if (ntasks == 0) ntasks = s.ntasks();
  env.Slurm("NTASKS", std::to_string(ntasks));
  env.Slurm("NPROCS", std::to_string(ntasks));
  env.Slurm("TASKS_PER_NODE", CompressCounts(tasks));
  env.Slurm("JOB_CPUS_PER_NODE", CompressCounts(cpus));
  env.Slurm("CPUS_ON_NODE", std::to_string(me.cpu_ids_size()));
  if (s.cpus_per_task() > 1) env.Slurm("CPUS_PER_TASK", std::to_string(s.cpus_per_task()));
  env.Slurm("SUBMIT_DIR", s.submit_dir().empty() ? s.work_dir() : s.submit_dir());
  env.Slurm("SUBMIT_HOST", s.submit_host());
  env.Slurm("JOB_PARTITION", l.allocation().partition());
  if (!s.account().empty()) env.Slurm("JOB_ACCOUNT", s.account());
  if (!s.reservation().empty()) env.Slurm("JOB_RESERVATION", s.reservation());
  if (!s.licenses().empty()) {
    // "fluent:1,matlab:2", by name.
    const std::map<std::string, uint32_t> licenses(s.licenses().begin(), s.licenses().end());
    std::string text;
    for (const auto& [name, count] : licenses) {
      text += (text.empty() ? "" : ",") + name + ":" + std::to_string(count);
    }
    env.Slurm("JOB_LICENSES", text);
  }
  env.Slurm("CLUSTER_NAME", l.cluster_name());
  env.Slurm("JOB_USER", s.user());
  env.Slurm("JOB_UID", std::to_string(s.uid()));
  env.Slurm("JOB_GID", std::to_string(s.gid()));
  env.Slurm("NODEID", std::to_string(l.node_id()));
  env.Slurm("RESTART_COUNT", std::to_string(l.requeue_count()));
  if (s.ntasks_per_node() > 0) env.Slurm("NTASKS_PER_NODE", std::to_string(s.ntasks_per_node()));
  // As Slurm: set when the option was given (--hint's own task per core is not).
  const v1::CpuShape& shape = s.cpu_shape();
  if (shape.ntasks_per_core() > 0) {
    env.Slurm("NTASKS_PER_CORE", std::to_string(shape.ntasks_per_core()));
  }
  if (shape.ntasks_per_socket() > 0) {
    env.Slurm("NTASKS_PER_SOCKET", std::to_string(shape.ntasks_per_socket()));
  }
  if (shape.threads_per_core() > 0) {
    env.Slurm("THREADS_PER_CORE", std::to_string(shape.threads_per_core()));
  }
  if (s.overcommit()) env.Slurm("OVERCOMMIT", "1");          // -O, as Slurm sets it
  if (s.has_get_user_env()) env.Slurm("GET_USER_ENV", "1");  // --get-user-env, likewise
  env.Slurm("PRIO_PROCESS", "0");
  env.Slurm("NODE_ALIASES", "(null)");
  // As Slurm's tree topology: the switches from the top, then the node ("spine1.leaf3.node7";
  // pattern "switch.switch.node").
  std::string addr, pattern;
  for (const std::string& tier : Split(l.topology(), '/', true)) {
    addr += tier + ".";
    pattern += "switch.";
  }
  env.Slurm("TOPOLOGY_ADDR", addr + node_name);
  env.Slurm("TOPOLOGY_ADDR_PATTERN", pattern + "node");
  if (l.has_array()) {
    const v1::ArrayTask& a = l.array();
    env.Slurm("ARRAY_JOB_ID", std::to_string(a.array_job_id()));
    env.Slurm("ARRAY_TASK_ID", std::to_string(a.task_id()));
    env.Slurm("ARRAY_TASK_COUNT", std::to_string(a.count()));
    env.Slurm("ARRAY_TASK_MIN", std::to_string(a.min()));
    env.Slurm("ARRAY_TASK_MAX", std::to_string(a.max()));
    env.Slurm("ARRAY_TASK_STEP", std::to_string(a.step()));
  }
  if (s.mem_per_node_mb() > 0) env.Slurm("MEM_PER_NODE", std::to_string(s.mem_per_node_mb()));
  env.Set("SLURMD_NODENAME", node_name);
  env.Set("MUSTER_NODENAME", node_name);
  uint32_t shards = 0;
  for (const v1::GresUnits& g : me.gres()) {
    if (g.name() == "shard") shards += static_cast<uint32_t>(g.units_size());
  }
  if (shards > 0) env.Slurm("SHARDS_ON_NODE", std::to_string(shards));
  uint32_t slices = 0;
  for (const v1::GresUnits& g : me.gres()) {
    if (g.name() == "gpu") slices += static_cast<uint32_t>(g.units_size());
  }
  if (!visible.empty()) {
    env.Slurm("GPUS_ON_NODE", std::to_string(me.gpu_indices_size() + slices));
    if (!gpus.empty()) env.Slurm("JOB_GPUS", gpus);
    if (s.gpus_per_node() > 0) env.Slurm("GPUS_PER_NODE", std::to_string(s.gpus_per_node()));
    if (s.gpus_total() > 0) env.Slurm("GPUS", std::to_string(s.gpus_total()));
    if (s.gpus_per_task() > 0) env.Slurm("GPUS_PER_TASK", std::to_string(s.gpus_per_task()));
    if (s.gpus_per_socket() > 0) {
      env.Slurm("GPUS_PER_SOCKET", std::to_string(s.gpus_per_socket()));
    }
    env.Set("CUDA_VISIBLE_DEVICES", visible);
    env.Set("NVIDIA_VISIBLE_DEVICES", visible);
    env.Set("GPU_DEVICE_ORDINAL", visible);
    // Slurm sets the AMD and Intel names too, whatever the GPUs are; programs read either.
    env.Set("ROCR_VISIBLE_DEVICES", visible);
    env.Set("ZE_AFFINITY_MASK", visible);
    // Indices are NVML's, which follow the PCI bus; CUDA's default order may differ.
    env.SetIfMissing("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
  } else {
    // A job without GPUs must not see the node's GPUs through an inherited variable.
    env.Set("CUDA_VISIBLE_DEVICES", "");
    env.Set("NVIDIA_VISIBLE_DEVICES", "void");
  }
  // So that `muster run` inside the job finds this cluster's controller.
  if (!config_path.empty()) env.SetIfMissing("MUSTER_CONF", config_path);
}

}  // namespace

std::string GpuList(const v1::LaunchJob& launch) {
  // Whole GPUs, and the GPUs the job's shards sit on (shared, as Slurm's shards).
  std::set<uint32_t> gpus(ThisNode(launch).gpu_indices().begin(),
                          ThisNode(launch).gpu_indices().end());
  for (const v1::GresUnits& g : ThisNode(launch).gres())
    gpus.insert(g.on_gpu().begin(), g.on_gpu().end());
  std::vector<std::string> ids;
  for (uint32_t g : gpus) ids.push_back(std::to_string(g));
  return Join(ids, ",");
}

std::vector<uint32_t> GpusTouched(const v1::LaunchJob& launch,
                                  const google::protobuf::RepeatedPtrField<v1::GpuDevice>& gpus) {
  std::set<uint32_t> out(ThisNode(launch).gpu_indices().begin(),
                         ThisNode(launch).gpu_indices().end());
  for (const v1::GresUnits& g : ThisNode(launch).gres()) {
    out.insert(g.on_gpu().begin(), g.on_gpu().end());
    if (g.name() != "gpu") continue;
    std::vector<uint32_t> parent;  // the profile's instances in GPU order, by parent index
    for (const auto& gpu : gpus) {
      for (const auto& m : gpu.mig_devices()) {
        if (EqualsIgnoreCase(m.profile(), g.type())) parent.push_back(gpu.index());
      }
    }
    for (uint32_t u : g.units()) {
      if (u < parent.size()) out.insert(parent[u]);
    }
  }
  return {out.begin(), out.end()};
}

Result<std::string> VisibleDevices(const v1::LaunchJob& launch,
                                   const google::protobuf::RepeatedPtrField<v1::GpuDevice>& gpus) {
  std::vector<std::string> out;
  const std::string whole = GpuList(launch);
  if (!whole.empty()) out.push_back(whole);
  for (const v1::GresUnits& g : ThisNode(launch).gres()) {
    if (g.name() != "gpu") continue;
    std::vector<std::string> uuids;  // this node's instances of the profile, in GPU order
    for (const auto& gpu : gpus) {
      for (const auto& m : gpu.mig_devices()) {
        if (EqualsIgnoreCase(m.profile(), g.type())) uuids.push_back(m.uuid());
      }
    }
    for (uint32_t u : g.units()) {
      if (u >= uuids.size() || uuids[u].empty()) {
        return FailedPrecondition("the allocation names MIG slice " + std::to_string(u) +
                                  " of gpu:" + g.type() + ", but this node has " +
                                  std::to_string(uuids.size()) +
                                  " such instances (was MIG reconfigured?)");
      }
      out.push_back(uuids[u]);
    }
  }
  return Join(out, ",");
}

std::vector<std::string> BuildBatchEnv(const v1::LaunchJob& launch, const std::string& node_name,
                                       const std::string& config_path, const std::string& visible,
                                       const std::vector<std::string>* login_env) {
  // --get-user-env: the login environment first, the submitted one over it (Slurm's
  // env_array_merge); with --export=NONE the submitted one holds only what it names.
  EnvBuilder env;
  if (login_env) env.SetAll(*login_env);
  env.SetAll(launch.spec().environment());
  AddJobVars(env, launch, node_name, config_path, visible);
  env.Slurm("PROCID", "0");
  env.Slurm("LOCALID", "0");
  env.Slurm("GTIDS", "0");
  env.SetIfMissing("PATH", "/usr/local/bin:/usr/bin:/bin");
  return env.Build();
}

uint32_t TaskIdOf(const v1::StepLaunchRequest& step, uint32_t local_id) {
  if (local_id < static_cast<uint32_t>(step.task_ids_size())) {
    return step.task_ids(static_cast<int>(local_id));
  }
  return step.first_task() + local_id;
}

std::vector<std::string> BuildTaskEnv(const v1::LaunchJob& launch, const std::string& node_name,
                                      const std::string& config_path, const std::string& visible,
                                      const v1::StepLaunchRequest& step, uint32_t local_id,
                                      const std::string& launch_host) {
  EnvBuilder env(step.environment());
  AddJobVars(env, launch, node_name, config_path, visible);
  const uint32_t procid = TaskIdOf(step, local_id);
  std::vector<std::string> gtids;
  for (uint32_t t = 0; t < step.ntasks(); ++t) gtids.push_back(std::to_string(TaskIdOf(step, t)));
  env.Slurm("STEP_ID", std::to_string(step.step_id()));
  env.Slurm("STEPID", std::to_string(step.step_id()));
  env.Slurm("PROCID", std::to_string(procid));
  env.Slurm("LOCALID", std::to_string(local_id));
  env.Slurm("NODEID", std::to_string(step.node_id()));
  env.Slurm("GTIDS", Join(gtids, ","));
  env.Slurm("NTASKS", std::to_string(step.total_tasks()));
  env.Slurm("NPROCS", std::to_string(step.total_tasks()));
  env.Slurm("STEP_NUM_TASKS", std::to_string(step.total_tasks()));
  env.Slurm("STEP_NUM_NODES", std::to_string(step.total_nodes()));
  env.Slurm("STEP_NODELIST", step.step_nodelist());
  env.Slurm("STEP_TASKS_PER_NODE", step.tasks_per_node());
  // srun names the step's -m in its environment (and SLURM_DIST_PLANESIZE for plane); without
  // one the tasks went out in blocks.
  const std::string* named = env.Get("SLURM_DISTRIBUTION");
  const std::string dist = named && !named->empty() ? *named : "block";
  env.Slurm("DISTRIBUTION", dist);
  if (step.pmi()) {
    // PMI_FD: the socket the step supervisor relays to srun's PMI server (no port to find).
    env.Set("PMI_FD", std::to_string(keeper::kPmiFd));
    env.Set("PMI_RANK", std::to_string(procid));
    env.Set("PMI_SIZE", std::to_string(step.total_tasks()));
  } else {
    // A step started from inside another's task (--mpi=none) must not find that one's PMI.
    for (const char* k : {"PMI_FD", "PMI_RANK", "PMI_SIZE", "PMI_PORT", "PMI_ID"}) env.Unset(k);
  }
  if (!launch_host.empty()) {
    // Where srun runs (as the agent sees it): what Slurm sets, and what some launchers read.
    env.Slurm("LAUNCH_NODE_IPADDR", launch_host);
    env.Slurm("SRUN_COMM_HOST", launch_host);
  }
  if (step.cpus_per_task() > 0) env.Slurm("CPUS_PER_TASK", std::to_string(step.cpus_per_task()));
  if (!step.step_name().empty()) env.Slurm("STEP_NAME", step.step_name());
  if (step.gpus_given()) {
    std::vector<std::string> ids;
    for (uint32_t g : step.gpu_indices()) ids.push_back(std::to_string(g));
    env.Slurm("STEP_GPUS", Join(ids, ","));
    env.Slurm("GPUS_ON_NODE", std::to_string(ids.size()));
  } else if (const std::string gpus = GpuList(launch); !gpus.empty()) {
    env.Slurm("STEP_GPUS", gpus);
  }
  env.SetIfMissing("PATH", "/usr/local/bin:/usr/bin:/bin");
  return env.Build();
}

void SetEnvVar(std::vector<std::string>& env, const std::string& name, const std::string& value) {
  const std::string prefix = name + "=";
  auto named = [&](const std::string& kv) { return StartsWith(kv, prefix); };
  auto first = std::find_if(env.begin(), env.end(), named);
  if (first == env.end()) {
    env.push_back(prefix + value);
    return;
  }
  *first = prefix + value;
  // Later repeats go: the first keeps its place.
  env.erase(std::remove_if(std::next(first), env.end(), named), env.end());
}

std::vector<std::string> ApplyTaskPrologOutput(const std::string& output,
                                               std::vector<std::string>* env) {
  auto name_ok = [](std::string_view n) {
    if (n.empty() || (n[0] >= '0' && n[0] <= '9')) return false;
    for (char c : n) {
      if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
        return false;
    }
    return true;
  };
  std::vector<std::string> printed;
  for (const std::string& raw : Split(output, '\n')) {
    std::string_view line = raw;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (StartsWith(line, "export ")) {
      std::string_view def = Trim(line.substr(7));
      const size_t eq = def.find('=');
      if (eq == std::string_view::npos || !name_ok(def.substr(0, eq))) continue;
      SetEnvVar(*env, std::string(def.substr(0, eq)), std::string(def.substr(eq + 1)));
    } else if (StartsWith(line, "unset ")) {
      const std::string name(Trim(line.substr(6)));
      if (!name_ok(name)) continue;
      std::erase_if(*env, [&](const std::string& kv) { return StartsWith(kv, name + "="); });
    } else if (StartsWith(line, "print ")) {
      printed.emplace_back(line.substr(6));
    }
  }
  return printed;
}

PatternVars PatternVarsOf(const v1::LaunchJob& l) {
  return JobPatternVars(l.job_id(), l.spec().name(), l.spec().user(),
                        l.has_array() ? l.array().array_job_id() : 0,
                        l.has_array() ? static_cast<int64_t>(l.array().task_id()) : -1);
}

}  // namespace muster::agent
