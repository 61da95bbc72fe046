// The controller's mail (Slurm's MailProg): runs controller.mail_prog for each MailNotice the
// engine decided (controller/job_mail.h), as Slurm does: `mail_prog -s SUBJECT RECIPIENT`, no
// shell, stdin from /dev/null, a fixed minimal environment plus the notice's SLURM_JOB_* and
// SLURM_ARRAY_*, never as root: a controller running as root runs it as `run_as` (Slurm runs it
// as SlurmUser; Muster's default is nobody). What it may cost is bounded: at most
// max_running programs at once, at most max_queued mails waiting (more are dropped, logged),
// each program (and its process group) killed after `timeout`. A failure is logged with job=,
// never fatal. Only the active controller has one: a standby runs no engine.
//
// Thread-safe: Send never blocks (it is called on the controller strand); the programs run on
// the sender's own threads.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "muster/common/status.h"
#include "muster/controller/controller_runner.h"
#include "muster/controller/engine.h"

namespace muster::rpc {

struct MailSenderOptions {
  std::string program;  // controller.mail_prog (an absolute path)
  std::string cluster_name;
  size_t max_running = 4;
  size_t max_queued = 1000;
  // Of them, for one recipient: one user's array of ARRAY_TASKS mails cannot crowd out the rest.
  size_t max_queued_per_recipient = 100;
  std::chrono::milliseconds timeout{60'000};
  // The identity it runs with when the controller is root (controller.mail_prog_user).
  std::optional<uint32_t> run_as_uid, run_as_gid;
};
// The uid and gid of `user` for MailSenderOptions when this process is root; nothing when it is
// not (it cannot change who it is). NOT_FOUND for a user the system does not know.
Status ResolveMailUser(const std::string& user, MailSenderOptions* options);

// What one mail runs: argv (program, "-s", subject, recipient) and the whole environment
// ("KEY=value": the fixed part, SLURM_CLUSTER_NAME, then the notice's own). Pure.
struct MailCommand {
  std::vector<std::string> argv;
  std::vector<std::string> env;
};
MailCommand BuildMailCommand(const MailSenderOptions& options, const controller::MailNotice& n);

class MailSender : public controller::MailSink {
 public:
  explicit MailSender(MailSenderOptions options);
  // Stop(): what waits is dropped, what runs is waited for (each up to its timeout).
  ~MailSender() override;

  void Send(std::vector<controller::MailNotice> mails) override;
  void Stop();

  // Tests: mails run to completion (whatever their result) and dropped so far; waits (at most
  // `max`) until none waits or runs, and says whether that happened.
  size_t finished() const;
  size_t dropped() const;
  bool WaitIdle(std::chrono::milliseconds max);

 private:
  void Worker();
  // Runs one mail's program to its end or its timeout; logs what went wrong.
  void Run(const controller::MailNotice& n);

  const MailSenderOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<controller::MailNotice> queue_;  // guarded by mu_
  std::map<std::string, size_t> queued_for_;  // recipient -> its mails in queue_; guarded by mu_
  bool stopping_ = false;                     // guarded by mu_
  std::condition_variable idle_cv_;
  size_t running_ = 0;                  // guarded by mu_
  size_t finished_ = 0;                 // guarded by mu_
  size_t dropped_ = 0;                  // guarded by mu_
  std::atomic<bool> stop_flag_{false};  // stopping_, read without the lock by running mails
  std::vector<std::thread> workers_;
};

}  // namespace muster::rpc
