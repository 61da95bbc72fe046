// JobManager: the job table, submission, scancel, scontrol hold/release/requeue, and retention.
#include "job_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "array_tasks.h"
#include "job_mail.h"
#include "job_spec.h"
#include "muster/common/check.h"
#include "muster/common/strings.h"
#include "muster/controller/access.h"
#include "name_list.h"

namespace muster::controller {

using core::JobReason;

JobManager::JobManager(EngineContext& ctx, NodeManager& nodes, ResourceLedger& ledger)
    : ctx_(ctx), nodes_(nodes), ledger_(ledger) {}

namespace {
void CheckSameLife(const v1::JobRecord& rec, const v1::JobRecord& next) {
  MUSTER_CHECK_MSG(next.id() == rec.id() && next.state() == rec.state() &&
                       next.requeue_count() == rec.requeue_count(),
                   "a job's state and run change only through Transition");
}
}  // namespace

void JobManager::StageChange(const JobEntry& job, const v1::JobRecord& next,
                             store::Mutation& m) const {
  CheckSameLife(job.rec_, next);
  m.PutJob(next);
}

void JobManager::ApplyChange(JobEntry& job, v1::JobRecord next) {
  v1::JobRecord& rec = job.rec_;
  CheckSameLife(rec, next);
  const bool owner_changed =
      next.spec().account() != rec.spec().account() || next.spec().qos() != rec.spec().qos();
  std::string before_reason;
  if (mail_ && mail_->enabled()) before_reason = rec.reason();
  IndexNames(rec, false);
  rec = std::move(next);
  IndexNames(rec, true);
  Recount(job);
  RefreshSpecFields(job);  // cheap (no script); comparing specs with scripts in them is not
  if (owner_changed) stored_.Reown(rec);
  if (mail_) mail_->OnChange(before_reason, job);
}

v1::JobRecord JobManager::StageMailSent(const JobEntry& job, uint32_t bits,
                                        store::Mutation& m) const {
  v1::JobRecord next = job.rec();
  next.set_mail_sent(next.mail_sent() | bits);
  StageChange(job, next, m);
  return next;
}

JobEntry* JobManager::Find(uint64_t id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

const JobEntry* JobManager::Find(uint64_t id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

void JobManager::ContinueOrphanTimes(const JobManager& previous) {
  for (uint64_t id : interactive_) {
    const JobEntry* before = previous.Find(id);
    JobEntry* now = Find(id);
    if (before && now && !before->client_attached) now->orphan_since_ms = before->orphan_since_ms;
  }
}

void JobManager::IndexNames(const v1::JobRecord& rec, bool add) {
  const std::string* names[3] = {&rec.spec().account(), &rec.spec().qos(),
                                 &rec.spec().reservation()};
  for (int i = 0; i < 3; ++i) {
    if (names[i]->empty()) continue;
    auto& index = naming_[i];
    if (add) {
      index[*names[i]].insert(rec.id());
    } else if (auto it = index.find(*names[i]); it != index.end()) {
      it->second.erase(rec.id());
      if (it->second.empty()) index.erase(it);
    }
  }
}

const std::set<uint64_t>& JobManager::JobsNaming(Named what, const std::string& name) const {
  static const std::set<uint64_t> kNone;
  const auto& index = naming_[static_cast<int>(what)];
  auto it = index.find(name);
  return it == index.end() ? kNone : it->second;
}

JobEntry& JobManager::Insert(JobEntry entry) {
  const uint64_t id = entry.id();
  JobEntry& e = jobs_.emplace(id, std::move(entry)).first->second;
  IndexNames(e.rec(), true);
  Recount(e);
  if (!order_stale_ && (order_.empty() || order_.back().first < id)) {
    order_.emplace_back(id, &e);  // new submissions: ids only grow
  } else {
    order_stale_ = true;  // an array task split off below newer jobs: sorted when next read
  }
  return e;
}

void JobManager::MarkPending(JobEntry& job) {
  const v1::JobRecord& r = job.rec();
  const uint64_t n = TasksOf(r);
  pending_.emplace(r.id(), &job);
  if (n != job.counted_pending) {
    // Also when a carrier's waiting tasks changed (split off, handed on).
    uint64_t& count = pending_per_uid_[r.spec().uid()];
    count = count + n - job.counted_pending;
    job.counted_pending = n;
  }
  if (r.spec().deadline_ms() > 0) {
    pending_with_deadline_.insert(r.id());
  } else {
    pending_with_deadline_.erase(r.id());
  }
}

void JobManager::UnmarkPending(JobEntry& job) {
  const v1::JobRecord& r = job.rec();
  pending_with_deadline_.erase(r.id());
  pending_.erase(r.id());
  if (job.counted_pending == 0) return;
  auto it = pending_per_uid_.find(r.spec().uid());
  if (it != pending_per_uid_.end()) {
    it->second -= std::min(it->second, job.counted_pending);
    if (it->second == 0) pending_per_uid_.erase(it);
  }
  job.counted_pending = 0;
}

uint64_t JobManager::PendingOf(uint32_t uid) const {
  auto it = pending_per_uid_.find(uid);
  return it == pending_per_uid_.end() ? 0 : it->second;
}

void JobManager::RebuildOrder() const {
  order_.clear();
  order_.reserve(jobs_.size());
  for (const auto& [id, job] : jobs_) order_.emplace_back(id, &job);
  order_stale_ = false;
}

// ---------------------------------------------------------------------------------------------
// Recovery

void JobManager::Restore(v1::JobRecord rec, TimeMs now) {
  const uint64_t id = rec.id();
  JobEntry& job = jobs_.emplace(id, JobEntry(std::move(rec))).first->second;
  const v1::JobRecord& r = job.rec();
  IndexNames(r, true);
  Recount(job);
  stored_.Add(r);
  if (r.state() == v1::PENDING) MarkPending(job);
  NoteCarrier(job);
  if (r.spec().interactive() && r.end_time_ms() == 0 &&
      (r.state() == v1::PENDING || r.state() == v1::RUNNING)) {
    // Its client lost the connection with the old controller: it may attach again.
    job.orphan_since_ms = now;
    interactive_.insert(id);
  }
  if (r.state() != v1::PENDING && r.state() != v1::RUNNING) finished_.insert({r.end_time_ms(), id});
  if (r.state() == v1::RUNNING && r.batch_started()) {
    for (const auto& na : r.allocation().nodes()) job.started_nodes.insert(na.node());
  }
}

Status JobManager::FinishRestore(TimeMs now) {
  RebuildOrder();
  // A node removed from the config while it held a job is lost to that job: a running job is
  // requeued (or ends NODE_FAIL), a finished one stops waiting for that node to clean up.
  store::Mutation lost;
  for (auto& [id, job] : jobs_) {
    if (Carries(job.rec())) RepairCarrier(job, lost);
    std::set<std::string> gone;
    for (const auto& na : job.rec().allocation().nodes()) {
      if (!nodes_.Find(na.node()) &&
          (job.rec().state() == v1::RUNNING ||
           std::find(job.rec().completing_nodes().begin(), job.rec().completing_nodes().end(),
                     na.node()) != job.rec().completing_nodes().end())) {
        gone.insert(na.node());
      }
    }
    for (const auto& n : gone) {
      spdlog::warn("recovery: job={} held node {}, which the config no longer defines", id, n);
      LostOnNode(job, n, "node " + n + " is no longer in the configuration", now, lost);
    }
    // Lost nodes it still waits for; one the config no longer defines cannot run anything.
    const auto waits_for = job.rec().unconfirmed_nodes();
    for (const std::string& n : waits_for) {
      if (NodeEntry* node = nodes_.Find(n)) {
        node->unconfirmed_jobs.insert(id);
      } else {
        Remove(job.rec_.mutable_unconfirmed_nodes(), n);
        lost.PutJob(job.rec());
      }
    }
  }
  return ctx_.Commit(lost);
}

// ---------------------------------------------------------------------------------------------
// Submission

Status JobManager::Submit(std::vector<v1::JobRecord> recs, const v1::JobPayload& payload,
                          const core::JobRequest& request, const v1::MetaRecord& next_meta,
                          TimeMs now, std::shared_ptr<const std::vector<uint32_t>> tasks) {
  MUSTER_RETURN_IF_ERROR_PREPEND(ctx_.RoomForNewWork(), "job not accepted");
  store::Mutation m;
  std::vector<v1::JobRecord> next;
  for (const v1::JobRecord& r : recs) {
    const bool held = r.spec().hold();
    JobChange c{.to = v1::PENDING,
                .reason = held                            ? JobReason::kJobHeldUser
                          : r.dependency_terms_size() > 0 ? JobReason::kDependency
                                                          : JobReason::kNone,
                .detail = held ? std::optional<std::string>("held at submission (--hold)")
                          : r.dependency_terms_size() > 0
                              ? std::optional<std::string>("waits for --dependency=" +
                                                           r.spec().dependency())
                              : std::nullopt};
    next.push_back(NextRecord(r, c, now));
    m.PutJob(next.back());
  }
  // Once for a whole array (under its id, the first task's): its tasks share the script.
  if (!recs.empty()) m.PutJobPayload(recs.front().id(), payload);
  m.PutMeta(next_meta);
  MUSTER_RETURN_IF_ERROR_PREPEND(ctx_.Commit(m), "job not accepted: cannot persist it");
  ctx_.meta() = next_meta;
  for (v1::JobRecord& r : next) {
    const uint64_t id = r.id();
    JobEntry e(std::move(r), &request, tasks);  // array tasks share one request
    if (e.rec().spec().interactive()) {
      e.orphan_since_ms = now;  // its client attaches next
      interactive_.insert(id);
    }
    JobEntry& job = Insert(std::move(e));
    MarkPending(job);
    NoteCarrier(job);
    stored_.Add(job.rec());
  }
  ctx_.RequestPass();
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// scancel

v1::CancelJobResponse JobManager::Cancel(const Caller& caller, const v1::CancelJobRequest& req,
                                         TimeMs now) {
  v1::CancelJobResponse resp;
  // A signal splits nothing off an array: a task that has not started cannot take one.
  const Status not_started = FailedPrecondition("Job is pending execution");
  for (const Target& t : Targets(caller, "cancel", {req.job_ids().begin(), req.job_ids().end()},
                                 {req.single_job_ids().begin(), req.single_job_ids().end()},
                                 req.signal() != 0 ? &not_started : nullptr)) {
    const uint64_t id = t.id;
    v1::CancelJobResult* r = resp.add_results();
    r->set_job_id(id);
    auto fail = [&](const Status& s) {
      r->set_code(static_cast<int>(s.code()));
      r->set_message(s.message());
    };
    if (!t.status.ok()) {
      fail(t.status);
      continue;
    }
    JobEntry* job = Find(id);
    if (!job) {
      fail(NotFound("job " + std::to_string(id) + " does not exist"));
      continue;
    }
    if (Status s = CheckJobAccess(caller, job->rec(), "cancel", ctx_.config()); !s.ok()) {
      fail(s);
      continue;
    }
    const v1::JobState st = job->rec().state();
    if (req.signal() != 0) {
      // A signal, not a cancel: nothing changes in the job's record.
      if (st != v1::RUNNING || job->rec().cancel_requested()) {
        fail(FailedPrecondition(st == v1::PENDING ? "Job is pending execution"
                                                  : "Job/step already completing or completed"));
        continue;
      }
      const auto& nodes = job->rec().allocation().nodes();
      for (int i = 0; i < nodes.size(); ++i) {
        v1::ControllerMessage msg;
        v1::SignalJob* s = msg.mutable_signal_job();
        s->set_job_id(id);
        s->set_signal(req.signal());
        s->set_run(job->rec().requeue_count());
        s->set_steps(!req.batch_only() || req.full());
        s->set_batch((req.batch_only() || req.full()) && i == 0);
        ctx_.Send(nodes[i].node(), std::move(msg));
      }
      spdlog::info("signal job={} sig={} user={}", id, req.signal(), caller.user);
      continue;
    }
    if (st != v1::PENDING && (st != v1::RUNNING || job->rec().cancel_requested())) {
      continue;  // finished or already on its way down: nothing to do (Slurm is silent too)
    }
    if (job->rec().spec().interactive()) {
      // No batch script to wait for: the allocation ends now and its tasks are stopped.
      EndAllocation(*job, v1::CANCELLED, JobReason::kNone,
                    "cancelled by " + caller.user + (st == v1::PENDING ? "" : " while running"),
                    now, 0, 0);
      continue;
    }
    if (st == v1::PENDING) {
      Status s = Transition(
          *job, {.to = v1::CANCELLED, .detail = "cancelled by " + caller.user + " while pending"},
          now);
      if (!s.ok()) {
        fail(s);
        continue;
      }
    } else {
      // Not a state change yet: it ends CANCELLED when its batch script is gone.
      v1::JobRecord next = job->rec();
      next.set_cancel_requested(true);
      store::Mutation m;
      m.PutJob(next);
      if (Status s = ctx_.Commit(m); !s.ok()) {
        fail(s);
        continue;
      }
      job->rec_ = std::move(next);
      for (const auto& na : job->rec().allocation().nodes()) {
        SendTerminate(na.node(), *job, "cancelled");
      }
    }
    spdlog::info("cancel job={} user={} state={}", id, caller.user, v1::JobState_Name(st));
  }
  return resp;
}

// ---------------------------------------------------------------------------------------------
// scontrol hold / release / requeue

v1::UpdateJobResponse JobManager::Update(const Caller& caller, const v1::UpdateJobRequest& req,
                                         TimeMs now) {
  v1::UpdateJobResponse resp;
  // An array's id is all of its tasks (as scontrol hold/release ARRAY_ID).
  for (const Target& t : Targets(caller, "hold, release or requeue",
                                 {req.job_ids().begin(), req.job_ids().end()}, {})) {
    const uint64_t id = t.id;
    const JobEntry* named = Find(id);
    const bool on_running = req.action() == v1::UpdateJobRequest::SUSPEND ||
                            req.action() == v1::UpdateJobRequest::RESUME;
    if (t.by_array && t.status.ok() && named && req.action() != v1::UpdateJobRequest::REQUEUE &&
        named->rec().state() != (on_running ? v1::RUNNING : v1::PENDING)) {
      // A hold or release of an array is about its tasks that still wait; a suspend or resume
      // about those that run.
      continue;
    }
    v1::CancelJobResult* r = resp.add_results();
    r->set_job_id(id);
    auto fail = [&](StatusCode code, const std::string& m) {
      r->set_code(static_cast<int>(code));
      r->set_message(m);
    };
    if (!t.status.ok()) {
      fail(t.status.code(), t.status.message());
      continue;
    }
    JobEntry* job = Find(id);
    const std::string jid = std::to_string(id);
    if (!job) {
      fail(StatusCode::kNotFound, "job " + jid + " does not exist");
      continue;
    }
    // Operators suspend and resume anyone's jobs; the rest is the owner's (or an admin's).
    if (Status s = on_running ? Authorize(caller, Action::kSuspendJobs)
                              : CheckJobAccess(caller, job->rec(), "hold, release or requeue",
                                               ctx_.config());
        !s.ok()) {
      fail(s.code(), s.message());
      continue;
    }
    const v1::JobRecord& rec = job->rec();
    switch (req.action()) {
      case v1::UpdateJobRequest::HOLD:
      case v1::UpdateJobRequest::RELEASE: {
        const bool hold = req.action() == v1::UpdateJobRequest::HOLD;
        if (rec.state() != v1::PENDING) {
          fail(StatusCode::kFailedPrecondition,
               "job " + jid + " is not pending (" + v1::JobState_Name(rec.state()) + ")");
          continue;
        }
        if (rec.spec().hold() == hold) continue;  // already so: nothing to do, as Slurm
        const bool admin_hold = core::ParseReason(rec.reason()) == JobReason::kJobHeldAdmin;
        if (!hold && admin_hold && !May(caller, Action::kReleaseAdminHold)) {
          fail(StatusCode::kPermissionDenied, "job " + jid + " was held by an admin");
          continue;
        }
        JobChange c{.to = v1::PENDING, .hold = hold};
        if (hold) {
          c.reason = May(caller, Action::kHoldAsAdmin) && caller.uid != rec.spec().uid()
                         ? JobReason::kJobHeldAdmin
                         : JobReason::kJobHeldUser;
          c.detail = "held by " + caller.user;
        } else {
          c.detail = "";
        }
        if (Status s = Transition(*job, c, now); !s.ok()) {
          fail(s.code(), s.message());
          continue;
        }
        break;
      }
      case v1::UpdateJobRequest::REQUEUE: {
        if (rec.state() != v1::RUNNING || rec.cancel_requested()) {
          fail(StatusCode::kFailedPrecondition,
               "job " + jid + " is not running (" + v1::JobState_Name(rec.state()) + ")");
          continue;
        }
        if (rec.spec().no_requeue() || rec.spec().interactive()) {
          fail(StatusCode::kFailedPrecondition,
               "job " + jid +
                   (rec.spec().interactive() ? " is an srun/salloc allocation"
                                             : " was submitted with --no-requeue") +
                   "; it cannot be requeued");
          continue;
        }
        store::Mutation m;
        RequeueOrFail(*job, JobReason::kJobRequeued, "requeued by " + caller.user, now, m);
        ctx_.CommitOrDie(m);
        break;
      }
      case v1::UpdateJobRequest::SUSPEND:
      case v1::UpdateJobRequest::RESUME: {
        const bool suspend = req.action() == v1::UpdateJobRequest::SUSPEND;
        if (rec.state() != v1::RUNNING || rec.cancel_requested() || rec.preempt_time_ms() > 0) {
          fail(StatusCode::kFailedPrecondition,
               "job " + jid + " is not running (" + v1::JobState_Name(rec.state()) + ")");
          continue;
        }
        if (suspend == (rec.suspend_time_ms() > 0)) {
          fail(StatusCode::kFailedPrecondition,
               "job " + jid + (suspend ? " is already suspended" : " is not suspended"));
          continue;
        }
        if (!suspend && !rec.admin_suspended()) {
          // Its CPUs are lent to the job that preempted it: taking them back now would only
          // have it preempted again.
          fail(StatusCode::kFailedPrecondition,
               "job " + jid + " was suspended by preemption (for job " +
                   std::to_string(rec.preempted_by()) +
                   "); it continues by itself once its CPUs are free");
          continue;
        }
        store::Mutation m;
        if (suspend) {
          SuspendByAdmin(*job, caller.user, now, m);
        } else {
          ResumeByAdmin(*job, caller.user, now, m);
        }
        ctx_.CommitOrDie(m);
        break;
      }
      default:
        fail(StatusCode::kInvalidArgument, "unknown job update action");
        continue;
    }
    spdlog::info("update job={} action={} user={}", id,
                 v1::UpdateJobRequest::Action_Name(req.action()), caller.user);
  }
  return resp;
}

// ---------------------------------------------------------------------------------------------
// Retention

void JobManager::Archive(TimeMs now) {
  const TimeMs retention = static_cast<TimeMs>(ctx_.scheduling().finished_job_retention_ms);
  store::Mutation m;
  std::vector<std::pair<TimeMs, uint64_t>> purge;
  for (const auto& entry : finished_) {
    if (now - entry.first < retention) break;
    const JobEntry& job = jobs_.at(entry.second);
    if (IsActive(job.rec())) continue;  // still cleaning up somewhere
    m.ArchiveJob(job.rec());
    purge.push_back(entry);
    if (purge.size() >= 10'000) break;  // bound one write
  }
  if (purge.empty()) return;
  // An array's shared script goes with its last task, any other job's with it.
  std::set<uint64_t> purged, arrays, payloads_gone;
  for (const auto& entry : purge) {
    purged.insert(entry.second);
    const v1::JobRecord& rec = jobs_.at(entry.second).rec();
    if (rec.has_array()) {
      arrays.insert(rec.array().array_job_id());
    } else {
      payloads_gone.insert(rec.id());
    }
  }
  for (uint64_t array_id : arrays) {
    bool last = true;
    for (auto it = jobs_.lower_bound(array_id); it != jobs_.end() && it->second.rec().has_array() &&
                                                it->second.rec().array().array_job_id() == array_id;
         ++it) {
      last = last && purged.count(it->first);
    }
    if (last) {
      m.DeleteJobPayload(array_id);
      payloads_gone.insert(array_id);
    }
  }
  // Buffered: a lost archive write only means the jobs are archived again later.
  Status st = ctx_.Commit(m, store::Durability::kBuffered);
  if (!st.ok()) {
    spdlog::error("cannot archive {} finished jobs (will retry): {}", purge.size(), st.ToString());
    return;
  }
  for (const auto& entry : purge) {
    if (const v1::JobRecord& r = jobs_.at(entry.second).rec(); r.has_array()) {
      // An ended carrier goes with the tasks it stood for (its record keeps them).
      auto it = carriers_.find(r.array().array_job_id());
      if (it != carriers_.end() && it->second == entry.second) carriers_.erase(it);
    }
    JobEntry& gone = jobs_.at(entry.second);
    IndexNames(gone.rec(), false);
    Recount(gone);  // ended: it leaves the counts (if it was still in them)
    jobs_.erase(entry.second);
    finished_.erase(entry);
  }
  for (uint64_t id : payloads_gone) stored_.Remove(id);
  if (!order_stale_) std::erase_if(order_, [&](const auto& e) { return !jobs_.count(e.first); });
}

}  // namespace muster::controller
