// Engine: builds the managers, recovers them from the store, and routes each request and event to
// the manager that owns it (engine.h lists them).
#include "muster/controller/engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "account_manager.h"
#include "allocation_manager.h"
#include "audit_log.h"
#include "cluster_views.h"
#include "default_pass_policy.h"
#include "dependency_tracker.h"
#include "engine_context.h"
#include "fair_share.h"
#include "history_retention.h"
#include "job_explainer.h"
#include "job_mail.h"
#include "job_manager.h"
#include "job_modifier.h"
#include "job_views.h"
#include "license_book.h"
#include "limit_tracker.h"
#include "muster/common/strings.h"
#include "muster/common/version.h"
#include "muster/controller/access.h"
#include "muster/credentials/step_credential.h"
#include "node_manager.h"
#include "node_overlay.h"
#include "node_views.h"
#include "partition_overlay.h"
#include "preemptor.h"
#include "qos_manager.h"
#include "queue_orders.h"
#include "reservation_manager.h"
#include "resource_ledger.h"
#include "scheduler_loop.h"
#include "spec_bounds.h"
#include "step_manager.h"
#include "stored_bytes.h"
#include "submission_pipeline.h"

namespace muster::controller {
namespace {

// What a scontrol update asked for, as the audit log shows it ("TimeLimit=60 Nice=5"; the
// protobuf lite runtime has no text format of its own).
std::string ModificationText(const v1::JobModification& m) {
  std::string out;
  auto add = [&](const std::string& kv) { out += (out.empty() ? "" : " ") + kv; };
  if (m.has_priority()) add("Priority=" + std::to_string(m.priority()));
  if (m.has_nice()) add("Nice=" + std::to_string(m.nice()));
  if (m.has_time_limit_ms()) add("TimeLimit=" + std::to_string(m.time_limit_ms() / 60'000));
  if (m.partitions_size() > 0) {
    add("Partition=" + Join({m.partitions().begin(), m.partitions().end()}, ","));
  }
  if (m.has_qos()) add("QOS=" + m.qos());
  if (m.has_account()) add("Account=" + m.account());
  if (m.has_dependency()) add("Dependency=" + m.dependency());
  if (m.has_begin_time_ms()) add("StartTime=" + std::to_string(m.begin_time_ms() / 1000));
  return out.substr(0, 1024);
}

bool SamePlacement(const core::NodePlacement& a, const core::NodePlacement& b) {
  return a.node == b.node && a.cpus == b.cpus && a.gpus == b.gpus && a.mem_mb == b.mem_mb &&
         a.gres == b.gres;
}

// scheduling.order and backfill_order: Muster's multifactor order (the default policy itself), or
// another order, or another backfill order, around it (the config's parser has checked the names).
std::unique_ptr<PassPolicy> MakePassPolicy(const SchedulingConfig& s,
                                           std::unique_ptr<PassPolicy> base, const TimeMs& origin) {
  const auto kind = OrderedPassPolicy::Parse(s.order);
  const auto backfill = OrderedPassPolicy::ParseBackfillOrder(s.backfill_order)
                            .value_or(OrderedPassPolicy::BackfillOrder::kPriority);
  if (!kind && backfill == OrderedPassPolicy::BackfillOrder::kPriority) return base;
  return std::make_unique<OrderedPassPolicy>(kind, backfill, std::move(base), origin,
                                             kind ? static_cast<TimeMs>(s.protect_after_ms) : 0);
}

}  // namespace

Engine::Engine(EngineOptions options, store::StateStore* store)
    : ctx_(std::make_unique<EngineContext>(std::move(options), store)),
      ledger_(std::make_unique<ResourceLedger>(ctx_->config())),
      nodes_(std::make_unique<NodeManager>(*ctx_)),
      jobs_(std::make_unique<JobManager>(*ctx_, *nodes_, *ledger_)),
      steps_(std::make_unique<StepManager>(*ctx_, *jobs_, *nodes_, *ledger_)),
      allocations_(std::make_unique<AllocationManager>(*ctx_, *jobs_)),
      job_views_(std::make_unique<JobViews>(*ctx_, *jobs_)),
      node_views_(std::make_unique<NodeViews>(*ctx_, *nodes_, *ledger_)),
      history_(std::make_unique<HistoryRetention>(*ctx_)),
      audit_(std::make_unique<AuditLog>(*ctx_)),
      accounts_(std::make_unique<AccountManager>(*ctx_)),
      fair_share_(std::make_unique<FairShare>(*ctx_, *jobs_, *accounts_)),
      dependencies_(std::make_unique<DependencyTracker>(*ctx_, *jobs_)),
      qos_(std::make_unique<QosManager>(*ctx_)),
      reservations_(std::make_unique<ReservationManager>(*ctx_, *accounts_)),
      limits_(std::make_unique<LimitTracker>(*ctx_, *accounts_, *qos_, *jobs_)),
      quotas_(std::make_unique<QuotaBook>(*ctx_, *accounts_, *jobs_, *limits_)),
      views_(std::make_unique<ClusterViews>(*ctx_, *jobs_, *nodes_, *ledger_, *reservations_)),
      preemptor_(std::make_unique<Preemptor>(*ctx_, *jobs_, *qos_, *ledger_, *views_, *quotas_)),
      licenses_(std::make_unique<LicenseBook>(*ctx_, *jobs_)),
      policy_(MakePassPolicy(
          ctx_->config().scheduling,
          std::make_unique<DefaultPassPolicy>(*fair_share_, *qos_, *limits_, *licenses_, *quotas_,
                                              *reservations_, *preemptor_),
          start_time_ms_)),
      scheduler_(
          std::make_unique<SchedulerLoop>(*ctx_, *jobs_, *nodes_, *ledger_, *views_, *policy_)),
      explainer_(std::make_unique<JobExplainer>(*jobs_, *scheduler_, *views_, *limits_, *quotas_)),
      modifier_(std::make_unique<JobModifier>(*ctx_, *jobs_, *accounts_, *qos_, *limits_,
                                              *dependencies_, *views_)),
      submissions_(std::make_unique<SubmissionPipeline>(*ctx_, *jobs_, *accounts_, *qos_,
                                                        *reservations_, *limits_, *dependencies_,
                                                        *scheduler_, *views_)) {
  mail_ = std::make_unique<JobMail>(*ctx_, *jobs_);
  jobs_->SetMail(mail_.get());
  accounts_->SetQosExists([this](const std::string& name) { return qos_->Exists(name); });
  fair_share_->SetUsageFactor([this](const std::string& name) {
    const v1::QosRecord* q = qos_->Find(name);
    return q ? q->usage_factor() : 1.0;
  });
}

Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::Create(EngineOptions options, store::StateStore* store,
                                               TimeMs now) {
  const uint64_t min_epoch = options.min_epoch;
  MUSTER_ASSIGN_OR_RETURN(store::LoadedState state, store->LoadAll());
  // The file's partitions with those changed live laid over them: what every part sees.
  Config file = options.config;
  Overlaid overlaid = OverlayPartitions(file, state.partitions);
  // ...and the nodes' live features, weights and GRES.
  NodeSettingsMap settings;
  for (const v1::NodeRecord& r : state.nodes) {
    if (HasLiveSettings(r.settings())) settings[r.name()] = r.settings();
  }
  OverlayNodeSettings(overlaid.config, settings, &overlaid.problems);
  options.config = std::move(overlaid.config);
  auto engine = std::unique_ptr<Engine>(new Engine(std::move(options), store));
  engine->file_config_ = std::move(file);
  engine->partition_records_ = state.partitions;
  engine->recovery_problems_ = std::move(overlaid.problems);
  MUSTER_RETURN_IF_ERROR(engine->Recover(std::move(state), now, min_epoch));
  engine->WatchSpace();  // a start on a nearly full disk says so at once
  return engine;
}

Status Engine::Recover(store::LoadedState state, TimeMs now, uint64_t min_epoch) {
  recovery_problems_.insert(recovery_problems_.end(), state.problems.begin(), state.problems.end());
  for (const auto& p : recovery_problems_) spdlog::error("recovery: {}", p);

  uint64_t max_id = state.max_history_job_id;
  for (const auto& j : state.jobs) max_id = std::max(max_id, j.id());
  v1::MetaRecord& meta = ctx_->meta();
  if (state.meta) meta = *state.meta;
  meta.set_next_job_id(std::max<uint64_t>({meta.next_job_id(), max_id + 1, 1}));
  meta.set_epoch(std::max<uint64_t>(meta.epoch() + 1, min_epoch));
  // Made once, at the first start: every node's step key derives from it.
  if (meta.step_key_secret().size() != credentials::kKeySize) {
    meta.set_step_key_secret(credentials::NewSecret());
  }
  store::Mutation m;
  m.PutMeta(meta);
  qos_->Restore(state.qos, m);
  accounts_->Restore(state.accounts, state.users, m);
  reservations_->Restore(state.reservations, m);
  fair_share_->Restore(state.usage);
  MUSTER_RETURN_IF_ERROR_PREPEND(ctx_->Commit(m), "cannot record the new controller epoch");

  store::Mutation forgotten;
  for (const auto& nr : state.nodes) {
    if (!nodes_->Restore(nr, forgotten)) {
      spdlog::warn("recovery: node record for '{}', which the config no longer defines; ignored",
                   nr.name());
    }
  }
  MUSTER_RETURN_IF_ERROR_PREPEND(ctx_->Commit(forgotten),
                                 "cannot drop the live settings of removed nodes");
  auto index_of = [this](const std::string& name) { return ctx_->NodeIndex(name); };
  for (auto& rec : state.jobs) {
    ledger_->HoldRecovered(rec, index_of);
    if (rec.dependency_terms_size() > 0) dependencies_->Track(rec.id());
    jobs_->Restore(std::move(rec), now);
  }
  mail_->Recover();
  MUSTER_RETURN_IF_ERROR_PREPEND(jobs_->FinishRestore(now), "cannot record jobs of removed nodes");
  start_time_ms_ = now;
  nodes_->StartLiveness(now);  // nodes get node_down_ms to register
  spdlog::info("recovered epoch={} jobs={} next_job_id={} problems={}", meta.epoch(), jobs_->size(),
               meta.next_job_id(), recovery_problems_.size());
  ctx_->RequestPass();
  return Status::Ok();
}

const Config& Engine::config() const { return ctx_->config(); }
uint64_t Engine::epoch() const { return ctx_->epoch(); }
bool Engine::schedule_requested() const { return ctx_->schedule_requested(); }
std::vector<Outgoing> Engine::TakeOutgoing() { return ctx_->TakeOutgoing(); }
std::vector<MailNotice> Engine::TakeMail() { return ctx_->TakeMail(); }

// ---------------------------------------------------------------------------------------------
// User API

Result<v1::SubmitJobResponse> Engine::SubmitJob(const Caller& caller,
                                                const v1::SubmitJobRequest& req, TimeMs now) {
  return submissions_->Submit(caller, req, now);
}

Result<v1::CancelJobResponse> Engine::CancelJob(const Caller& caller,
                                                const v1::CancelJobRequest& req, TimeMs now) {
  MUSTER_RETURN_IF_ERROR(
      CheckIdCount(static_cast<size_t>(req.job_ids_size() + req.single_job_ids_size())));
  v1::CancelJobResponse resp = jobs_->Cancel(caller, req, now);
  AuditForeignJobs(caller, req.signal() != 0 ? "signal" : "cancel",
                   req.signal() != 0 ? "signal " + std::to_string(req.signal()) : "",
                   resp.results(), now);
  return resp;
}

Result<v1::UpdateJobResponse> Engine::UpdateJob(const Caller& caller,
                                                const v1::UpdateJobRequest& req, TimeMs now) {
  MUSTER_RETURN_IF_ERROR(CheckIdCount(static_cast<size_t>(req.job_ids_size())));
  if (req.action() == v1::UpdateJobRequest::MODIFY || req.action() == v1::UpdateJobRequest::TOP) {
    v1::UpdateJobResponse resp;
    std::vector<JobManager::Target> targets =
        jobs_->Targets(caller, "update", {req.job_ids().begin(), req.job_ids().end()}, {});
    // top's list is in order: the first named ends first, so it is moved last.
    if (req.action() == v1::UpdateJobRequest::TOP) std::reverse(targets.begin(), targets.end());
    MUSTER_RETURN_IF_ERROR(CheckIdCount(targets.size()));
    for (const JobManager::Target& t : targets) {
      const uint64_t id = t.id;
      v1::CancelJobResult* r = resp.add_results();
      r->set_job_id(id);
      Status s = !t.status.ok() ? t.status
                 : req.action() == v1::UpdateJobRequest::TOP
                     ? modifier_->Top(caller, id)
                     : modifier_->Modify(caller, id, req.modify());
      if (!s.ok()) {
        r->set_code(static_cast<int>(s.code()));
        r->set_message(s.message());
      }
    }
    AuditForeignJobs(caller, req.action() == v1::UpdateJobRequest::TOP ? "top" : "update",
                     ModificationText(req.modify()), resp.results(), now);
    return resp;
  }
  v1::UpdateJobResponse resp = jobs_->Update(caller, req, now);
  std::string action = v1::UpdateJobRequest::Action_Name(req.action());
  for (char& ch : action) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  AuditForeignJobs(caller, action, "", resp.results(), now);
  return resp;
}

void Engine::AuditForeignJobs(
    const Caller& caller, const std::string& action, const std::string& detail,
    const google::protobuf::RepeatedPtrField<v1::CancelJobResult>& results, TimeMs now) {
  // The caller's own jobs are its business; what it did (or tried) to others' is audited.
  std::vector<uint64_t> foreign;
  Status first_error;
  bool refused = false;
  for (const auto& r : results) {
    const JobEntry* job = jobs_->Covering(r.job_id());  // a refused task may still wait in one
    if (!job || job->rec().spec().uid() == caller.uid) continue;
    foreign.push_back(r.job_id());
    if (r.code() != 0 && first_error.ok()) {
      first_error = Status(static_cast<StatusCode>(r.code()), r.message());
    }
    refused = refused || r.code() == static_cast<int>(StatusCode::kPermissionDenied);
  }
  if (foreign.empty()) return;
  audit_->Record(caller, action, JobsTarget(foreign), detail, !refused, first_error, now);
}

Result<v1::UpdateNodeResponse> Engine::UpdateNode(const Caller& caller,
                                                  const v1::UpdateNodeRequest& req, TimeMs now) {
  const bool drain = req.action() == v1::UpdateNodeRequest::DRAIN;
  const bool resume = req.action() == v1::UpdateNodeRequest::RESUME;
  const bool confirm = req.action() == v1::UpdateNodeRequest::CONFIRM_DOWN;
  const bool reboot = req.action() == v1::UpdateNodeRequest::REBOOT;
  const bool cancel_reboot = req.action() == v1::UpdateNodeRequest::CANCEL_REBOOT;
  Result<v1::UpdateNodeResponse> resp = [&]() -> Result<v1::UpdateNodeResponse> {
    if (req.action() == v1::UpdateNodeRequest::SET ||
        req.action() == v1::UpdateNodeRequest::RESET) {
      // They replace the engine: ControllerRunner::ChangeNodes takes them.
      return InvalidArgument("node settings are not changed here");
    }
    if (reboot) return nodes_->RequestReboot(caller, req, now);
    if (cancel_reboot) return nodes_->CancelReboot(caller, req);
    if (!confirm) return nodes_->Update(caller, req, now);
    MUSTER_ASSIGN_OR_RETURN(auto lost, nodes_->ConfirmableDown(caller, req.nodes()));
    return jobs_->ConfirmDown(lost, caller.user);
  }();
  audit_->Record(caller,
                 drain           ? "drain"
                 : resume        ? "resume"
                 : confirm       ? "confirm-down"
                 : reboot        ? "reboot"
                 : cancel_reboot ? "cancel-reboot"
                                 : "update",
                 "nodes " + std::string(req.nodes().substr(0, 1024)),
                 drain || reboot ? std::string(req.reason().substr(0, 1024)) : "",
                 resp.status().code() != StatusCode::kPermissionDenied, resp.status(), now);
  return resp;
}

Result<v1::ListAuditResponse> Engine::ListAudit(const Caller& caller,
                                                const v1::ListAuditRequest& req, TimeMs now) const {
  return audit_->List(caller, req, now);
}

Result<v1::CreateStepResponse> Engine::CreateStep(const Caller& caller,
                                                  const v1::CreateStepRequest& req, TimeMs now) {
  auto resp = steps_->CreateStep(caller, req, now);
  const JobEntry* job = jobs_->Find(req.job_id());
  if (job && job->rec().spec().uid() != caller.uid) {
    audit_->Record(caller, "step", JobsTarget({req.job_id()}), "",
                   resp.status().code() != StatusCode::kPermissionDenied, resp.status(), now);
  }
  return resp;
}

Result<v1::ReleaseAllocationResponse> Engine::ReleaseAllocation(
    const Caller& caller, const v1::ReleaseAllocationRequest& req, TimeMs now) {
  MUSTER_RETURN_IF_ERROR(allocations_->Release(caller, req, now));
  return v1::ReleaseAllocationResponse();
}

Result<v1::AttachAllocationResponse> Engine::AttachAllocation(
    const Caller& caller, const v1::AttachAllocationRequest& req, TimeMs now) {
  auto attached = allocations_->Attach(caller, req);
  const JobEntry* target = jobs_->Find(req.job_id());
  if (target && target->rec().spec().uid() != caller.uid) {
    audit_->Record(caller, "attach", JobsTarget({req.job_id()}), "",
                   attached.status().code() != StatusCode::kPermissionDenied, attached.status(),
                   now);
  }
  MUSTER_ASSIGN_OR_RETURN(const JobEntry* job, std::move(attached));
  v1::AttachAllocationResponse resp;
  *resp.mutable_job() = job_views_->ToJobInfo(*job);
  return resp;
}

void Engine::AllocationClientGone(uint64_t job_id, TimeMs now) {
  allocations_->ClientGone(job_id, now);
}

// ---------------------------------------------------------------------------------------------
// Views

v1::ListJobsRequest Engine::ScopedToCaller(const Caller& caller,
                                           const v1::ListJobsRequest& req) const {
  v1::ListJobsRequest scoped = req;
  if (!SeesOnlyOwnJobs(caller, ctx_->config())) return scoped;
  scoped.clear_users();
  scoped.add_users(caller.user);
  return scoped;
}

v1::ListAccountingRequest Engine::ScopedToCaller(const Caller& caller,
                                                 const v1::ListAccountingRequest& req) const {
  v1::ListAccountingRequest scoped = req;
  // A finished job's record is usage too (sacct, sreport, muster report usage).
  const Config::PrivateData hidden = HiddenFrom(caller, ctx_->config());
  if (!hidden.jobs && !hidden.usage) return scoped;
  scoped.clear_users();
  scoped.add_users(caller.user);
  return scoped;
}

Status Engine::CheckJobVisible(const Caller& caller, uint64_t job_id) const {
  if (!SeesOnlyOwnJobs(caller, ctx_->config())) return Status::Ok();
  const JobEntry* job = jobs_->Covering(job_id);  // an array task waiting in its carrier too
  if (!job || job->rec().spec().uid() == caller.uid) return Status::Ok();  // NOT_FOUND follows
  return PermissionDenied("job " + std::to_string(job_id) +
                          " is another user's (this cluster keeps jobs private)");
}

Result<v1::GetJobResponse> Engine::GetJob(const Caller& caller,
                                          const v1::GetJobRequest& req) const {
  MUSTER_RETURN_IF_ERROR(CheckJobVisible(caller, req.job_id()));
  MUSTER_ASSIGN_OR_RETURN(v1::GetJobResponse resp, job_views_->GetJob(req));
  if (!req.with_script() && !req.with_environment()) return resp;
  // The script and environment (secrets, often): the owner's and admins', whatever private_data
  // says, and only while the job is kept (its payload goes when it is archived).
  const std::string id = std::to_string(req.job_id());
  const JobEntry* job = jobs_->Covering(req.job_id());
  if (!job) return NotFound("the batch script of job " + id + " is no longer kept");
  const v1::JobRecord& r = job->rec();
  MUSTER_RETURN_IF_ERROR(
      CheckJobAccess(caller, r, "read the batch script and environment of", ctx_->config()));
  if (r.spec().interactive()) {
    return FailedPrecondition("job " + id + " has no batch script (an srun/salloc allocation)");
  }
  // An array's tasks share their array's payload (an older task may have one of its own).
  auto payload = ctx_->store().ReadJobPayload(r.has_array() ? r.array().array_job_id() : r.id());
  if (!payload.ok() && r.has_array()) payload = ctx_->store().ReadJobPayload(r.id());
  if (!payload.ok()) return NotFound("the batch script of job " + id + " is no longer kept");
  if (req.with_script()) resp.set_script(std::move(*payload->mutable_script()));
  if (req.with_environment())
    *resp.mutable_environment() = std::move(*payload->mutable_environment());
  return resp;
}

uint64_t Engine::VisitJobs(const Caller& caller, const v1::ListJobsRequest& req,
                           const JobRowVisitor& visit) const {
  if (!SeesOnlyOwnJobs(caller, ctx_->config())) return job_views_->VisitJobs(req, visit);
  return job_views_->VisitJobs(ScopedToCaller(caller, req), visit);
}

Result<v1::ListJobsResponse> Engine::ListJobs(const Caller& caller,
                                              const v1::ListJobsRequest& req) const {
  v1::ListJobsResponse resp;
  bool parsed = true;
  v1::ListJobsRequest page = ScopedToCaller(caller, req);
  for (;;) {
    const uint64_t next =
        VisitJobs(caller, page, [&](const v1::JobInfo& row, std::string_view spec_fields) {
          v1::JobInfo* job = resp.add_jobs();
          parsed = parsed &&
                   job->ParseFromArray(spec_fields.data(), static_cast<int>(spec_fields.size()));
          job->MergeFrom(row);
          // A brief carrier's waiting tasks, a row each, as a client shows them.
          if (job->array_waiting_size() > 0) {
            const auto runs = job->array_waiting();
            job->clear_array_waiting();
            const v1::JobInfo carrier = *job;
            for (const v1::WaitingRun& run : runs) {
              for (uint32_t k = 0; k < run.count(); ++k) {
                v1::JobInfo* task = resp.add_jobs();
                *task = carrier;
                task->set_id(run.first_id() + k);
                task->mutable_array()->set_task_id(run.first_task() + k * run.task_step());
              }
            }
          }
          return true;
        });
    if (next == 0 || next <= page.after_id()) break;
    page.set_after_id(next);
  }
  if (!parsed) return Internal("a job's cached row does not parse");
  return resp;
}

Result<v1::ListNodesResponse> Engine::ListNodes(const Caller& caller,
                                                const v1::ListNodesRequest& req, TimeMs now) const {
  MUSTER_ASSIGN_OR_RETURN(v1::ListNodesResponse resp, node_views_->ListNodes(req));
  if (SeesOnlyOwnJobs(caller, ctx_->config())) {
    // Which jobs run where would tell others' jobs apart from the caller's own.
    for (v1::NodeInfo& n : *resp.mutable_nodes()) {
      auto* ids = n.mutable_job_ids();
      ids->erase(std::remove_if(ids->begin(), ids->end(),
                                [&](uint64_t id) {
                                  const JobEntry* job = jobs_->Covering(id);
                                  return !job || job->rec().spec().uid() != caller.uid;
                                }),
                 ids->end());
    }
  }
  if (!reservations_->all().empty()) {
    const auto active = reservations_->ActiveByNode(now);
    for (v1::NodeInfo& n : *resp.mutable_nodes()) {
      auto i = ctx_->NodeIndex(n.name());
      if (!i || !active[*i]) continue;
      n.set_reservation(active[*i]->name());
      n.set_maint(active[*i]->maint());
    }
  }
  return resp;
}

void Engine::FillDiagnostics(const Caller& caller, v1::DiagnosticsResponse* resp) const {
  // The numbers /metrics exports, from the same count.
  const ClusterMetrics m = Metrics();
  resp->set_epoch(m.epoch);
  resp->set_start_time_ms(m.start_time_ms);
  resp->set_nodes(static_cast<uint32_t>(nodes_->size()));
  resp->set_nodes_responding(m.nodes_responding);
  uint64_t pending = 0, running = 0;
  for (const auto& [key, n] : m.jobs) {
    if (std::get<0>(key) == "pending") pending += n;
    if (std::get<0>(key) == "running") running += n;
  }
  resp->set_jobs_pending(static_cast<uint32_t>(pending));
  resp->set_jobs_running(static_cast<uint32_t>(running));
  v1::SchedulerStats* s = resp->mutable_scheduler();
  s->set_passes(m.passes);
  s->set_jobs_started(m.jobs_started);
  s->set_jobs_backfilled(m.jobs_backfilled);
  s->set_forecasts(m.forecasts);
  s->set_last_considered(m.last_pass_considered);
  s->set_last_reservations(m.last_pass_reservations);
  s->set_preemptions(m.preemptions);
  resp->set_records_quarantined(static_cast<uint32_t>(recovery_problems_.size()));
  resp->set_store_space_problem(space_problem_);
  const StoredBytes& stored = jobs_->stored();
  resp->set_store_bytes_total(stored.total());
  auto add = [&](const StoredBytes::UserUse& u) {
    v1::StoreUser* out = resp->add_store_users();
    out->set_user(u.user);
    out->set_bytes(u.bytes);
    out->set_submissions(u.payloads);
  };
  if (May(caller, Action::kSeeOthersStoredBytes)) {
    for (const StoredBytes::UserUse& u : stored.Biggest(10)) add(u);
  } else {
    StoredBytes::UserUse own = stored.OfUserRow(caller.uid);
    own.user = caller.user;
    add(own);
  }
}

ClusterMetrics Engine::Metrics() const {
  ClusterMetrics m;
  job_views_->CountJobs(&m);
  node_views_->CountResources(&m);
  const SchedulerLoop::Totals& t = scheduler_->totals();
  m.passes = t.passes;
  m.jobs_started = t.jobs_started;
  m.jobs_backfilled = t.jobs_backfilled;
  m.forecasts = t.forecasts;
  m.last_pass_considered = t.last_considered;
  m.last_pass_reservations = t.last_reservations;
  m.preemptions = preemptor_->preempted();
  m.queue_waits = t.queue_waits;
  m.heartbeats_late = nodes_->late_heartbeats();
  m.epoch = ctx_->epoch();
  m.start_time_ms = start_time_ms_;
  m.store_bytes = jobs_->stored().total();
  return m;
}

Result<v1::ControllerInfoResponse> Engine::ControllerInfo() const {
  v1::ControllerInfoResponse resp;
  resp.set_version(kVersion);
  resp.set_cluster_name(ctx_->config().cluster_name);
  resp.set_epoch(ctx_->epoch());
  resp.set_start_time_ms(start_time_ms_);
  resp.set_nodes(static_cast<uint32_t>(nodes_->size()));
  job_views_->FillControllerInfo(&resp);
  resp.set_next_job_id(ctx_->meta().next_job_id());
  const SchedulingConfig& sc = ctx_->scheduling();
  v1::PriorityWeights* w = resp.mutable_priority_weights();
  w->set_age(sc.priority_weight_age);
  w->set_size(sc.priority_weight_size);
  w->set_partition(sc.priority_weight_partition);
  w->set_qos(sc.priority_weight_qos);
  w->set_fairshare(sc.priority_weight_fairshare);
  for (const auto& [name, used] : licenses_->InUse()) {
    v1::LicenseUse* l = resp.add_licenses();
    l->set_name(name);
    l->set_total(ctx_->config().licenses.at(name));
    l->set_used(used);
  }
  return resp;
}

Result<v1::ExplainJobResponse> Engine::ExplainJob(const Caller& caller,
                                                  const v1::ExplainJobRequest& req,
                                                  TimeMs now) const {
  MUSTER_RETURN_IF_ERROR(CheckJobVisible(caller, req.job_id()));
  MUSTER_ASSIGN_OR_RETURN(v1::ExplainJobResponse resp, explainer_->Explain(req, now));
  // The jobs in its way are named by id and nodes; whose they are only to who may see that.
  if (SeesOnlyOwnJobs(caller, ctx_->config())) {
    for (v1::HoldingJob& h : *resp.mutable_explanation()->mutable_holding()) {
      if (h.user() != caller.user) h.clear_user();
    }
  }
  return resp;
}

Engine::AccountingQuery Engine::PrepareAccounting(const Caller& caller,
                                                  const v1::ListAccountingRequest& req,
                                                  TimeMs now) const {
  return job_views_->PrepareAccounting(ScopedToCaller(caller, req), now);
}

Result<v1::ListAccountingResponse> Engine::ScanAccounting(const AccountingQuery& query) {
  return JobViews::ScanAccounting(query);
}

Result<v1::ListAccountingResponse> Engine::ListAccounting(const Caller& caller,
                                                          const v1::ListAccountingRequest& req,
                                                          TimeMs now) const {
  return ScanAccounting(PrepareAccounting(caller, req, now));
}

// ---------------------------------------------------------------------------------------------
// Agents

Result<v1::RegisterResponse> Engine::RegisterNode(const v1::RegisterRequest& req, TimeMs now) {
  store::Mutation m;
  bool restarted = false;
  // A registration the store refuses is taken back in memory too, so that the agent's next try
  // is seen as the restart it is (and its lost steps end then).
  const NodeManager::Registration before = nodes_->RegistrationOf(req.inventory().name());
  MUSTER_ASSIGN_OR_RETURN(v1::RegisterResponse resp, nodes_->Register(req, now, m, &restarted));
  const v1::NodeInventory& inv = req.inventory();
  std::vector<std::pair<JobEntry*, v1::JobRecord>> steps_ended;
  if (restarted) {
    steps_ended = steps_->StepsLostOnNode(
        *nodes_->Find(inv.name()), {req.adopted_jobs().begin(), req.adopted_jobs().end()}, now, m);
  }
  if (Status st = ctx_->Commit(m); !st.ok()) {
    nodes_->UndoRegister(req.inventory().name(), before);
    return st;
  }
  for (auto& [job, next] : steps_ended) jobs_->ApplyChange(*job, std::move(next));
  spdlog::info("register node={} instance={} gpus={} ({}) step_address={} restarted={} jobs={}",
               inv.name(), req.instance_id(), inv.gpus_size(), inv.gpu_source(), inv.step_address(),
               restarted, req.running_job_ids_size());
  return resp;
}

Status Engine::AttachSession(const v1::Hello& hello, TimeMs now) {
  MUSTER_ASSIGN_OR_RETURN(NodeEntry * node, nodes_->AttachSession(hello, now));
  jobs_->ReconcileNode(*node, now);
  return Status::Ok();
}

void Engine::DetachSession(const std::string& node, const std::string& instance_id) {
  nodes_->DetachSession(node, instance_id);
}

void Engine::OnAgentMessage(const std::string& name, const v1::AgentMessage& msg, TimeMs now) {
  NodeEntry* node = nodes_->Heard(name, now);
  if (!node) return;
  switch (msg.msg_case()) {
    case v1::AgentMessage::kHeartbeat:
      break;
    case v1::AgentMessage::kJobStarted:
      jobs_->OnJobStarted(*node, msg.job_started(), now);
      break;
    case v1::AgentMessage::kJobLaunchFailed:
      jobs_->OnLaunchFailed(*node, msg.job_launch_failed(), now);
      break;
    case v1::AgentMessage::kBatchExited:
      jobs_->OnBatchExited(*node, msg.batch_exited(), now);
      break;
    case v1::AgentMessage::kJobCleaned:
      jobs_->OnJobCleaned(*node, msg.job_cleaned(), now);
      break;
    case v1::AgentMessage::kGpuHealth: {
      const v1::GpuHealth& h = msg.gpu_health();
      store::Mutation m;
      if (nodes_->OnGpuHealth(*node, h, now, m)) {
        // Jobs bound to the GPU lose it now: requeue them (or fail them, per --no-requeue).
        jobs_->GpuFailed(*node, h.index(),
                         name + " gpu" + std::to_string(h.index()) + ": " + h.health(), now, m);
      }
      ctx_->CommitOrDie(m);
      break;
    }
    case v1::AgentMessage::kNodeHealth: {
      store::Mutation m;
      nodes_->OnNodeHealth(*node, msg.node_health(), now, m);
      ctx_->CommitOrDie(m);
      break;
    }
    case v1::AgentMessage::kStepEnded:
      steps_->OnStepEnded(*node, msg.step_ended(), now);
      break;
    case v1::AgentMessage::kRebootFailed: {
      store::Mutation m;
      nodes_->OnRebootFailed(*node, msg.reboot_failed(), now, m);
      ctx_->CommitOrDie(m);
      break;
    }
    case v1::AgentMessage::kHello:
    case v1::AgentMessage::MSG_NOT_SET:
      spdlog::warn("node={} sent an unexpected message ({}); ignored", name,
                   static_cast<int>(msg.msg_case()));
      break;
  }
}

// ---------------------------------------------------------------------------------------------
// Time and the pass

void Engine::Tick(TimeMs now) {
  scheduler_->Tick(now);
  fair_share_->Accrue(now);
  for (auto& [node, why] : nodes_->Sweep(now)) jobs_->NodeLost(*node, why, now);
  nodes_->AdvanceReboots(
      [this](const NodeEntry& n) {
        return !ledger_->held(n.index).empty() || !ledger_->parked(n.index).empty();
      },
      now);
  jobs_->Archive(now);
  if (!jobs_->interactive().empty()) allocations_->Check(now);
  history_->Purge(now);
  audit_->Purge(now);
  if (reservations_->Tick(now)) ctx_->RequestPass();
  mail_->Tick(now);
  WatchSpace();
}

void Engine::WatchSpace() {
  const Status room = ctx_->RoomForNewWork();
  std::string problem = room.ok() ? std::string() : room.message();
  if (problem.empty() && !space_problem_.empty()) {
    spdlog::warn("the state store has room again: new jobs are accepted");
  } else if (!problem.empty() && space_problem_.empty()) {
    spdlog::error("{}", problem);
  }
  space_problem_ = std::move(problem);
}

std::optional<Engine::PassInput> Engine::PreparePass(TimeMs now) {
  // What the jobs themselves say before the queue is read: dependencies satisfied (or never to
  // be), deadlines passed. Then the pass, which asks its policy first (pass_policy.h).
  dependencies_->Resolve(now);
  jobs_->EndPastDeadline(now);
  return scheduler_->Prepare(now);
}

core::SchedulePass Engine::ComputePass(const PassInput& in) { return SchedulerLoop::Compute(in); }

void Engine::ApplyPass(const core::SchedulePass& pass, TimeMs now) {
  scheduler_->Apply(pass, now);  // preemption for those left waiting is the policy's
}

void Engine::RunSchedulePass(TimeMs now) {
  if (auto in = PreparePass(now)) ApplyPass(ComputePass(*in), now);
}

// ---------------------------------------------------------------------------------------------

Status Engine::CheckInvariantsForTest() const {
  const auto& order = jobs_->order();
  if (order.size() != jobs_->size()) return Internal("the job order does not mirror the table");
  size_t k = 0;
  for (const auto& [id, job] : jobs_->jobs()) {
    if (order[k].first != id || order[k].second != &job) {
      return Internal("the job order differs from the table at job " + std::to_string(id));
    }
    ++k;
  }
  MUSTER_RETURN_IF_ERROR(ledger_->CheckInvariants());
  MUSTER_RETURN_IF_ERROR(jobs_->CheckArrayInvariants());
  for (size_t i = 0; i < ledger_->size(); ++i) {
    const std::string& name = nodes_->at(i).name();
    for (const auto& [id, held] : ledger_->held(i)) {
      const JobEntry* job = jobs_->Find(id);
      if (!job) return Internal("node " + name + " holds unknown job " + std::to_string(id));
      const v1::JobRecord& r = job->rec();
      const bool completing = std::find(r.completing_nodes().begin(), r.completing_nodes().end(),
                                        name) != r.completing_nodes().end();
      if (r.state() != v1::RUNNING && !completing) {
        return Internal("job " + std::to_string(id) + " holds " + name +
                        " but is neither running nor cleaning up there");
      }
      bool recorded = false;
      // A suspended job's CPUs are parked, not held.
      auto parked = ledger_->parked(i).find(id);
      const bool suspended = r.state() == v1::RUNNING && r.suspend_time_ms() > 0;
      if (suspended != (parked != ledger_->parked(i).end())) {
        return Internal("job " + std::to_string(id) + " on " + name +
                        (suspended ? " is suspended without parked CPUs"
                                   : " has parked CPUs but is not suspended"));
      }
      for (const auto& na : r.allocation().nodes()) {
        if (na.node() != name) continue;
        core::NodePlacement want = ledger_->PlacementOf(na, i);
        if (suspended && parked->second != want.cpus) break;
        if (suspended || r.ended_suspended()) want.cpus.clear();
        recorded = SamePlacement(held, want);
      }
      if (!recorded) {
        return Internal("what job " + std::to_string(id) + " holds on " + name +
                        " differs from its record");
      }
    }
  }
  // Every running job holds all of its nodes.
  for (const auto& [id, job] : jobs_->jobs()) {
    if (job.rec().state() != v1::RUNNING) continue;
    for (const auto& na : job.rec().allocation().nodes()) {
      std::optional<size_t> i = ctx_->NodeIndex(na.node());
      if (i && !ledger_->Holds(*i, id) && !nodes_->at(*i).down) {
        return Internal("running job " + std::to_string(id) + " does not hold node " + na.node());
      }
    }
  }
  return Status::Ok();
}

}  // namespace muster::controller
