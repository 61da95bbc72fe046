// --mail-type: which mail a job's change calls for, as Slurm 22.05 decides it (slurmctld's
// mail_job_info), and what that mail says. Deterministic and without I/O: it emits MailNotices
// into the engine context (EngineContext::Mail), and the runner hands them to the daemon's
// sender (rpc/mail_sender.h) once the change behind them is durable. Nothing is decided while
// controller.mail_prog is empty: --mail-type is then accepted with no effect.
//
//   BEGIN           a run starts (for an array without ARRAY_TASKS: its first task, once)
//   END / FAIL      a job ends: FAIL for an end other than COMPLETED or CANCELLED when FAIL was
//                   asked for, END otherwise (END covers every end); for an array without
//                   ARRAY_TASKS one "Array Summary" when its last task ends
//   REQUEUE         a run is requeued (per task only with ARRAY_TASKS, as Slurm)
//   TIME_LIMIT_50/80/90   the run crosses that fraction of its time limit (each tick looks; the
//                   highest fraction crossed is mailed, the lower ones count as sent with it)
//   TIME_LIMIT      the run reaches its limit, or ends TIMEOUT
//   INVALID_DEPEND  a pending job's --dependency can never be satisfied
// What a run has had mailed (BEGIN, the TIME_LIMIT_* warnings) is kept in its record's mail_sent,
// set through JobManager (the record's one writer), so a restart or a failover sends none twice.
//
// Strand-confined.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "engine_context.h"
#include "job_entry.h"
#include "muster/common/clock.h"
#include "muster/common/status.h"
#include "muster/controller/engine.h"
#include "muster/v1/common.pb.h"
#include "muster/v1/records.pb.h"

namespace muster::controller {

class JobManager;

// The longest --mail-user (an address's limit in RFC 5321).
inline constexpr size_t kMaxMailUserBytes = 254;

// --mail-type and --mail-user of a submitted spec: known MailType bits only, and a recipient
// that is safe as an argument of the admin's mail program: one name or address of letters,
// digits and . _ + - @ (at most one '@'), starting with a letter or digit (no option, second
// recipient, routing or mailx file address), at most kMaxMailUserBytes. INVALID_ARGUMENT saying
// what is wrong.
Status CheckMailRequest(const v1::JobSpec& spec);

// Slurm's secs2time_str: "HH:MM:SS", or "D-HH:MM:SS" from a day on (whole seconds).
std::string MailDuration(int64_t ms);

// What one mail of `type` (one MailType bit) about `rec` says: Slurm's subject and its
// SLURM_JOB_* environment (the recipient is left to the caller). `now` is when it happens (a
// requeue's or a warning's run time). For an array's summary see ArraySummaryNotice.
MailNotice JobNotice(const v1::JobRecord& rec, uint32_t type, TimeMs now);

// The tasks of an array, summed up for its summary mail.
struct ArrayTally {
  bool any = false;
  int32_t min_exit = 0, max_exit = 0;
  int32_t max_signal = 0;
  bool failed = false;    // a task ended neither COMPLETED nor CANCELLED
  bool requeued = false;  // a task was requeued
  void Add(const v1::JobRecord& task);
};
// "Slurm Array Summary Job_id=A_* (A) Name=... Ended, COMPLETED, ExitCode [0-0]" about the array
// `last` (one of its tasks, the last to end for an END or FAIL) belongs to.
MailNotice ArraySummaryNotice(const v1::JobRecord& last, uint32_t type, const ArrayTally& tally);

class JobMail {
 public:
  JobMail(EngineContext& ctx, JobManager& jobs);

  // Whether mail is sent at all (controller.mail_prog is set).
  bool enabled() const { return enabled_; }

  // After recovery, before anything changes: the running jobs whose time limits it watches.
  void Recover();
  // JobManager::Apply, once `job`'s new record is in place: its state changed from `from` (or
  // not: a held or modified pending job) at `now`.
  void OnTransition(v1::JobState from, const JobEntry& job, TimeMs now);
  // JobManager::ApplyChange: fields other than its state changed (`before_reason`: the reason it
  // had before).
  void OnChange(std::string_view before_reason, const JobEntry& job);
  // Every tick: the runs that crossed a TIME_LIMIT_* fraction of their limit since the last,
  // mailed and recorded (one write for all).
  void Tick(TimeMs now);

  // Tests: the running jobs whose limits are watched.
  const std::set<uint64_t>& watched() const { return watched_; }

 private:
  // The bits of `spec` that ask for a time-limit mail.
  static uint32_t TimeBits(const v1::JobSpec& spec);
  // Whether a job of an array gets the array's mails (no ARRAY_TASKS) rather than its own.
  static bool Summarised(const v1::JobRecord& r);
  // Sends `type` about `rec`: its own mail, or the array's summary form.
  void Send(const v1::JobRecord& rec, uint32_t type, TimeMs now);
  // Every task of `r`'s array has ended (those no longer in the table ended long ago).
  bool ArrayEnded(const v1::JobRecord& r) const;
  // The time-limit mails the run is due at `now` (bits), given what it has had.
  static uint32_t DueTimeBits(const v1::JobRecord& r, TimeMs now);
  void Watch(const v1::JobRecord& r);

  EngineContext& ctx_;
  JobManager& jobs_;
  const bool enabled_;
  // Running jobs with TIME_LIMIT* mail and a time limit: what Tick looks at.
  std::set<uint64_t> watched_;
  // Arrays (summarised) whose first task this controller has seen start, by array id; forgotten
  // with the summary.
  std::set<uint64_t> begun_;
  // Summarised arrays' ended tasks so far, by array id (tasks archived before the last ends
  // still count): forgotten with the summary.
  std::map<uint64_t, ArrayTally> tallies_;
};

}  // namespace muster::controller
