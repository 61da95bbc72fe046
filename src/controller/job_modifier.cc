#include "job_modifier.h"

#include <spdlog/spdlog.h>

#include <deque>
#include <set>

#include "array_tasks.h"
#include "job_entry.h"
#include "job_spec.h"
#include "job_views.h"
#include "muster/common/duration.h"
#include "muster/common/strings.h"
#include "muster/controller/access.h"

namespace muster::controller {
namespace {

constexpr int64_t kMaxNice = 2'147'483'645;
constexpr size_t kMaxPartitions = 64;

}  // namespace

bool JobModifier::ReachesItself(uint64_t id, const v1::JobRecord& rec) const {
  std::deque<uint64_t> todo;
  for (const auto& t : rec.dependency_terms()) todo.push_back(t.job_id());
  std::set<uint64_t> seen;
  // Bounded: a pending job's terms are bounded, and each job is looked at once.
  while (!todo.empty() && seen.size() < 100'000) {
    const uint64_t at = todo.front();
    todo.pop_front();
    if (at == id) return true;
    if (!seen.insert(at).second) continue;
    const JobEntry* job = jobs_.Find(at);
    if (!job || job->rec().state() != v1::PENDING) continue;
    for (const auto& t : job->rec().dependency_terms()) todo.push_back(t.job_id());
  }
  return false;
}

Status JobModifier::Modify(const Caller& caller, uint64_t id, const v1::JobModification& mod) {
  JobEntry* job = jobs_.Find(id);
  const std::string jid = std::to_string(id);
  if (!job) return NotFound("job " + jid + " does not exist");
  MUSTER_RETURN_IF_ERROR(CheckJobAccess(caller, job->rec(), "update", ctx_.config()));
  if (job->rec().state() != v1::PENDING) {
    return FailedPrecondition("job " + jid + " is not pending (" +
                              v1::JobState_Name(job->rec().state()) +
                              "): only a pending job's settings can change");
  }
  v1::JobRecord next = job->rec();
  v1::JobSpec& spec = *next.mutable_spec();
  std::vector<std::string> changed;

  if (mod.has_priority()) {
    MUSTER_RETURN_IF_ERROR(Authorize(caller, Action::kSetPriority));
    if (mod.priority() < 0 || mod.priority() > 0xFFFFFFFFLL) {
      return InvalidArgument("Priority is 0 (multifactor) to 4294967295");
    }
    next.set_priority(mod.priority());
    changed.push_back("Priority=" + std::to_string(mod.priority()));
  }
  if (mod.has_nice()) {
    if (mod.nice() < -kMaxNice || mod.nice() > kMaxNice) {
      return InvalidArgument("Nice is between -2147483645 and 2147483645");
    }
    if (mod.nice() < 0) MUSTER_RETURN_IF_ERROR(Authorize(caller, Action::kNegativeNice));
    spec.set_nice(mod.nice());
    changed.push_back("Nice=" + std::to_string(mod.nice()));
  }
  if (mod.has_time_limit_ms()) {
    if (mod.time_limit_ms() <= 0 || mod.time_limit_ms() > 100'000LL * 86'400'000) {
      return InvalidArgument("TimeLimit must be positive and at most 100000 days");
    }
    if (next.time_limit_ms() == 0 || mod.time_limit_ms() > next.time_limit_ms()) {
      MUSTER_RETURN_IF_ERROR(
          Authorize(caller, Action::kRaiseTimeLimit)
              .Prepend("TimeLimit from " + (next.time_limit_ms()
                                                ? FormatDuration(next.time_limit_ms())
                                                : std::string("UNLIMITED"))));
    }
    spec.set_time_limit_ms(mod.time_limit_ms());
    next.set_time_limit_ms(mod.time_limit_ms());
    changed.push_back("TimeLimit=" + FormatDuration(mod.time_limit_ms()));
  }
  if (mod.partitions_size() > 0) {
    if (static_cast<size_t>(mod.partitions_size()) > kMaxPartitions) {
      return InvalidArgument("at most 64 partitions");
    }
    spec.clear_partitions();
    std::set<std::string> seen;
    for (const std::string& p : mod.partitions()) {
      if (!ctx_.config().FindPartition(p)) {
        return InvalidArgument("partition '" + p.substr(0, 64) + "' does not exist");
      }
      if (seen.insert(p).second) spec.add_partitions(p);
    }
    MUSTER_RETURN_IF_ERROR(CheckPartitionAccess(caller, spec, ctx_.config()));
    changed.push_back("Partition=" +
                      Join({spec.partitions().begin(), spec.partitions().end()}, ","));
  }
  if (mod.has_account()) {
    MUSTER_ASSIGN_OR_RETURN(std::string account,
                            accounts_.ResolveForJob(spec.user(), mod.account()));
    spec.set_account(std::move(account));
    changed.push_back("Account=" + spec.account());
  }
  if (mod.has_qos() || mod.has_account()) {
    // A new account must allow the QoS the job keeps; a new QoS must be allowed by its account.
    const std::string want = mod.has_qos() ? mod.qos() : spec.qos();
    if (!want.empty() && !qos_.Exists(want)) {
      return InvalidArgument("invalid qos '" + want.substr(0, 64) +
                             "': no such QoS (`sacctmgr show qos` lists them)");
    }
    MUSTER_ASSIGN_OR_RETURN(std::string qos,
                            accounts_.ResolveQos(spec.user(), spec.account(), want));
    spec.set_qos(std::move(qos));
    if (mod.has_qos()) changed.push_back("QOS=" + spec.qos());
  }
  if (mod.has_dependency()) {
    if (mod.dependency().size() > 4096) return InvalidArgument("Dependency is too long");
    spec.set_dependency(mod.dependency());
    next.clear_dependency_terms();
    next.set_dependency_any(false);
    if (!mod.dependency().empty()) {
      MUSTER_RETURN_IF_ERROR(dependencies_.TermsFor(&spec, &next,
                                                    SeesOnlyOwnJobs(caller, ctx_.config())
                                                        ? std::optional<uint32_t>(caller.uid)
                                                        : std::nullopt));
      if (ReachesItself(id, next)) {
        return InvalidArgument("Job dependency problem: job " + jid +
                               " would wait for itself (a circle of dependencies)");
      }
    }
    changed.push_back("Dependency=" + spec.dependency());
  }
  if (mod.has_begin_time_ms()) {
    if (mod.begin_time_ms() < 0) return InvalidArgument("BeginTime must not be negative");
    spec.set_begin_time_ms(mod.begin_time_ms());
    changed.push_back("BeginTime=" + (mod.begin_time_ms() ? FormatTimestamp(mod.begin_time_ms())
                                                          : std::string("now")));
  }
  if (changed.empty()) return InvalidArgument("nothing to change");
  const core::JobRequest request = ToCoreRequest(next);
  MUSTER_RETURN_IF_ERROR(views_.CanEverRun(request));
  const v1::JobSpec& before = job->rec().spec();
  if (spec.account() != before.account() || spec.qos() != before.qos()) {
    // Moving is submitting there: an account or QoS at its limit takes no more jobs or bytes.
    MUSTER_RETURN_IF_ERROR(limits_.CheckSubmit(
        spec, next.time_limit_ms(),
        {request.nodes, request.nodes * request.gpus_per_node, request.gpu_type}, TasksOf(next),
        &before));
    MUSTER_RETURN_IF_ERROR(limits_.CheckStored(spec, next.payload_bytes(), &before));
  }

  // Its wait reason is the next pass's to decide, but for the dependency (passes skip those).
  if (next.dependency_terms_size() > 0 && !spec.hold()) {
    next.set_reason(core::ReasonName(core::JobReason::kDependency));
    next.set_reason_detail("waits for --dependency=" + spec.dependency());
  } else if (next.dependency_terms_size() == 0 &&
             (core::ParseReason(next.reason()) == core::JobReason::kDependency ||
              core::ParseReason(next.reason()) == core::JobReason::kDependencyNeverSatisfied)) {
    next.set_reason(core::ReasonName(core::JobReason::kNone));
    next.clear_reason_detail();
  }
  store::Mutation m;
  jobs_.StageChange(*job, next, m);
  MUSTER_RETURN_IF_ERROR(ctx_.Commit(m));
  jobs_.ApplyChange(*job, std::move(next));
  if (job->rec().dependency_terms_size() > 0) dependencies_.Track(id);
  ctx_.RequestPass();
  spdlog::info("update job={} by {}: {}", id, caller.user, Join(changed, " "));
  return Status::Ok();
}

Status JobModifier::Top(const Caller& caller, uint64_t id) {
  JobEntry* job = jobs_.Find(id);
  const std::string jid = std::to_string(id);
  if (!job) return NotFound("job " + jid + " does not exist");
  MUSTER_RETURN_IF_ERROR(CheckJobAccess(caller, job->rec(), "move", ctx_.config()));
  if (!ctx_.scheduling().enable_user_top) {
    MUSTER_RETURN_IF_ERROR(Authorize(caller, Action::kTopWithoutUserTop));
  }
  const v1::JobSpec& spec = job->rec().spec();
  if (job->rec().state() != v1::PENDING)
    return FailedPrecondition("job " + jid + " is not pending");
  if (spec.partitions_size() != 1) {
    return FailedPrecondition("job " + jid +
                              " names several partitions; top moves only jobs of one");
  }
  // Its like jobs: same user, partition, account and QoS, pending.
  std::vector<JobEntry*> others;
  int64_t highest = INT64_MIN;
  for (const auto& [other, o] : jobs_.pending()) {
    if (other == id) continue;
    const v1::JobSpec& os = o->rec().spec();
    if (os.uid() != spec.uid() || os.partitions_size() != 1 ||
        os.partitions(0) != spec.partitions(0) || os.account() != spec.account() ||
        os.qos() != spec.qos()) {
      continue;
    }
    others.push_back(o);
    highest = std::max(highest, JobViews::EffectivePriority(*o));
  }
  const int64_t mine = JobViews::EffectivePriority(*job);
  if (others.empty() || mine > highest) return Status::Ok();  // first already
  // What it must gain, taken from the others in equal parts (nice stays within its bounds).
  const int64_t gain = highest - mine + 1;
  const int64_t each =
      (gain + static_cast<int64_t>(others.size()) - 1) / static_cast<int64_t>(others.size());
  auto clamp = [](int64_t n) {
    return static_cast<int32_t>(std::clamp<int64_t>(n, -2'147'483'645, 2'147'483'645));
  };
  store::Mutation m;
  std::vector<std::pair<JobEntry*, v1::JobRecord>> next;
  v1::JobRecord top = job->rec();
  top.mutable_spec()->set_nice(clamp(int64_t{spec.nice()} - gain));
  jobs_.StageChange(*job, top, m);
  next.emplace_back(job, std::move(top));
  for (JobEntry* o : others) {
    v1::JobRecord r = o->rec();
    r.mutable_spec()->set_nice(clamp(int64_t{r.spec().nice()} + each));
    jobs_.StageChange(*o, r, m);
    next.emplace_back(o, std::move(r));
  }
  MUSTER_RETURN_IF_ERROR(ctx_.Commit(m));
  for (auto& [entry, rec] : next) jobs_.ApplyChange(*entry, std::move(rec));
  ctx_.RequestPass();
  spdlog::info("top job={} by {}: nice -{} (and +{} on {} other job(s))", id, caller.user, gain,
               each, others.size());
  return Status::Ok();
}

}  // namespace muster::controller
