// Presentation helpers for the CLI: Slurm-style fixed-width columns and a small JSON writer.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "muster/common/json_writer.h"
#include "muster/common/status.h"
#include "muster/v1/common.pb.h"
#include "muster/v1/controller.pb.h"

namespace muster::cli {

// Right-aligned in `width`, cut to `width` (squeue's %.Nx).
std::string Right(const std::string& s, size_t width);
std::string Left(const std::string& s, size_t width);

// A normalised priority factor as sprio prints it: 0.1234.
std::string Factor(double f);

// A duration as sacct's Elapsed and scontrol's RunTime print it: HH:MM:SS, with D- past a day.
std::string FormatHms(int64_t ms);

// A job's nodes as a host list ("node[1-4]").
std::string NodeList(const v1::JobInfo& j);
// How long it has run (or ran): 0 while pending.
int64_t ElapsedMs(const v1::JobInfo& j, int64_t now_ms);
// A time limit as squeue prints it: "UNLIMITED" or a duration.
std::string TimeLimitText(int64_t ms);
// One record of scontrol show (its Key=Value lines) to stdout, then a blank line; with
// -o/--oneliner all of it on one line, its fields separated by single spaces, as scontrol -o
// prints it.
void EmitRecord(const std::string& record, bool oneliner);
// A signal by name (USR1, SIGUSR1) or number (1-64), as scancel --signal takes it; 0 when
// unknown.
int ParseSignalName(const std::string& name);

// Slurm's names and short codes: RUNNING / R, PENDING / PD, COMPLETING / CG, ...
std::string JobStateName(v1::JobState s, bool completing);
std::string JobStateCode(v1::JobState s, bool completing);
// Parses "PD", "pending", "R", "running", ... INVALID when unknown.
bool ParseJobState(const std::string& s, v1::JobState* out);

// A -t/--states (squeue) or -s/--state (sacct) list as Slurm takes them: every state name and
// short code Slurm has, in any case, or "all". The states Muster gives jobs go to the controller
// where it can filter by them; COMPLETING (CG: a finished job still cleaning up, whatever it
// ended as) is matched here; Slurm's states Muster never gives a job (BOOT_FAIL, CONFIGURING,
// OUT_OF_MEMORY, REQUEUED, RESIZING, SIGNALING, STOPPED, ...) are accepted and match no job.
struct StateFilter {
  bool all = false;                  // "all"
  bool named = false;                // the list named a state (else: the command's default)
  bool completing = false;           // CG among them
  std::vector<v1::JobState> states;  // Muster's states among them
  // Whether the controller can do all of the filtering (states alone).
  bool ServerSide() const { return named && !completing && !states.empty() && !NeverOnly(); }
  bool NeverOnly() const { return named && !completing && states.empty(); }
  bool Matches(const v1::JobInfo& j) const;
};
// INVALID_ARGUMENT naming a word that is no state of Slurm's.
Result<StateFilter> ParseStateFilter(const std::string& list);
// Whether squeue lists `j` without -t: pending, running, suspended or still completing. As
// Slurm's, this holds with -j too: a job named by id that has ended is not listed.
bool InSqueueDefaultStates(const v1::JobInfo& j);

// A job as users name it: "7", a job array's task "7_3", or several tasks "7_[1-3,5]".
struct JobRef {
  uint64_t id = 0;
  std::vector<uint32_t> tasks;  // empty: the job (for a job array's id, all its tasks)
};
// Comma-separated references, brackets kept together ("7_[1,3],9"). INVALID_ARGUMENT naming
// the bad one.
Result<std::vector<JobRef>> ParseJobRefs(const std::string& list);
// Whether `j` is one of the jobs `refs` name (a job array's id names all its tasks).
bool RefsMatch(const std::vector<JobRef>& refs, const v1::JobInfo& j);
// The calling user's name (its uid in digits when it has none).
std::string CurrentUserName();

// "7", or "7_3" for a job array's task (squeue's %i, sacct's JobID).
std::string JobIdText(const v1::JobInfo& j);

// The JSON writer is common (muster/common/json_writer.h): the web view writes the same JSON.
using ::muster::JsonWriter;

}  // namespace muster::cli
