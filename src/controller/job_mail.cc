#include "job_mail.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <vector>

#include "job_manager.h"
#include "muster/common/hostlist.h"
#include "muster/core/reason.h"

namespace muster::controller {
namespace {

constexpr uint32_t kKnownBits = v1::MAIL_BEGIN | v1::MAIL_END | v1::MAIL_FAIL | v1::MAIL_REQUEUE |
                                v1::MAIL_TIME_LIMIT | v1::MAIL_TIME_LIMIT_90 |
                                v1::MAIL_TIME_LIMIT_80 | v1::MAIL_TIME_LIMIT_50 |
                                v1::MAIL_ARRAY_TASKS | v1::MAIL_INVALID_DEPEND;
constexpr uint32_t kTimeBits =
    v1::MAIL_TIME_LIMIT | v1::MAIL_TIME_LIMIT_90 | v1::MAIL_TIME_LIMIT_80 | v1::MAIL_TIME_LIMIT_50;

bool Ended(v1::JobState s) { return s != v1::PENDING && s != v1::RUNNING; }

bool Alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// One recipient: a user name or an address. No ',' (a second recipient), '%' or '!' (routing),
// '/' or a leading '+' (mailx writes to such a "file address"), nothing a shell or a header
// would read.
bool SafeMailChar(char c) {
  return Alnum(c) || c == '.' || c == '_' || c == '+' || c == '-' || c == '@';
}

// Slurm's words for each mail (agent.c, _mail_type_str).
const char* TypeWords(uint32_t type) {
  switch (type) {
    case v1::MAIL_BEGIN:
      return "Began";
    case v1::MAIL_END:
      return "Ended";
    case v1::MAIL_FAIL:
      return "Failed";
    case v1::MAIL_REQUEUE:
      return "Requeued";
    case v1::MAIL_TIME_LIMIT:
      return "Reached time limit";
    case v1::MAIL_TIME_LIMIT_90:
      return "Reached 90% of time limit";
    case v1::MAIL_TIME_LIMIT_80:
      return "Reached 80% of time limit";
    case v1::MAIL_TIME_LIMIT_50:
      return "Reached 50% of time limit";
    case v1::MAIL_INVALID_DEPEND:
      return "Invalid dependency";
    default:
      return "unknown";
  }
}

// The time the run has had by `now` (its suspensions left out).
int64_t RunMs(const v1::JobRecord& r, TimeMs now) {
  if (r.start_time_ms() <= 0) return 0;
  int64_t run = now - r.start_time_ms() - r.suspended_ms();
  if (r.suspend_time_ms() > 0) run -= std::max<int64_t>(0, now - r.suspend_time_ms());
  return std::max<int64_t>(0, run);
}

// What every mail's environment says of the job (Slurm's job_common_env_vars, the part that
// applies here) and of the mail.
void CommonEnv(const v1::JobRecord& r, uint64_t id, uint32_t type, MailNotice& n) {
  const v1::JobSpec& s = r.spec();
  auto put = [&](std::string k, std::string v) { n.env.emplace_back(std::move(k), std::move(v)); };
  put("SLURM_JOB_ID", std::to_string(id));
  put("SLURM_JOBID", std::to_string(id));
  put("SLURM_JOB_NAME", s.name());
  put("SLURM_JOB_USER", s.user());
  put("SLURM_JOB_UID", std::to_string(s.uid()));
  put("SLURM_JOB_GID", std::to_string(s.gid()));
  if (!s.account().empty()) put("SLURM_JOB_ACCOUNT", s.account());
  std::string partition = r.allocation().partition();
  if (partition.empty() && s.partitions_size() > 0) partition = s.partitions(0);
  if (!partition.empty()) put("SLURM_JOB_PARTITION", partition);
  if (!s.work_dir().empty()) put("SLURM_JOB_WORK_DIR", s.work_dir());
  if (r.allocation().nodes_size() > 0) {
    std::vector<std::string> nodes;
    for (const auto& na : r.allocation().nodes()) nodes.push_back(na.node());
    put("SLURM_JOB_NODELIST", CompressHostlist(nodes));
  }
  put("SLURM_JOB_STATE", v1::JobState_Name(r.state()));
  put("SLURM_JOB_MAIL_TYPE", TypeWords(type));
}

void ArrayEnv(const v1::JobRecord& r, bool with_task, MailNotice& n) {
  const v1::ArrayTask& a = r.array();
  n.env.emplace_back("SLURM_ARRAY_JOB_ID", std::to_string(a.array_job_id()));
  if (with_task) n.env.emplace_back("SLURM_ARRAY_TASK_ID", std::to_string(a.task_id()));
  n.env.emplace_back("SLURM_ARRAY_TASK_COUNT", std::to_string(a.count()));
  n.env.emplace_back("SLURM_ARRAY_TASK_MIN", std::to_string(a.min()));
  n.env.emplace_back("SLURM_ARRAY_TASK_MAX", std::to_string(a.max()));
}

}  // namespace

Status CheckMailRequest(const v1::JobSpec& spec) {
  if ((spec.mail_types() & ~kKnownBits) != 0) {
    return InvalidArgument("--mail-type: unknown mail type bits " +
                           std::to_string(spec.mail_types() & ~kKnownBits));
  }
  const std::string& u = spec.mail_user();
  if (u.empty()) return Status::Ok();
  if (u.size() > kMaxMailUserBytes) {
    return InvalidArgument("--mail-user is longer than " + std::to_string(kMaxMailUserBytes) +
                           " bytes");
  }
  if (!Alnum(u[0])) {
    return InvalidArgument(
        "--mail-user must start with a letter or a digit (it is passed to the mail program)");
  }
  if (std::count(u.begin(), u.end(), '@') > 1) {
    return InvalidArgument("--mail-user is one user name or address, with at most one '@'");
  }
  for (char c : u) {
    if (!SafeMailChar(c)) {
      const auto b = static_cast<unsigned char>(c);
      char shown[16];
      if (b < 0x20 || b >= 0x7f) {
        std::snprintf(shown, sizeof shown, "byte 0x%02x", b);
      } else {
        std::snprintf(shown, sizeof shown, "'%c'", c);
      }
      return InvalidArgument(std::string("--mail-user contains ") + shown +
                             ": one user name or address, of letters, digits and . _ + - @");
    }
  }
  return Status::Ok();
}

std::string MailDuration(int64_t ms) {
  const int64_t secs = std::max<int64_t>(0, ms / 1000);
  const int64_t days = secs / 86'400, h = secs / 3600 % 24, m = secs / 60 % 60, s = secs % 60;
  char buf[48];
  if (days > 0) {
    std::snprintf(buf, sizeof buf, "%lld-%02lld:%02lld:%02lld", static_cast<long long>(days),
                  static_cast<long long>(h), static_cast<long long>(m), static_cast<long long>(s));
  } else {
    std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", static_cast<long long>(h),
                  static_cast<long long>(m), static_cast<long long>(s));
  }
  return buf;
}

MailNotice JobNotice(const v1::JobRecord& r, uint32_t type, TimeMs now) {
  MailNotice n;
  n.job_id = r.id();
  CommonEnv(r, r.id(), type, n);
  if (r.has_array()) ArrayEnv(r, /*with_task=*/true, n);
  // Slurm's _set_job_time: how long it waited, or ran.
  std::string time;
  if (type == v1::MAIL_BEGIN && r.start_time_ms() > 0 && r.submit_time_ms() > 0) {
    const std::string q = MailDuration(r.start_time_ms() - r.submit_time_ms());
    time = ", Queued time " + q;
    n.env.emplace_back("SLURM_JOB_QUEUED_TIME", q);
  } else if ((type == v1::MAIL_END || type == v1::MAIL_FAIL || type == v1::MAIL_REQUEUE) &&
             (r.end_time_ms() > 0 || type == v1::MAIL_REQUEUE)) {
    // A job cancelled before it started ran for no time at all.
    const TimeMs until = type == v1::MAIL_REQUEUE ? now : r.end_time_ms();
    const std::string run = MailDuration(RunMs(r, until));
    time = ", Run time " + run;
    n.env.emplace_back("SLURM_JOB_RUN_TIME", run);
  } else if ((type & kTimeBits) != 0 && r.start_time_ms() > 0) {
    const std::string run = MailDuration(RunMs(r, now));
    time = ", Run time " + run;
    n.env.emplace_back("SLURM_JOB_RUN_TIME", run);
  }
  // Slurm's _set_job_term_info: how it ended.
  std::string term;
  if (type == v1::MAIL_END || type == v1::MAIL_FAIL) {
    const std::string state = v1::JobState_Name(r.state());
    if (r.exit_signal() == 0) {
      term = ", " + state + ", ExitCode " + std::to_string(r.exit_code());
      n.env.emplace_back("SLURM_JOB_EXIT_CODE_MAX", std::to_string(r.exit_code()));
    } else {
      term = ", " + state;
      n.env.emplace_back("SLURM_JOB_EXIT_CODE_MAX", "0");
    }
  }
  const std::string who =
      r.has_array() ? "Slurm Array Task Job_id=" + std::to_string(r.array().array_job_id()) + "_" +
                          std::to_string(r.array().task_id()) + " (" + std::to_string(r.id()) + ")"
                    : "Slurm Job_id=" + std::to_string(r.id());
  n.subject = who + " Name=" + r.spec().name() + " " + TypeWords(type) + time + term;
  return n;
}

void ArrayTally::Add(const v1::JobRecord& t) {
  if (t.exit_signal() == 0) {
    min_exit = any ? std::min(min_exit, t.exit_code()) : t.exit_code();
    max_exit = any ? std::max(max_exit, t.exit_code()) : t.exit_code();
    any = true;
  } else {
    max_signal = std::max(max_signal, t.exit_signal());
  }
  if (t.state() != v1::COMPLETED && t.state() != v1::CANCELLED) failed = true;
  if (t.requeue_count() > 0) requeued = true;
}

MailNotice ArraySummaryNotice(const v1::JobRecord& last, uint32_t type, const ArrayTally& tally) {
  const uint64_t array_id = last.array().array_job_id();
  MailNotice n;
  n.job_id = array_id;
  CommonEnv(last, array_id, type, n);
  ArrayEnv(last, /*with_task=*/false, n);
  std::string term;
  if (type == v1::MAIL_END || type == v1::MAIL_FAIL) {
    // Slurm's summary of the tasks' ends: the exit codes' range, "Mixed" when some failed and
    // some did not, or the largest signal when tasks were killed by one.
    if (tally.max_signal == 0) {
      const std::string state =
          tally.min_exit == 0 && tally.max_exit > 0 ? "Mixed" : v1::JobState_Name(last.state());
      term = ", " + state + ", ExitCode [" + std::to_string(tally.min_exit) + "-" +
             std::to_string(tally.max_exit) + "]";
      n.env.emplace_back("SLURM_JOB_EXIT_CODE_MIN", std::to_string(tally.min_exit));
      n.env.emplace_back("SLURM_JOB_EXIT_CODE_MAX", std::to_string(tally.max_exit));
    } else {
      term = ", Mixed, MaxSignal [" + std::to_string(tally.max_signal) + "]";
      n.env.emplace_back("SLURM_JOB_TERM_SIGNAL_MAX", std::to_string(tally.max_signal));
    }
    if (tally.requeued) term += ", with requeued tasks";
  }
  n.subject = "Slurm Array Summary Job_id=" + std::to_string(array_id) + "_* (" +
              std::to_string(array_id) + ") Name=" + last.spec().name() + " " + TypeWords(type) +
              term;
  return n;
}

JobMail::JobMail(EngineContext& ctx, JobManager& jobs)
    : ctx_(ctx), jobs_(jobs), enabled_(!ctx.config().controller.mail_prog.empty()) {}

uint32_t JobMail::TimeBits(const v1::JobSpec& spec) { return spec.mail_types() & kTimeBits; }

bool JobMail::Summarised(const v1::JobRecord& r) {
  return r.has_array() && (r.spec().mail_types() & v1::MAIL_ARRAY_TASKS) == 0;
}

void JobMail::Watch(const v1::JobRecord& r) {
  if (r.state() == v1::RUNNING && r.time_limit_ms() > 0 &&
      (TimeBits(r.spec()) & ~r.mail_sent()) != 0) {
    watched_.insert(r.id());
  }
}

void JobMail::Recover() {
  if (!enabled_) return;
  for (const auto& [id, job] : jobs_.jobs()) {
    const v1::JobRecord& r = job.rec();
    const uint32_t bits = r.spec().mail_types();
    if (bits == 0) continue;
    Watch(r);
    if (!Summarised(r)) continue;
    const uint64_t array = r.array().array_job_id();
    if (r.start_time_ms() > 0) begun_.insert(array);
    if (Ended(r.state()) && (bits & (v1::MAIL_END | v1::MAIL_FAIL))) tallies_[array].Add(r);
  }
}

void JobMail::Send(const v1::JobRecord& r, uint32_t type, TimeMs now) {
  MailNotice n = Summarised(r) ? ArraySummaryNotice(r, type, {}) : JobNotice(r, type, now);
  n.recipient = r.spec().mail_user().empty() ? r.spec().user() : r.spec().mail_user();
  if (n.recipient.empty()) {
    spdlog::warn("job={}: no one to mail '{}' to (no --mail-user, no user name)", r.id(),
                 n.subject);
    return;
  }
  spdlog::info("mail job={} type=\"{}\" to={}", r.id(), TypeWords(type), n.recipient);
  ctx_.Mail(std::move(n));
}

bool JobMail::ArrayEnded(const v1::JobRecord& r) const {
  const uint64_t first = r.array().array_job_id();
  const uint64_t last = first + std::max<uint32_t>(r.array().count(), 1) - 1;
  const auto& table = jobs_.jobs();
  // From the last task down: the ones still waiting or running are most often the later ones.
  auto it = table.upper_bound(last);
  while (it != table.begin()) {
    --it;
    if (it->first < first) break;
    const v1::JobRecord& t = it->second.rec();
    if (!t.has_array() || t.array().array_job_id() != first) continue;
    if (!Ended(t.state())) return false;
  }
  return true;
}

void JobMail::OnTransition(v1::JobState from, const JobEntry& job, TimeMs now) {
  if (!enabled_) return;
  const v1::JobRecord& r = job.rec();
  const uint32_t bits = r.spec().mail_types();
  const v1::JobState to = r.state();
  if (bits == 0 || from == to) return;
  if (from == v1::RUNNING) watched_.erase(r.id());
  if (to == v1::RUNNING) {
    Watch(r);
    if (!(bits & v1::MAIL_BEGIN)) return;
    if (!Summarised(r)) return Send(r, v1::MAIL_BEGIN, now);
    // One BEGIN for the array: its first task's start.
    if (begun_.insert(r.array().array_job_id()).second) Send(r, v1::MAIL_BEGIN, now);
    return;
  }
  if (to == v1::PENDING) {  // requeued
    if (Summarised(r)) {
      if (bits & (v1::MAIL_END | v1::MAIL_FAIL)) tallies_[r.array().array_job_id()].requeued = true;
    } else if (bits & v1::MAIL_REQUEUE) {
      Send(r, v1::MAIL_REQUEUE, now);
    }
    return;
  }
  // It ended.
  if (to == v1::TIMEOUT && (bits & v1::MAIL_TIME_LIMIT) && !(r.mail_sent() & v1::MAIL_TIME_LIMIT)) {
    Send(r, v1::MAIL_TIME_LIMIT, now);
  }
  const bool failed = to != v1::COMPLETED && to != v1::CANCELLED;
  if (!Summarised(r)) {
    if (failed && (bits & v1::MAIL_FAIL)) return Send(r, v1::MAIL_FAIL, now);
    if (bits & v1::MAIL_END) Send(r, v1::MAIL_END, now);
    return;
  }
  if (!(bits & (v1::MAIL_BEGIN | v1::MAIL_END | v1::MAIL_FAIL))) return;
  const uint64_t array = r.array().array_job_id();
  ArrayTally* tally = nullptr;
  if (bits & (v1::MAIL_END | v1::MAIL_FAIL)) {
    tally = &tallies_[array];
    tally->Add(r);
  }
  if (!ArrayEnded(r)) return;
  // The array's last task ended: its one summary.
  begun_.erase(array);
  if (!tally) return;
  const uint32_t type = tally->failed && (bits & v1::MAIL_FAIL) ? v1::MAIL_FAIL
                        : (bits & v1::MAIL_END)                 ? v1::MAIL_END
                                                                : 0;
  if (type != 0) {
    MailNotice n = ArraySummaryNotice(r, type, *tally);
    n.recipient = r.spec().mail_user().empty() ? r.spec().user() : r.spec().mail_user();
    if (!n.recipient.empty()) {
      spdlog::info("mail job={} type=\"{}\" (array summary) to={}", array, TypeWords(type),
                   n.recipient);
      ctx_.Mail(std::move(n));
    }
  }
  tallies_.erase(array);
}

void JobMail::OnChange(std::string_view before_reason, const JobEntry& job) {
  if (!enabled_) return;
  const v1::JobRecord& r = job.rec();
  if (!(r.spec().mail_types() & v1::MAIL_INVALID_DEPEND) || r.state() != v1::PENDING) return;
  const std::string_view never = core::ReasonName(core::JobReason::kDependencyNeverSatisfied);
  if (r.reason() == never && before_reason != never) Send(r, v1::MAIL_INVALID_DEPEND, 0);
}

uint32_t JobMail::DueTimeBits(const v1::JobRecord& r, TimeMs now) {
  const int64_t limit = r.time_limit_ms();
  if (r.state() != v1::RUNNING || limit <= 0 || r.suspend_time_ms() > 0) return 0;
  const int64_t run = RunMs(r, now);
  uint32_t due = 0;
  if (run * 2 >= limit) due |= v1::MAIL_TIME_LIMIT_50;
  if (run * 10 >= limit * 8) due |= v1::MAIL_TIME_LIMIT_80;
  if (run * 10 >= limit * 9) due |= v1::MAIL_TIME_LIMIT_90;
  if (run >= limit) due |= v1::MAIL_TIME_LIMIT;
  return due & TimeBits(r.spec()) & ~r.mail_sent();
}

void JobMail::Tick(TimeMs now) {
  if (!enabled_ || watched_.empty()) return;
  store::Mutation m;
  std::vector<std::pair<JobEntry*, v1::JobRecord>> changed;
  std::vector<uint32_t> mailed;
  for (auto it = watched_.begin(); it != watched_.end();) {
    JobEntry* job = jobs_.Find(*it);
    if (!job || job->rec().state() != v1::RUNNING) {
      it = watched_.erase(it);
      continue;
    }
    ++it;
    const uint32_t due = DueTimeBits(job->rec(), now);
    if (due == 0) continue;
    // The highest fraction crossed is mailed; the lower ones go with it (no stale "50%" after
    // a "90%", as when the controller was down while the run crossed both).
    uint32_t top = v1::MAIL_TIME_LIMIT;
    for (uint32_t b : {v1::MAIL_TIME_LIMIT, v1::MAIL_TIME_LIMIT_90, v1::MAIL_TIME_LIMIT_80,
                       v1::MAIL_TIME_LIMIT_50}) {
      if (due & b) {
        top = b;
        break;
      }
    }
    changed.emplace_back(job, jobs_.StageMailSent(*job, due, m));
    mailed.push_back(top);
  }
  if (changed.empty()) return;
  // Not applied (nor mailed) when it cannot be written: the next tick tries again.
  if (Status st = ctx_.Commit(m); !st.ok()) {
    spdlog::error("mail: cannot record time-limit warnings ({}); trying again", st.ToString());
    return;
  }
  for (size_t i = 0; i < changed.size(); ++i) {
    JobEntry& job = *changed[i].first;
    jobs_.ApplyChange(job, std::move(changed[i].second));
    Send(job.rec(), mailed[i], now);
    if ((TimeBits(job.rec().spec()) & ~job.rec().mail_sent()) == 0) watched_.erase(job.id());
  }
}

}  // namespace muster::controller
