// What the parsed options become: the controller's job spec (sbatch, and srun's and salloc's
// allocations) and srun's step request.
#include <sys/resource.h>

#include <algorithm>
#include <map>

#include "muster/client/submit_options.h"
#include "muster/common/resource_limit_names.h"
#include "muster/common/strings.h"

namespace muster::client {
namespace {

// --export's list split as Slurm's sbatch splits it (find_quote_token): at commas outside single
// or double quotes, so that NAME='a,b' stays one item; an item wholly in quotes loses them, and
// quotes inside an item are kept (NAME='a b' gives the job the value 'a b', quotes and all).
Result<std::vector<std::string>> SplitExportList(const std::string& list) {
  std::vector<std::string> items;
  bool single = false, dbl = false;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (i < list.size() && c == '\'') {
      single = !single;
    } else if (i < list.size() && c == '"') {
      dbl = !dbl;
    } else if (c == ',' && !single && !dbl) {
      std::string item = list.substr(start, i - start);
      if (item.size() >= 2 && (item.front() == '\'' || item.front() == '"') &&
          item.back() == item.front()) {
        item = item.substr(1, item.size() - 2);
      }
      if (!item.empty()) items.push_back(std::move(item));
      start = i + 1;
    }
  }
  if (single || dbl) {
    return InvalidArgument("--export: improperly formed environment variable (" +
                           list.substr(start) + "): a quote is not closed");
  }
  return items;
}

// --ntasks-per-gpu and --cpus-per-gpu become the counts the controller takes, as Slurm reads
// them: tasks from the GPUs asked for (or GPUs from the tasks), and CPUs per task (with
// --gpus-per-task) or per node (a node's slot of at least that many CPUs per GPU on it).
Status ApplyPerGpuCounts(const SubmitOptions& o, v1::JobSpec* s) {
  constexpr uint64_t kMax = 10'000'000;
  auto too_many = [](const char* what) {
    return InvalidArgument(std::string(what) + " asks for more than 10000000 tasks or CPUs");
  };
  if (o.ntasks_per_gpu) {
    const uint64_t per = *o.ntasks_per_gpu;
    if (o.gpus_per_task) {
      return InvalidArgument("--ntasks-per-gpu and --gpus-per-task are mutually exclusive");
    }
    if (o.gpus_per_socket) {
      return InvalidArgument("--ntasks-per-gpu and --gpus-per-socket are mutually exclusive");
    }
    const uint64_t gpus = s->gpus_total() > 0 ? s->gpus_total()
                          : s->gpus_per_node() > 0
                              ? uint64_t{s->gpus_per_node()} * std::max<uint32_t>(1, s->nodes())
                              : 0;
    if (gpus > 0 && s->ntasks() == 0) {
      if (gpus * per > kMax) return too_many("--ntasks-per-gpu");
      s->set_ntasks(static_cast<uint32_t>(gpus * per));
      // GPUs per node without -N: one node, as Slurm (the controller would otherwise spread
      // the tasks over more nodes, each with that many GPUs).
      if (s->gpus_total() == 0 && s->nodes() == 0) s->set_nodes(1);
    } else if (gpus == 0 && s->ntasks() > 0) {
      s->set_gpus_total(static_cast<uint32_t>((s->ntasks() + per - 1) / per));
    } else if (gpus == 0) {
      return InvalidArgument(
          "--ntasks-per-gpu needs --ntasks or a GPU count (--gpus, --gpus-per-node, --gres=gpu:N)");
    }
  }
  if (o.cpus_per_gpu) {
    const uint64_t per = *o.cpus_per_gpu;
    if (o.cpus_per_task) {
      return InvalidArgument("--cpus-per-gpu and --cpus-per-task are mutually exclusive");
    }
    uint64_t per_node = s->gpus_per_node();
    if (per_node == 0 && s->gpus_per_socket() > 0 && s->gpus_total() == 0) {
      per_node = uint64_t{s->gpus_per_socket()} * o.sockets_per_node.value_or(0);
    }
    if (per_node == 0 && s->gpus_total() > 0 && s->nodes() > 0 && s->min_nodes() == 0 &&
        s->gpus_total() % s->nodes() == 0) {
      per_node = s->gpus_total() / s->nodes();
    }
    if (s->gpus_per_task() > 0) {
      if (per * s->gpus_per_task() > kMax) return too_many("--cpus-per-gpu");
      s->set_cpus_per_task(static_cast<uint32_t>(per * s->gpus_per_task()));
    } else if (per_node > 0) {
      if (per * per_node > kMax) return too_many("--cpus-per-gpu");
      s->set_min_cpus_per_node(
          std::max<uint32_t>(s->min_cpus_per_node(), static_cast<uint32_t>(per * per_node)));
    } else {
      return InvalidArgument(
          "--cpus-per-gpu needs the GPUs of each node or task: --gpus-per-node (--gres=gpu:N), "
          "--gpus-per-task, or --gpus with -N");
    }
  }
  return Status::Ok();
}

uint64_t LimitValue(rlim_t v) { return v == RLIM_INFINITY ? UINT64_MAX : uint64_t{v}; }

}  // namespace

Result<std::vector<std::string>> PropagatedLimitNames(const SubmitOptions& o,
                                                      const SubmitContext& ctx) {
  if (o.propagate) return ParsePropagateList(*o.propagate);
  MUSTER_ASSIGN_OR_RETURN(std::vector<std::string> names,
                          ParsePropagateList(ctx.propagate_default));
  MUSTER_ASSIGN_OR_RETURN(std::vector<std::string> except,
                          ParsePropagateList(ctx.propagate_except));
  std::erase_if(names, [&](const std::string& n) {
    return std::find(except.begin(), except.end(), n) != except.end();
  });
  return names;
}

std::string RlimitEnvValue(const v1::ResourceLimit& l) {
  auto text = [](uint64_t v) {
    return v == UINT64_MAX ? std::string("unlimited") : std::to_string(v);
  };
  return text(l.soft()) + "," + text(l.hard());
}

Result<std::vector<std::string>> ParsePropagateList(const std::string& list) {
  std::vector<bool> named(std::size(kResourceLimitNames), false);
  for (const std::string& item : Split(list, ',', true)) {
    std::string n = ToUpper(std::string(Trim(item)));
    if (StartsWith(n, "RLIMIT_")) n = n.substr(7);
    if (n == "ALL") {
      named.assign(named.size(), true);
      continue;
    }
    if (n == "NONE") {
      named.assign(named.size(), false);
      continue;
    }
    const std::optional<size_t> i = ResourceLimitIndex(n);
    if (!i) {
      return InvalidArgument("--propagate: unknown resource limit '" + item +
                             "' (expected ALL, NONE, AS, CORE, CPU, DATA, FSIZE, MEMLOCK, NOFILE, "
                             "NPROC, RSS or STACK)");
    }
    named[*i] = true;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < named.size(); ++i) {
    if (named[i]) out.push_back(kResourceLimitNames[i].name);
  }
  return out;
}

std::string RlimitEnvName(const std::string& limit) { return "SLURM_RLIMIT_" + limit; }

std::vector<v1::ResourceLimit> OwnResourceLimits(const std::vector<std::string>& names) {
  std::vector<v1::ResourceLimit> out;
  for (const std::string& n : names) {
    const std::optional<size_t> i = ResourceLimitIndex(n);
    struct rlimit r {};
    if (!i || ::getrlimit(kResourceLimitNames[*i].resource, &r) != 0) continue;
    v1::ResourceLimit& l = out.emplace_back();
    l.set_name(n);
    l.set_soft(LimitValue(r.rlim_cur));
    l.set_hard(LimitValue(r.rlim_max));
  }
  return out;
}

Result<v1::JobSpec> BuildJobSpec(const SubmitOptions& o, const SubmitContext& ctx) {
  if (!ctx.interactive && !StartsWith(ctx.script, "#!")) {
    return InvalidArgument(
        "this does not look like a batch script: the first line must start with #! "
        "(e.g. #!/bin/bash)");
  }
  v1::JobSpec s;
  std::string name = o.job_name.value_or("");
  if (name.empty()) {
    if (o.wrap) {
      name = "wrap";
    } else {
      name = ctx.script_name.empty() ? "sbatch"
                                     : ctx.script_name.substr(ctx.script_name.rfind('/') + 1);
    }
  }
  s.set_name(name);
  if (o.account) s.set_account(*o.account);
  if (o.qos) s.set_qos(*o.qos);
  if (o.reservation) s.set_reservation(*o.reservation);
  if (o.nice) s.set_nice(*o.nice);
  if (o.kill_on_invalid_dep) s.set_kill_on_invalid_dep(*o.kill_on_invalid_dep ? 1 : 2);
  if (o.begin_time_ms) s.set_begin_time_ms(*o.begin_time_ms);
  if (o.mail_types) s.set_mail_types(*o.mail_types);
  if (o.mail_user) s.set_mail_user(*o.mail_user);
  if (o.deadline_ms) s.set_deadline_ms(*o.deadline_ms);
  if (o.signal) {
    s.set_signal(*o.signal);
    s.set_signal_time_s(o.signal_time_s);
    s.set_signal_batch_only(o.signal_batch_only);
  }
  if (o.dependency) s.set_dependency(*o.dependency);
  if (o.partition) {
    for (const auto& p : Split(*o.partition, ',', true)) s.add_partitions(p);
  }
  if (o.use_min_nodes && o.min_nodes) {
    s.set_nodes(*o.min_nodes);  // --use-min-nodes: the range's smallest count, as a fixed one
  } else {
    s.set_nodes(o.nodes.value_or(0));
    s.set_min_nodes(o.min_nodes.value_or(0));
  }
  s.set_ntasks(o.ntasks.value_or(0));
  s.set_ntasks_per_node(o.ntasks_per_node.value_or(0));
  s.set_cpus_per_task(o.cpus_per_task.value_or(0));
  s.set_mem_per_node_mb(o.mem_mb.value_or(0));
  s.set_gpus_per_node(o.gpus_per_node.value_or(0));
  s.set_gpus_total(o.gpus.value_or(0));
  s.set_gpu_type(o.gpu_type.value_or(""));
  for (const std::string& t : o.gpu_types) s.add_gpu_types(t);
  s.set_exclusive(o.exclusive);
  s.set_gpus_per_task(o.gpus_per_task.value_or(0));
  if (o.gpus_per_socket && o.sockets_per_node.value_or(0) == 0) {
    // As Slurm's sbatch, salloc and srun say it.
    return InvalidArgument("--gpus-per-socket option requires --sockets-per-node specification");
  }
  s.set_gpus_per_socket(o.gpus_per_socket.value_or(0));
  s.set_mem_per_gpu_mb(o.mem_per_gpu_mb.value_or(0));
  s.set_mem_per_cpu_mb(o.mem_per_cpu_mb.value_or(0));
  s.set_min_tmp_disk_mb(o.tmp_mb.value_or(0));
  for (const auto& [license, count] : o.licenses) (*s.mutable_licenses())[license] = count;
  s.set_spread_job(o.spread_job);
  if (o.core_spec && o.thread_spec) {
    return InvalidArgument("--core-spec and --thread-spec cannot be used together");
  }
  s.set_core_spec(o.core_spec.value_or(0));
  s.set_thread_spec(o.thread_spec.value_or(0));
  if (o.core_spec || o.thread_spec) s.set_exclusive(true);  // as Slurm's, even --core-spec=0
  s.set_min_cpus_per_node(o.min_cpus.value_or(0));
  s.set_open_mode_append(o.open_mode_append.value_or(false));
  if (!ctx.interactive && o.input) s.set_stdin_pattern(*o.input);
  if (o.run_as_uid) {  // root only: the controller takes these from anyone else's credentials
    s.set_uid(*o.run_as_uid);
    s.set_user(o.run_as_user);
    s.set_gid(o.run_as_gid.value_or(0));
  }
  MUSTER_RETURN_IF_ERROR(ApplyPerGpuCounts(o, &s));
  s.set_constraint(o.constraint.value_or(""));
  for (const std::string& n : o.nodelist.value_or(std::vector<std::string>{})) {
    s.add_required_nodes(n);
  }
  for (const std::string& n : o.exclude.value_or(std::vector<std::string>{})) {
    s.add_excluded_nodes(n);
  }
  s.set_max_switches(o.max_switches.value_or(0));
  s.set_switches_wait_ms(o.switches_wait_ms.value_or(0));
  s.set_topology(o.topology.value_or(""));
  // --hint sets how tasks use cores itself: with -B, --threads-per-core or --ntasks-per-core it
  // is refused, as Slurm refuses it.
  if (o.hint && (o.extra_node_info || o.threads_per_core || o.ntasks_per_core)) {
    return InvalidArgument(
        "--hint cannot be used with -B/--extra-node-info, --threads-per-core or "
        "--ntasks-per-core");
  }
  if (o.hint_help) return InvalidArgument("--hint=help lists the hints; it submits nothing");
  v1::CpuShape* shape = s.mutable_cpu_shape();
  shape->set_sockets_per_node(o.sockets_per_node.value_or(0));
  shape->set_cores_per_socket(o.cores_per_socket.value_or(0));
  shape->set_threads_per_core(o.threads_per_core.value_or(0));
  shape->set_ntasks_per_core(o.ntasks_per_core.value_or(0));
  shape->set_ntasks_per_socket(o.ntasks_per_socket.value_or(0));
  shape->set_hint(o.hint.value_or(""));
  if (shape->ByteSizeLong() == 0) s.clear_cpu_shape();
  for (const auto& g : o.gres) {
    v1::GresSpec* item = s.add_gres();
    item->set_name(g.name);
    item->set_type(g.type);
    item->set_count(g.count);
  }
  s.set_time_limit_ms(o.time_limit_ms.value_or(0));
  s.set_interactive(ctx.interactive);
  if (!ctx.interactive) s.set_script(ctx.script);
  if (o.positional.size() > 1 && !ctx.interactive) {
    for (size_t i = 1; i < o.positional.size(); ++i) s.add_script_args(o.positional[i]);
  }
  std::string wd = o.chdir.value_or(ctx.cwd);
  if (!wd.empty() && wd[0] != '/') wd = ctx.cwd + "/" + wd;
  s.set_work_dir(wd);
  s.set_submit_dir(ctx.cwd);
  s.set_submit_host(ctx.hostname);
  if (o.output) s.set_stdout_pattern(*o.output);
  if (o.error) s.set_stderr_pattern(*o.error);
  s.set_hold(o.hold);
  if (o.array) s.set_array(*o.array);
  s.set_no_requeue(o.no_requeue);
  s.set_overcommit(o.overcommit);
  s.set_no_kill(o.no_kill);
  if (o.get_user_env) {
    s.mutable_get_user_env()->set_timeout_s(o.get_user_env_timeout_s);
    s.mutable_get_user_env()->set_mode(o.get_user_env_mode);
  }
  MUSTER_ASSIGN_OR_RETURN(std::vector<std::string> limits, PropagatedLimitNames(o, ctx));
  for (v1::ResourceLimit& l : OwnResourceLimits(limits)) *s.add_propagated_limits() = std::move(l);

  // --export: ALL (default), NONE, or a list of names and NAME=value, optionally with ALL.
  std::map<std::string, std::string> env;
  std::vector<std::string> order;
  auto put = [&](const std::string& k, const std::string& v) {
    if (!env.count(k)) order.push_back(k);
    env[k] = v;
  };
  std::map<std::string, std::string> caller;
  for (const auto& kv : ctx.environment) {
    size_t eq = kv.find('=');
    if (eq != std::string::npos && eq > 0) caller[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  MUSTER_ASSIGN_OR_RETURN(std::vector<std::string> items,
                          SplitExportList(o.export_vars.value_or("ALL")));
  // ALL and NONE in any case, as Slurm's.
  for (auto& it : items) {
    if (EqualsIgnoreCase(it, "ALL")) it = "ALL";
    if (EqualsIgnoreCase(it, "NONE")) it = "NONE";
  }
  bool all = items.empty();
  for (const auto& it : items) all |= it == "ALL";
  if (all) {
    for (const auto& kv : ctx.environment) {
      size_t eq = kv.find('=');
      if (eq != std::string::npos && eq > 0) put(kv.substr(0, eq), kv.substr(eq + 1));
    }
  }
  bool none = false;
  for (const auto& it : items) {
    if (it == "ALL") continue;
    if (it == "NONE") {
      none = true;
      continue;
    }
    size_t eq = it.find('=');
    if (eq != std::string::npos) {
      put(it.substr(0, eq), it.substr(eq + 1));
    } else if (caller.count(it)) {
      put(it, caller[it]);
    }
  }
  for (const std::string& kv : o.export_file_vars) {
    const size_t eq = kv.find('=');
    put(kv.substr(0, eq), kv.substr(eq + 1));
  }
  // --gpu-bind of a job is its steps' (srun reads SLURM_GPU_BIND, as Slurm's).
  if (!o.gpu_bind.empty() && !ctx.interactive) put("SLURM_GPU_BIND", o.gpu_bind);
  // -m of a job is its steps' (srun reads SLURM_DISTRIBUTION and SLURM_DIST_PLANESIZE, as
  // Slurm's); the job's own tasks per node do not depend on it.
  if (!o.distribution.empty() && !ctx.interactive) {
    put("SLURM_DISTRIBUTION", o.distribution);
    if (o.task_distribution == "plane" && o.plane_size > 0) {
      put("SLURM_DIST_PLANESIZE", std::to_string(o.plane_size));
    }
  }
  s.set_export_none(none && !all);
  for (const auto& k : order) s.add_environment(k + "=" + env[k]);
  return s;
}

v1::CreateStepRequest BuildStepRequest(const SubmitOptions& o, uint64_t job_id, bool in_job) {
  v1::CreateStepRequest r;
  r.set_job_id(job_id);
  const std::string command = o.positional.empty() ? "" : o.positional[0];
  r.set_name(o.job_name.value_or(command.substr(command.rfind('/') + 1)));
  r.set_overlap(o.overlap);
  r.set_task_distribution(StepTaskDistribution(o));  // -m: in its own allocation too
  if (!in_job) {
    r.set_exact(o.exact);
    return r;
  }
  r.set_nodes(o.nodes.value_or(0));
  r.set_ntasks(o.ntasks.value_or(0));
  r.set_ntasks_per_node(o.ntasks_per_node.value_or(0));
  r.set_cpus_per_task(o.cpus_per_task.value_or(0));
  r.set_gpus_per_task(o.gpus_per_task.value_or(0));
  r.set_gpus_per_node(o.gpus_per_node.value_or(0));
  r.set_gpus(o.gpus.value_or(0));
  r.set_exact(o.exact || o.exclusive);
  for (const auto& n : o.nodelist.value_or(std::vector<std::string>{})) r.add_nodelist(n);
  for (const auto& n : o.exclude.value_or(std::vector<std::string>{})) r.add_exclude(n);
  return r;
}

}  // namespace muster::client
