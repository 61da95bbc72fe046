#include "submission_pipeline.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "account_manager.h"
#include "array_tasks.h"
#include "dependency_tracker.h"
#include "engine_context.h"
#include "job_manager.h"
#include "job_spec.h"
#include "license_book.h"
#include "limit_tracker.h"
#include "muster/common/strings.h"
#include "muster/controller/access.h"
#include "qos_manager.h"
#include "reservation_manager.h"
#include "scheduler_loop.h"
#include "spec_bounds.h"
#include "stored_bytes.h"

namespace muster::controller {

const std::vector<SubmissionPipeline::NamedStage>& SubmissionPipeline::Stages() {
  static const std::vector<NamedStage> kStages = {
      {"identify", &SubmissionPipeline::Identify},
      {"admit", &SubmissionPipeline::Admit},
      {"associate", &SubmissionPipeline::Associate},
      {"record", &SubmissionPipeline::Record},
      {"expand array", &SubmissionPipeline::ExpandArray},
      {"check limits", &SubmissionPipeline::CheckLimits},
  };
  return kStages;
}

std::vector<const char*> SubmissionPipeline::StageNames() {
  std::vector<const char*> names;
  for (const NamedStage& s : Stages()) names.push_back(s.name);
  return names;
}

Result<v1::SubmitJobResponse> SubmissionPipeline::Submit(const Caller& caller,
                                                         const v1::SubmitJobRequest& req,
                                                         TimeMs now) {
  // Sizes first: nothing below may work on an unbounded request.
  MUSTER_RETURN_IF_ERROR(CheckJobSpecBounds(req.spec(), ctx_.config().nodes.size()));
  Submission s{.caller = caller, .now = now, .spec = req.spec()};
  if (req.has_priority()) s.priority = req.priority();
  for (const NamedStage& stage : Stages()) MUSTER_RETURN_IF_ERROR((this->*stage.run)(s));
  v1::JobRecord& rec = s.rec;
  // --test-only: everything a real submission is checked against (the limits and the per-user
  // cap included), then a forecast instead of a job.
  if (req.test_only()) {
    v1::SubmitJobResponse resp;
    resp.set_job_id(rec.id());
    *resp.mutable_test_only() = scheduler_.TestOnly(rec.id(), s.request, now);
    return resp;
  }
  v1::MetaRecord next_meta = ctx_.meta();
  next_meta.set_next_job_id(next_meta.next_job_id() + s.count);
  // The script and environment go to their own record, read back at launch only.
  v1::JobPayload payload;
  payload.set_script(std::move(*rec.mutable_spec()->mutable_script()));
  *payload.mutable_environment() = std::move(*rec.mutable_spec()->mutable_environment());
  rec.mutable_spec()->clear_script();
  rec.mutable_spec()->clear_environment();
  std::vector<v1::JobRecord> recs;
  for (uint64_t k = 0; k < (s.one_record ? 1 : s.count); ++k) {
    recs.push_back(rec);
    recs.back().set_id(rec.id() + k);
    if (!s.tasks.empty()) {
      *recs.back().mutable_array() = s.array;
      recs.back().mutable_array()->set_task_id(s.tasks[k]);
    }
  }
  if (s.one_record && s.count > 1) {
    WaitingTasks::Range(1, static_cast<uint32_t>(s.count - 1)).WriteTo(&recs.front());
  }
  std::vector<uint64_t> ids;
  for (const v1::JobRecord& r : recs) ids.push_back(r.id());
  MUSTER_RETURN_IF_ERROR(jobs_.Submit(
      std::move(recs), payload, s.request, next_meta, now,
      s.one_record ? std::make_shared<const std::vector<uint32_t>>(std::move(s.tasks)) : nullptr));
  if (rec.dependency_terms_size() > 0) {
    for (uint64_t id : ids) dependencies_.Track(id);
  }
  spdlog::info("submit job={} user={} nodes={} gpus_per_node={} partition={}{}", rec.id(),
               rec.spec().user(), rec.spec().nodes(), rec.spec().gpus_per_node(),
               Join({rec.spec().partitions().begin(), rec.spec().partitions().end()}, ","),
               s.spec.array().empty() ? "" : " array=" + s.spec.array());
  v1::SubmitJobResponse resp;
  resp.set_job_id(rec.id());
  return resp;
}

Status SubmissionPipeline::Identify(Submission& s) {
  v1::JobSpec& spec = s.spec;
  // The transport's credentials decide who the job runs as; only root may submit for others.
  const bool on_behalf = s.caller.uid == 0 && spec.uid() != 0 && !spec.user().empty();
  const bool claims = !spec.user().empty() || spec.uid() != 0 || spec.gid() != 0;
  if (s.caller.uid != 0 && claims &&
      (spec.uid() != s.caller.uid || spec.gid() != s.caller.gid ||
       (!spec.user().empty() && spec.user() != s.caller.user))) {
    // --uid/--gid: refused rather than quietly run as the caller.
    return PermissionDenied("only root may submit a job as another user or group (--uid, --gid)");
  }
  if (!on_behalf) {
    spec.set_uid(s.caller.uid);
    spec.set_gid(s.caller.gid);
    spec.set_user(s.caller.user);
  }
  // --mail-user defaults to the job's user (Slurm's).
  if (spec.mail_types() != 0 && spec.mail_user().empty()) spec.set_mail_user(spec.user());
  if (spec.interactive()) {
    if (!spec.script().empty()) {
      return InvalidArgument("an interactive allocation (srun/salloc) carries no batch script");
    }
  } else if (!StartsWith(spec.script(), "#!")) {
    return InvalidArgument(
        "this does not look like a batch script: the first line must start with #! "
        "(e.g. #!/bin/bash)");
  }
  if (spec.work_dir().empty() || spec.work_dir()[0] != '/') {
    return InvalidArgument("working directory must be an absolute path");
  }
  return Status::Ok();
}

Status SubmissionPipeline::Admit(Submission& s) {
  // Like Slurm's MaxJobCount, recently finished jobs still count until they are archived.
  if (jobs_.size() >= ctx_.scheduling().max_job_count) {
    return ResourceExhausted("the controller tracks " + std::to_string(jobs_.size()) +
                             " jobs, its limit (scheduling.max_job_count); try again later");
  }
  MUSTER_RETURN_IF_ERROR(
      NormalizeJobSpec(s.spec, ctx_.config(), ctx_.partition_limits(), &s.time_limit_ms));
  MUSTER_RETURN_IF_ERROR(CheckPartitionAccess(s.caller, s.spec, ctx_.config()));
  MUSTER_RETURN_IF_ERROR(CheckLicenses(s.spec, ctx_.config()));
  if (s.spec.nice() < 0) MUSTER_RETURN_IF_ERROR(Authorize(s.caller, Action::kNegativeNice));
  if (s.priority) {
    MUSTER_RETURN_IF_ERROR(Authorize(s.caller, Action::kSetPriority));
    if (*s.priority < 0 || *s.priority > 0xFFFFFFFFLL) {
      return InvalidArgument("--priority is 0 (multifactor) to 4294967295");
    }
  }
  return Status::Ok();
}

Status SubmissionPipeline::Associate(Submission& s) {
  v1::JobSpec& spec = s.spec;
  MUSTER_ASSIGN_OR_RETURN(std::string account,
                          accounts_.ResolveForJob(spec.user(), spec.account()));
  spec.set_account(std::move(account));
  if (!spec.qos().empty() && !qos_.Exists(spec.qos())) {
    return InvalidArgument("invalid qos '" + spec.qos().substr(0, 64) +
                           "': no such QoS (`sacctmgr show qos` lists them)");
  }
  MUSTER_ASSIGN_OR_RETURN(std::string qos,
                          accounts_.ResolveQos(spec.user(), spec.account(), spec.qos()));
  spec.set_qos(std::move(qos));
  if (!spec.reservation().empty()) {
    MUSTER_RETURN_IF_ERROR(
        reservations_.CheckUse(s.caller, spec.reservation(), spec.user(), spec.account()));
  }
  if (s.time_limit_ms == 0) s.time_limit_ms = limits_.WallLimit(spec);
  return Status::Ok();
}

Status SubmissionPipeline::Record(Submission& s) {
  v1::JobRecord& rec = s.rec;
  rec.set_id(ctx_.meta().next_job_id());
  *rec.mutable_spec() = s.spec;
  rec.set_submit_time_ms(s.now);
  rec.set_time_limit_ms(s.time_limit_ms);
  rec.set_priority(s.priority.value_or(0));  // 0: multifactor; an admin may fix it later
  if (!s.spec.dependency().empty()) {
    MUSTER_RETURN_IF_ERROR(dependencies_.TermsFor(&s.spec, &rec,
                                                  SeesOnlyOwnJobs(s.caller, ctx_.config())
                                                      ? std::optional<uint32_t>(s.caller.uid)
                                                      : std::nullopt));
    *rec.mutable_spec() = s.spec;
  }
  s.request = ToCoreRequest(rec);
  return views_.CanEverRun(s.request);
}

Status SubmissionPipeline::ExpandArray(Submission& s) {
  // A job array: one job per task id, with consecutive job ids from the array's own. Its tasks
  // wait as one record (array_tasks.h) but for aftercorr, which each task resolves for itself.
  if (s.spec.array().empty()) return Status::Ok();
  if (s.spec.interactive()) return InvalidArgument("an srun/salloc allocation cannot be an array");
  const SchedulingConfig& sc = ctx_.scheduling();
  MUSTER_ASSIGN_OR_RETURN(s.tasks, ParseArraySpec(s.spec.array(), sc.max_array_size, &s.array));
  s.one_record = std::none_of(
      s.rec.dependency_terms().begin(), s.rec.dependency_terms().end(),
      [](const v1::DependencyRecord& t) { return t.kind() == v1::DependencyRecord::AFTERCORR; });
  const size_t records = s.one_record ? 1 : s.tasks.size();
  if (jobs_.size() + records > sc.max_job_count) {
    return ResourceExhausted("an array of " + std::to_string(s.tasks.size()) +
                             " tasks would pass the controller's job limit "
                             "(scheduling.max_job_count); try again later");
  }
  s.array.set_array_job_id(s.rec.id());
  s.count = s.tasks.empty() ? 1 : s.tasks.size();
  return Status::Ok();
}

Status SubmissionPipeline::CheckLimits(Submission& s) {
  const v1::JobSpec& spec = s.spec;
  const core::JobRequest& request = s.request;
  MUSTER_RETURN_IF_ERROR(limits_.CheckSubmit(
      spec, s.time_limit_ms,
      {request.nodes, request.nodes * request.gpus_per_node, request.gpu_type}, s.count));
  // One user's stored scripts cannot fill the store (and so stop everyone's submissions).
  const uint64_t payload_bytes = PayloadBytesOf(spec);
  MUSTER_RETURN_IF_ERROR(limits_.CheckStored(spec, payload_bytes));
  s.rec.set_payload_bytes(payload_bytes);
  // Per user, like Slurm's MaxSubmitJobs: one user's flood of submissions cannot fill the
  // controller's job table for everyone. Root is not limited.
  const SchedulingConfig& sc = ctx_.scheduling();
  if (sc.max_pending_jobs_per_user > 0 && spec.uid() != 0 &&
      jobs_.PendingOf(spec.uid()) + s.count > sc.max_pending_jobs_per_user) {
    return ResourceExhausted(
        "user " + spec.user() + " has " + std::to_string(jobs_.PendingOf(spec.uid())) +
        " pending jobs; at most " + std::to_string(sc.max_pending_jobs_per_user) +
        " may wait at once (scheduling.max_pending_jobs_per_user)");
  }
  return Status::Ok();
}

}  // namespace muster::controller
