#include "job_views.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>

#include "array_tasks.h"
#include "dependency_tracker.h"
#include "license_book.h"
#include "muster/common/hostlist.h"
#include "muster/common/job_limits.h"
#include "muster/common/output_pattern.h"
#include "muster/common/strings.h"

namespace muster::controller {
namespace {

// The accounting view: what sacct shows, cheap enough for 100,000 records per call.
v1::JobInfo AccountingInfo(const v1::JobRecord& r, bool with_steps) {
  const v1::JobSpec& s = r.spec();
  v1::JobInfo info;
  info.set_id(r.id());
  info.set_name(s.name());
  info.set_user(s.user());
  info.set_uid(s.uid());
  info.set_account(s.account());
  info.set_qos(s.qos());
  info.set_reservation(s.reservation());
  info.set_state(ShownState(r));
  info.set_completing(r.completing_nodes_size() > 0 && r.state() != v1::PENDING);
  info.set_reason(r.reason());
  info.set_preempt_count(r.preempt_count());
  info.set_partition(r.allocation().partition().empty() && s.partitions_size() > 0
                         ? s.partitions(0)
                         : r.allocation().partition());
  for (const auto& na : r.allocation().nodes()) info.add_nodes(na.node());
  const JobTotals t = TotalsOf(r);
  info.set_num_nodes(t.nodes);
  info.set_num_tasks(t.tasks);
  info.set_cpus_total(t.cpus);
  info.set_gpus_total(t.gpus);
  info.set_mem_total_mb(t.mem_mb);
  info.set_submit_time_ms(r.submit_time_ms());
  info.set_start_time_ms(r.start_time_ms());
  info.set_end_time_ms(r.end_time_ms());
  info.set_time_limit_ms(r.time_limit_ms());
  info.set_exit_code(r.exit_code());
  info.set_exit_signal(r.exit_signal());
  info.set_requeue_count(r.requeue_count());
  info.set_work_dir(s.work_dir());
  info.set_priority(r.priority());
  info.set_interactive(s.interactive());
  if (r.has_array()) *info.mutable_array() = r.array();
  if (with_steps) {
    // The first node's CPU count, for the batch step's line (sacct's N.batch).
    if (r.allocation().nodes_size() > 0) {
      v1::NodeAllocation* first = info.mutable_allocation()->add_nodes();
      first->set_node(r.allocation().nodes(0).node());
      *first->mutable_cpu_ids() = r.allocation().nodes(0).cpu_ids();
    }
    *info.mutable_steps() = r.steps();
  }
  return info;
}

// Where job `id` of the record (task `task` of its array; -1: none) writes its output.
void SetOutputPaths(const v1::JobRecord& r, uint64_t id, int64_t task, v1::JobInfo* info) {
  const v1::JobSpec& s = r.spec();
  PatternVars vars =
      JobPatternVars(id, s.name(), s.user(), r.has_array() ? r.array().array_job_id() : 0, task);
  vars.node = r.allocation().nodes().empty() ? "%N" : r.allocation().nodes(0).node();
  info->set_stdout_path(ExpandOutputPattern(s.stdout_pattern(), vars, s.work_dir()));
  info->set_stderr_path(s.stderr_pattern().empty()
                            ? info->stdout_path()
                            : ExpandOutputPattern(s.stderr_pattern(), vars, s.work_dir()));
}

// The accounting view of a task waiting in (or ended with) its carrier: the carrier's, with the
// task's own ids.
v1::JobInfo WaitingAccountingInfo(const v1::JobInfo& carrier, uint64_t id, uint32_t task) {
  v1::JobInfo info = carrier;
  info.set_id(id);
  info.mutable_array()->set_task_id(task);
  return info;
}

// What the record alone tells: the accounting view plus paths, constraints, the allocation and
// the steps.
v1::JobInfo RecordInfo(const v1::JobRecord& r) {
  const v1::JobSpec& s = r.spec();
  v1::JobInfo info = AccountingInfo(r, /*with_steps=*/false);
  info.set_reason_detail(r.reason_detail());
  if (r.allocation().nodes_size() == 0 && s.min_nodes() > 0 && s.min_nodes() < s.nodes()) {
    info.set_min_nodes(s.min_nodes());
  }
  info.set_cpus_per_task(s.cpus_per_task());
  info.set_gpus_per_node(s.gpus_per_node());
  info.set_gpu_type(GpuTypeWords(s));
  info.set_borrowed(r.state() == v1::RUNNING && r.borrowed());
  info.set_nice(s.nice());
  info.set_begin_time_ms(s.begin_time_ms());
  info.set_mem_per_node_mb(s.mem_per_node_mb());
  SetOutputPaths(r, r.id(), r.has_array() ? static_cast<int64_t>(r.array().task_id()) : -1, &info);
  if (r.state() == v1::RUNNING || r.completing_nodes_size() > 0) {
    *info.mutable_allocation() = r.allocation();
  }
  if (r.state() != v1::RUNNING) *info.mutable_completing_nodes() = r.completing_nodes();
  *info.mutable_unconfirmed_nodes() = r.unconfirmed_nodes();
  info.set_no_requeue(s.no_requeue());
  info.set_hold(s.hold());
  info.set_features(s.constraint());
  info.set_dependency(DependencyTracker::Describe(r));
  info.set_required_nodes(CompressHostlist({s.required_nodes().begin(), s.required_nodes().end()}));
  info.set_excluded_nodes(CompressHostlist({s.excluded_nodes().begin(), s.excluded_nodes().end()}));
  info.set_max_switches(s.max_switches());
  info.set_switches_wait_ms(s.switches_wait_ms());
  info.set_topology(s.topology());
  std::vector<std::string> gres;
  for (const v1::GresSpec& g : s.gres()) {
    gres.push_back(g.name() + (g.type().empty() ? "" : ":" + g.type()) + ":" +
                   std::to_string(g.count()));
  }
  info.set_gres(Join(gres, ","));
  info.set_licenses(FormatLicenses(s));
  info.set_mail_user(s.mail_user());
  info.set_mail_types(s.mail_types());
  info.set_core_spec(s.core_spec());
  info.set_thread_spec(s.thread_spec());
  *info.mutable_steps() = r.steps();
  return info;
}

// sacct's selection, built once per query: ids (a job array's id matches its tasks), users,
// states, partitions and the -S/-E window.
class AccountingFilter {
 public:
  AccountingFilter(const v1::ListAccountingRequest& req, TimeMs end)
      : users_(req.users().begin(), req.users().end()),
        states_(req.states().begin(), req.states().end()),
        parts_(req.partitions().begin(), req.partitions().end()),
        ids_(req.job_ids().begin(), req.job_ids().end()),
        start_(req.start_ms()),
        end_(end) {}

  const std::set<uint64_t>& ids() const { return ids_; }

  // Whether job `id` of the record (its own, or a task waiting in it) is one the ids name;
  // the rest of the selection is operator()'s.
  bool Names(const v1::JobRecord& r, uint64_t id) const {
    return ids_.empty() || ids_.count(id) ||
           (r.has_array() && ids_.count(r.array().array_job_id()));
  }

  bool operator()(const v1::JobRecord& r) const {
    if (!ids_.empty() && !ids_.count(r.id()) &&
        !(r.has_array() && ids_.count(r.array().array_job_id())) && !Carries(r)) {
      return false;
    }
    if (!users_.empty() && !users_.count(r.spec().user())) return false;
    if (!states_.empty() && !states_.count(ShownState(r))) return false;
    if (!parts_.empty()) {
      bool any = parts_.count(r.allocation().partition()) > 0;
      for (const auto& p : r.spec().partitions()) any |= parts_.count(p) > 0;
      if (!any) return false;
    }
    // The window: jobs that existed at some point between start and end (sacct -S/-E).
    if (ids_.empty()) {
      if (r.submit_time_ms() > end_) return false;
      if (r.end_time_ms() > 0 && r.end_time_ms() < start_) return false;
    }
    return true;
  }

 private:
  std::set<std::string> users_;
  std::set<int> states_;
  std::set<std::string> parts_;
  std::set<uint64_t> ids_;
  TimeMs start_, end_;
};

}  // namespace

JobTotals TotalsOf(const core::JobRequest& request) {
  JobTotals t;
  t.nodes = request.nodes;
  for (uint32_t n : request.tasks_per_node) {
    t.tasks += n;
    const uint32_t slot_tasks = request.overcommit ? 1 : n;  // -O: one task's CPUs per node
    t.cpus += std::max(slot_tasks * std::max<uint32_t>(1, request.cpus_per_task),
                       request.min_cpus_per_node);
  }
  t.gpus = request.nodes * request.gpus_per_node;
  t.mem_mb = request.nodes * request.mem_per_node_mb;
  return t;
}

JobTotals TotalsOf(const v1::JobRecord& r, const core::JobRequest* request) {
  JobTotals t;
  if (r.allocation().nodes_size() > 0) {
    t.nodes = static_cast<uint32_t>(r.allocation().nodes_size());
    for (const auto& na : r.allocation().nodes()) {
      t.cpus += static_cast<uint32_t>(na.cpu_ids_size());
      t.gpus += static_cast<uint32_t>(na.gpu_indices_size());
      t.mem_mb += na.mem_mb();
      t.tasks += na.ntasks();
    }
    return t;
  }
  if (request) return TotalsOf(*request);
  const v1::JobSpec& s = r.spec();
  t.nodes = s.nodes();
  t.tasks = s.ntasks();
  t.cpus = std::max(s.ntasks() * std::max<uint32_t>(1, s.cpus_per_task()),
                    s.nodes() * s.min_cpus_per_node());
  t.gpus = s.nodes() * s.gpus_per_node();
  t.mem_mb = s.nodes() * s.mem_per_node_mb();
  return t;
}

JobViews::JobViews(const EngineContext& ctx, const JobManager& jobs) : ctx_(ctx), jobs_(jobs) {}

int64_t JobViews::EffectivePriority(const JobEntry& job) {
  return job.rec().priority() != 0 ? job.rec().priority() : job.priority.priority;
}

void JobViews::FillPriorityFactors(const JobEntry& job, v1::PriorityFactors* f) {
  f->set_age(job.priority.age);
  f->set_size(job.priority.size);
  f->set_partition(job.priority.partition);
  f->set_qos(job.priority.qos);
  f->set_fairshare(job.priority.fairshare);
  f->set_nice(job.priority.nice);
}

v1::JobInfo JobViews::ToJobInfo(const JobEntry& job) const {
  const v1::JobRecord& r = job.rec();
  v1::JobInfo info = RecordInfo(r);
  info.set_priority(EffectivePriority(job));
  if (r.state() == v1::PENDING) {
    if (job.expected_start_ms != core::kNever) info.set_expected_start_ms(job.expected_start_ms);
    FillPriorityFactors(job, info.mutable_priority_factors());
  }
  return info;
}

v1::JobInfo JobViews::WaitingTaskInfo(const JobEntry& carrier, uint64_t id) const {
  v1::JobInfo info = ToJobInfo(carrier);
  const uint64_t pos = id - carrier.rec().array().array_job_id();
  const int64_t task = carrier.array_tasks && pos < carrier.array_tasks->size()
                           ? int64_t{(*carrier.array_tasks)[pos]}
                           : int64_t{carrier.rec().array().task_id()};
  info.set_id(id);
  info.mutable_array()->set_task_id(static_cast<uint32_t>(task));
  SetOutputPaths(carrier.rec(), id, task, &info);
  return info;
}

Result<v1::GetJobResponse> JobViews::GetJob(const v1::GetJobRequest& req) const {
  const JobEntry* job = jobs_.Covering(req.job_id());
  if (!job) {
    return NotFound("job " + std::to_string(req.job_id()) +
                    " does not exist (or finished longer ago than the retention time)");
  }
  v1::GetJobResponse resp;
  *resp.mutable_job() =
      job->id() == req.job_id() ? ToJobInfo(*job) : WaitingTaskInfo(*job, req.job_id());
  return resp;
}

// The rest of the brief row: what changes as the job runs. Reads only the record's own fields
// (no spec), so that 10,000 rows touch little memory.
void JobViews::BriefStateFields(const JobEntry& job, v1::JobInfo* info) const {
  const v1::JobRecord& r = job.rec();
  info->set_state(ShownState(r));
  info->set_completing(r.completing_nodes_size() > 0 && r.state() != v1::PENDING);
  if (!r.reason().empty()) info->set_reason(r.reason());
  info->set_submit_time_ms(r.submit_time_ms());
  info->set_start_time_ms(r.start_time_ms());
  info->set_end_time_ms(r.end_time_ms());
  info->set_time_limit_ms(r.time_limit_ms());
  info->set_priority(EffectivePriority(job));
  if (r.state() == v1::PENDING && job.expected_start_ms != core::kNever) {
    info->set_expected_start_ms(job.expected_start_ms);
  }
  if (r.allocation().nodes_size() > 0) {
    if (!r.allocation().partition().empty()) info->set_partition(r.allocation().partition());
    for (const auto& na : r.allocation().nodes()) info->add_nodes(na.node());
  }
  const JobTotals t = TotalsOf(r, &job.request);
  info->set_num_nodes(t.nodes);
  info->set_num_tasks(t.tasks);
  info->set_cpus_total(t.cpus);
}

// The tasks waiting in `carrier` with ids in [from, limit), as runs of consecutive ids whose task
// ids step evenly, into `row`; `covered` becomes the last such id.
void AddWaitingRuns(const JobEntry& carrier, uint64_t from, uint64_t limit, v1::JobInfo* row,
                    uint64_t* covered) {
  v1::WaitingRun* run = nullptr;
  ForEachWaiting(
      carrier.rec(), *carrier.array_tasks,
      [&](uint64_t id, uint32_t task) {
        if (id >= limit) return false;
        *covered = id;
        if (run && id == run->first_id() + run->count()) {
          const uint64_t step =
              run->count() == 1 ? uint64_t{task} - run->first_task() : uint64_t{run->task_step()};
          if (task > run->first_task() && task == run->first_task() + step * run->count()) {
            run->set_task_step(static_cast<uint32_t>(step));
            run->set_count(run->count() + 1);
            return true;
          }
        }
        run = row->add_array_waiting();
        run->set_first_id(id);
        run->set_first_task(task);
        run->set_count(1);
        run->set_task_step(1);
        return true;
      },
      from);
}

uint64_t JobViews::VisitJobs(const v1::ListJobsRequest& req, const JobRowVisitor& visit) const {
  const std::set<std::string> users(req.users().begin(), req.users().end());
  const std::set<int> states(req.states().begin(), req.states().end());
  const std::set<std::string> parts(req.partitions().begin(), req.partitions().end());
  const std::set<uint64_t> ids(req.job_ids().begin(), req.job_ids().end());
  const uint64_t after = req.after_id();
  v1::JobInfo row;
  auto matches = [&](const v1::JobRecord& r) {
    if (!users.empty() && !users.count(r.spec().user())) return false;
    if (!states.empty()) {
      if (!states.count(ShownState(r))) return false;
    } else if (!req.include_finished() && !IsActive(r) && ids.empty()) {
      return false;
    }
    if (!parts.empty()) {
      bool match = false;
      for (const auto& p : r.spec().partitions()) match |= parts.count(p) > 0;
      if (!match) return false;
    }
    return true;
  };
  // The page: full when the visitor says so, or at kMaxListPageRows rows. Rows go out in id
  // order; `last` is the last id they stand for (the next page's after_id).
  size_t rows = 0;
  bool full = false;
  uint64_t last = 0;
  auto take = [&](uint64_t through, std::string_view spec_fields) {
    last = through;
    if (!visit(row, spec_fields) || ++rows >= kMaxListPageRows) full = true;
  };
  auto emit = [&](const JobEntry& job) {
    if (req.brief()) {
      row.Clear();  // keeps the strings' buffers: no allocation per job
      BriefStateFields(job, &row);
      take(job.id(), job.brief_spec_fields);
      return;
    }
    row = ToJobInfo(job);
    take(job.id(), {});
  };
  // The tasks waiting in a carrier go out as the walk passes their ids (one array's ids are
  // consecutive, so one carrier is open at a time): in a full listing a row each, with its own
  // output paths; in a brief one, one row for the first task between two records and runs for
  // the others, which the client expands (100,000 waiting tasks cost one row, not 100,000).
  const JobEntry* open = nullptr;
  uint64_t open_from = 0;  // the next id of the open carrier's to list
  auto flush_before = [&](uint64_t limit) {
    if (!open) return;
    ForEachWaiting(
        open->rec(), *open->array_tasks,
        [&](uint64_t id, uint32_t task) {
          if (id >= limit || full) return false;
          if (req.brief()) {
            row.Clear();
            BriefStateFields(*open, &row);
            row.set_id(id);
            row.mutable_array()->set_task_id(task);
            uint64_t covered = id;
            AddWaitingRuns(*open, id + 1, limit, &row, &covered);
            open_from = covered + 1;
            take(covered, open->brief_spec_fields);
            return false;  // the rest below `limit` is in the runs
          }
          row = WaitingTaskInfo(*open, id);
          open_from = id + 1;
          take(id, {});
          return true;
        },
        open_from);
  };
  auto visit_entry = [&](const JobEntry& job, bool with_waiting) {
    flush_before(job.id());
    if (full || !matches(job.rec())) return;
    emit(job);
    if (with_waiting && Carries(job.rec()) && job.array_tasks) {
      open = &job;
      open_from = job.id() + 1;
    }
  };
  // A page that stopped amid an array goes on with the tasks still waiting past where it did.
  auto resume_carrier = [&](const std::function<bool(const JobEntry&)>& listed) {
    if (after == 0) return;
    const JobEntry* c = jobs_.CarrierBefore(after);
    if (c && c->id() <= after && Carries(c->rec()) && c->array_tasks && listed(*c) &&
        matches(c->rec())) {
      open = c;
      open_from = after + 1;
    }
  };
  if (ids.empty()) {
    const auto& order = jobs_.order();
    const size_t n = order.size();
    size_t i = std::lower_bound(order.begin(), order.end(), after + 1,
                                [](const auto& e, uint64_t id) { return e.first < id; }) -
               order.begin();
    resume_carrier([](const JobEntry&) { return true; });
    // Every record, cold, one after another: fetch the ones a few steps ahead while this one is
    // visited. Two stages, so that no prefetch waits on a miss itself: 16 ahead, the entry's
    // lines; 8 ahead, the heap objects those lines point to (the reason, the tasks, the row).
    constexpr size_t kAhead = 8;
    for (; i < n && !full; ++i) {
      if (i + 2 * kAhead < n) {
        const char* far = reinterpret_cast<const char*>(order[i + 2 * kAhead].second);
        for (size_t off = 0; off < sizeof(JobEntry); off += 64) __builtin_prefetch(far + off);
      }
      if (i + kAhead < n) {
        const JobEntry* near = order[i + kAhead].second;
        __builtin_prefetch(&near->rec().reason());
        __builtin_prefetch(near->brief_spec_fields.data());
        __builtin_prefetch(near->request.tasks_per_node.data());
      }
      visit_entry(*order[i].second, true);
    }
    if (!full) flush_before(UINT64_MAX);
    return full ? last : 0;
  }
  // By id (squeue -j in a workflow's poll loop): look them up, never walk the whole table. A
  // job array's id stands for all its tasks: its records, and the tasks waiting in its carrier.
  std::map<uint64_t, const JobEntry*> entries;  // records named, in id order
  std::set<uint64_t> arrays_named;              // carriers whose waiting tasks were asked for
  std::map<uint64_t, std::pair<const JobEntry*, uint32_t>> single_tasks;  // waiting, named alone
  for (uint64_t id : ids) {
    bool any = false;
    for (auto it = jobs_.jobs().lower_bound(id); it != jobs_.jobs().end(); ++it) {
      const bool task =
          it->second.rec().has_array() && it->second.rec().array().array_job_id() == id;
      if (it->first == id || task) {
        entries.emplace(it->first, &it->second);
        if (task && Carries(it->second.rec())) arrays_named.insert(it->first);
        any = true;
      }
      if (!task) break;
    }
    if (any) continue;
    // One task waiting in its carrier.
    const JobEntry* carrier = jobs_.Covering(id);
    if (carrier && carrier->id() != id && carrier->array_tasks && id > after) {
      const uint64_t pos = id - carrier->rec().array().array_job_id();
      if (pos < carrier->array_tasks->size()) {
        single_tasks.emplace(id, std::make_pair(carrier, (*carrier->array_tasks)[pos]));
      }
    }
  }
  resume_carrier([&](const JobEntry& c) { return arrays_named.count(c.id()) > 0; });
  auto e = entries.upper_bound(after);
  auto t = single_tasks.upper_bound(after);
  while (!full && (e != entries.end() || t != single_tasks.end())) {
    if (t == single_tasks.end() || (e != entries.end() && e->first < t->first)) {
      visit_entry(*e->second, arrays_named.count(e->first) > 0);
      ++e;
      continue;
    }
    flush_before(t->first);
    const auto [carrier, task] = t->second;
    // Listed already when its whole array is.
    if (!full && matches(carrier->rec()) && !arrays_named.count(carrier->id())) {
      if (req.brief()) {
        row.Clear();
        BriefStateFields(*carrier, &row);
        row.set_id(t->first);
        row.mutable_array()->set_task_id(task);
        take(t->first, carrier->brief_spec_fields);
      } else {
        row = WaitingTaskInfo(*carrier, t->first);
        take(t->first, {});
      }
    }
    ++t;
  }
  if (!full) flush_before(UINT64_MAX);
  return full ? last : 0;
}

Engine::AccountingQuery JobViews::PrepareAccounting(const v1::ListAccountingRequest& req,
                                                    TimeMs now) const {
  Engine::AccountingQuery q;
  q.req = req;
  q.end_ms = req.end_ms() > 0 ? req.end_ms() : now;
  q.store = &ctx_.store();
  const AccountingFilter match(req, q.end_ms);
  const bool with_steps = !req.without_steps();
  const uint64_t after = req.after_id();
  // One page's worth: the smallest ids past `after` (a carrier's waiting tasks may come after
  // later jobs' ids, so the largest is dropped rather than the walk stopped).
  auto keep = [&](uint64_t id, v1::JobInfo info) {
    if (id <= after) return;
    if (q.live.size() >= kMaxListPageRows) {
      if (id > q.live.rbegin()->first) {
        q.live_more = true;
        return;
      }
      q.live.erase(std::prev(q.live.end()));
      q.live_more = true;
    }
    q.live.emplace(id, std::move(info));
  };
  for (const auto& [id, job] : jobs_.jobs()) {
    // Before the page, only a carrier may still hold tasks that belong in it.
    if ((id <= after && !Carries(job.rec())) || !match(job.rec())) continue;
    v1::JobInfo info = AccountingInfo(job.rec(), with_steps);
    info.set_priority(EffectivePriority(job));
    if (Carries(job.rec()) && job.array_tasks) {
      const v1::JobRecord& carrier = job.rec();  // structured bindings are not captured by clang 14
      ForEachWaiting(carrier, *job.array_tasks, [&](uint64_t task_job, uint32_t task) {
        if (match.Names(carrier, task_job)) {
          keep(task_job, WaitingAccountingInfo(info, task_job, task));
        }
        return true;
      });
    }
    if (match.Names(job.rec(), id)) keep(id, std::move(info));
  }
  return q;
}

Result<v1::ListAccountingResponse> JobViews::ScanAccounting(const Engine::AccountingQuery& q) {
  const AccountingFilter match(q.req, q.end_ms);
  std::map<uint64_t, v1::JobInfo> found;
  const size_t limit = q.req.limit() > 0 ? q.req.limit() : SIZE_MAX;
  const size_t rows = std::min(limit, kMaxListPageRows);
  const uint64_t after = q.req.after_id();
  const bool with_steps = !q.req.without_steps();
  bool history_more = false;
  // One page: the smallest ids past `after` (a carrier's tasks come after it, past later ids).
  auto add = [&](uint64_t id, v1::JobInfo info) {
    if (id <= after) return;
    if (found.size() >= rows) {
      history_more = true;
      if (id > found.rbegin()->first) return;
      found.erase(std::prev(found.end()));
    }
    found.emplace(id, std::move(info));
  };
  auto take = [&](const v1::JobRecord& r) {
    // Records come in id order: once the page is full, one past its last row adds nothing.
    if (found.size() >= rows && r.id() > found.rbegin()->first) {
      history_more = true;
      return false;
    }
    // A job archived after the live part was read is in both: the live view wins.
    if ((r.id() <= after && !Carries(r)) || !match(r) || q.live.count(r.id())) return true;
    v1::JobInfo info = AccountingInfo(r, with_steps);
    if (Carries(r)) {
      // An array's tasks that ended with their carrier before they were split off.
      ForEachWaiting(r, *ArrayTaskList(r), [&](uint64_t task_job, uint32_t task) {
        if (match.Names(r, task_job)) add(task_job, WaitingAccountingInfo(info, task_job, task));
        return true;
      });
    }
    if (match.Names(r, r.id())) add(r.id(), std::move(info));
    return true;
  };
  if (!match.ids().empty()) {
    for (uint64_t id : match.ids()) {
      // The job, or a job array's tasks (consecutive ids from the array's own).
      MUSTER_RETURN_IF_ERROR(q.store->ScanHistory(id, [&](const v1::JobRecord& r) {
        const bool task = r.has_array() && r.array().array_job_id() == id;
        if (r.id() == id || task) take(r);
        return task;
      }));
    }
  } else {
    // A carrier before the page may hold tasks that ended with it, past it; but an array's
    // tasks are consecutive ids from its own, so no carrier further back holds any.
    const uint64_t from = after >= kMaxArrayTasks ? after + 1 - kMaxArrayTasks : 0;
    MUSTER_RETURN_IF_ERROR(q.store->ScanHistory(from, take));
  }
  // Each part is complete up to its last row when it left more out: the page ends at the
  // smaller of those.
  uint64_t bound = UINT64_MAX;
  if (history_more && !found.empty()) bound = found.rbegin()->first;
  if (q.live_more && !q.live.empty()) bound = std::min(bound, q.live.rbegin()->first);
  for (const auto& [id, info] : q.live) found[id] = info;
  bool more = history_more || q.live_more;
  v1::ListAccountingResponse resp;
  size_t bytes = 0;
  uint64_t last = 0;
  for (auto& [id, info] : found) {
    if (id > bound || static_cast<size_t>(resp.jobs_size()) >= rows) {
      more = true;
      break;
    }
    const size_t size = info.ByteSizeLong();
    if (resp.jobs_size() > 0 && bytes + size > kAccountingPageBytes) {
      more = true;
      break;
    }
    bytes += size;
    last = id;
    *resp.add_jobs() = std::move(info);
  }
  if (more && last != 0 && static_cast<size_t>(resp.jobs_size()) < limit) {
    resp.set_next_after_id(last);
  }
  return resp;
}

// A waiting array's tasks count one by one, as squeue lists them.
static uint64_t JobsIn(const v1::JobRecord& r) { return r.state() == v1::PENDING ? TasksOf(r) : 1; }

void JobViews::FillControllerInfo(v1::ControllerInfoResponse* info) const {
  uint32_t pending = 0, running = 0;
  for (const auto& [id, j] : jobs_.jobs()) {
    if (j.rec().state() == v1::PENDING) pending += static_cast<uint32_t>(JobsIn(j.rec()));
    if (j.rec().state() == v1::RUNNING) ++running;
  }
  info->set_jobs_pending(pending);
  info->set_jobs_running(running);
}

void JobViews::CountJobs(ClusterMetrics* m) const {
  for (const auto& [id, j] : jobs_.jobs()) {
    const v1::JobRecord& r = j.rec();
    std::string state = v1::JobState_Name(r.state());
    std::transform(state.begin(), state.end(), state.begin(), ::tolower);
    // Where it runs, or the partitions it waits for ("cpu,gpu"), in name order: the order a
    // user listed them in must not make series of its own (what one user may add to a scrape).
    std::string partition = r.allocation().partition();
    if (partition.empty()) {
      std::vector<std::string> parts(r.spec().partitions().begin(), r.spec().partitions().end());
      std::sort(parts.begin(), parts.end());
      partition = Join(parts, ",");
    }
    m->jobs[{std::move(state), std::move(partition), r.spec().account()}] += JobsIn(r);
  }
}

}  // namespace muster::controller
