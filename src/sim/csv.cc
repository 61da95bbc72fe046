#include "muster/sim/csv.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "muster/common/strings.h"
#include "table_text.h"

namespace muster::sim {
namespace {

constexpr const char* kMalformed = "malformed: skipped";
constexpr const char* kNoRun = "run <= 0: dropped";
constexpr const char* kNoProcs = "no CPU: dropped";

// A time limit: empty, UNLIMITED and Partition_Limit are none (0).
std::optional<int64_t> TimeLimit(std::string_view s) {
  if (s.empty() || EqualsIgnoreCase(s, "UNLIMITED") || EqualsIgnoreCase(s, "Partition_Limit")) {
    return int64_t{0};
  }
  return table::Duration(s);
}

// A submit time: unix (or any) seconds, or an ISO-8601 UTC time.
std::optional<int64_t> SubmitTime(std::string_view s) {
  if (auto n = table::Integer(s)) return n;
  return table::IsoTime(s);
}

// What of a job that was read is past trace.h's bounds (times in seconds, the counts
// non-negative), or nothing.
std::optional<std::string> OutOfRange(int64_t submit, int64_t run, int64_t limit, int64_t cpus,
                                      int64_t gpus, int64_t nodes) {
  if (!table::InTimeRange(submit)) return table::TimeOutOfRange("submit", submit);
  if (!table::InTimeRange(run)) return table::TimeOutOfRange("run", run);
  if (!table::InTimeRange(limit)) return table::TimeOutOfRange("time limit", limit);
  if (cpus > kMaxTraceProcs) return table::CountOutOfRange("CPUs", cpus, kMaxTraceProcs);
  if (gpus > kMaxTraceGpus) return table::CountOutOfRange("GPUs", gpus, kMaxTraceGpus);
  if (nodes > kMaxTraceNodes) return table::CountOutOfRange("nodes", nodes, kMaxTraceNodes);
  return std::nullopt;
}

// Job ids that are not numbers, listed (the first kMaxListed) so a report's ids can be traced back.
struct TextIds {
  uint64_t count = 0;
  std::vector<std::string> listed;
  void Add(uint64_t line, std::string_view id) {
    if (count++ < table::Skips::kMaxListed) {
      listed.push_back("line " + std::to_string(line) + ": job " + table::Shown(id) +
                       " is replayed as job " + std::to_string(line));
    }
  }
  void AppendNotes(std::vector<std::string>& notes) const {
    if (count == 0) return;
    for (const std::string& l : listed) notes.push_back(l);
    notes.push_back(std::to_string(count) +
                    " job ids are not numbers (array tasks, heterogeneous parts): each takes its "
                    "line number as its id");
  }
};

}  // namespace

Result<Trace> ReadCsvTrace(std::string_view text) {
  Trace t;
  t.format = "csv";
  table::Skips skips;
  std::optional<table::Header> header;
  Status error;
  size_t c_id = 0, c_submit = 0, c_run = 0, c_procs = 0;
  std::optional<size_t> c_req, c_gpus, c_nodes, c_user, c_account, c_wait;
  std::vector<std::string_view> f;
  uint64_t read = 0, unlimited = 0;
  table::ForEachLine(text, [&](uint64_t number, std::string_view line) {
    if (table::IsBlank(line)) return true;
    if (!header) {
      auto h = table::ReadHeader(line, ',', "the CSV trace");
      if (!h.ok()) {
        error = h.status();
        return false;
      }
      header = std::move(*h);
      for (auto [name, col] :
           {std::pair{"id", &c_id}, {"submit", &c_submit}, {"run", &c_run}, {"procs", &c_procs}}) {
        auto found = header->Find(name);
        if (!found) {
          error = InvalidArgument(std::string("the CSV trace has no '") + name +
                                  "' column (its header, line " + std::to_string(number) +
                                  ", must name id, submit, run and procs; req_time, gpus, "
                                  "nodes, user, account and wait are optional)");
          return false;
        }
        *col = *found;
      }
      c_req = header->Find("req_time");
      c_gpus = header->Find("gpus");
      c_nodes = header->Find("nodes");
      c_user = header->Find("user");
      c_account = header->Find("account");
      c_wait = header->Find("wait");
      std::string ignored;
      for (const auto& [name, col] : header->index) {
        static constexpr const char* kKnown[] = {"id",   "submit", "run",  "procs",   "req_time",
                                                 "gpus", "nodes",  "user", "account", "wait"};
        if (std::find(std::begin(kKnown), std::end(kKnown), name) == std::end(kKnown)) {
          ignored += (ignored.empty() ? "" : ", ") + name;
        }
      }
      if (!ignored.empty()) t.notes.push_back("columns ignored: " + ignored);
      return true;
    }
    table::SplitFields(line, ',', f);
    if (f.size() != header->columns) {
      skips.Add(number, kMalformed,
                std::to_string(header->columns) + " columns expected, " + std::to_string(f.size()) +
                    " found");
      return true;
    }
    auto bad = [&](size_t col, const char* forms) {
      skips.Add(number, kMalformed,
                header->names[col] + " is not " + forms + ": '" + table::Shown(f[col]) + "'");
      return true;
    };
    const auto id = table::Integer(f[c_id]);
    if (!id) return bad(c_id, "an integer");
    const auto submit = SubmitTime(f[c_submit]);
    if (!submit) return bad(c_submit, "seconds or an ISO-8601 time");
    const auto run = table::Duration(f[c_run]);
    if (!run) return bad(c_run, "seconds or [D-]HH:MM:SS");
    const auto procs = table::Integer(f[c_procs]);
    if (!procs) return bad(c_procs, "an integer");
    std::optional<int64_t> req = *run;
    if (c_req) {
      req = TimeLimit(f[*c_req]);
      if (!req) return bad(*c_req, "seconds, [D-]HH:MM:SS or UNLIMITED");
    }
    int64_t counts[3] = {0, 0, -1};  // gpus, nodes, wait
    const std::optional<size_t> count_cols[3] = {c_gpus, c_nodes, c_wait};
    for (size_t k = 0; k < 3; ++k) {
      if (!count_cols[k] || f[*count_cols[k]].empty()) continue;
      auto n = table::Integer(f[*count_cols[k]]);
      if (!n || *n < 0) return bad(*count_cols[k], "a non-negative integer");
      counts[k] = *n;
    }
    ++read;
    if (*run <= 0) {
      skips.Add(number, kNoRun, "run " + std::string(f[c_run]));
      return true;
    }
    if (*procs < 1) {
      skips.Add(number, kNoProcs, "procs " + std::string(f[c_procs]));
      return true;
    }
    if (auto why = OutOfRange(*submit, *run, *req, *procs, counts[0], counts[1])) {
      skips.Add(number, table::kOutOfRange, *why);
      return true;
    }
    SimJob j;
    j.trace_id = *id;
    j.submit_s = *submit;
    j.run_s = *run;
    j.req_time_s = *req;
    if (*req == 0) ++unlimited;
    j.procs = static_cast<uint32_t>(*procs);
    j.gpus = static_cast<uint32_t>(counts[0]);
    j.nodes = static_cast<uint32_t>(counts[1]);
    j.traced_wait_s = table::InTimeRange(counts[2]) ? counts[2] : -1;
    j.user = c_user && !f[*c_user].empty() ? std::string(f[*c_user]) : "csv";
    if (c_account) j.account = std::string(f[*c_account]);
    t.jobs.push_back(std::move(j));
    return true;
  });
  if (!error.ok()) return error;
  if (!header) return InvalidArgument("the CSV trace is empty (it needs a header line)");
  if (read == 0 && skips.total() > 0) {
    return InvalidArgument("the CSV trace has no line that could be read (" + skips.First() + ")");
  }
  t.skipped = skips.total();
  skips.AppendNotes(t.notes);
  if (!c_req) {
    t.notes.push_back(
        "no req_time column: each job's run time is its time limit (perfect estimates)");
  }
  if (unlimited > 0) {
    t.notes.push_back(std::to_string(unlimited) + " jobs have no time limit");
  }
  if (!c_user) t.notes.push_back("no user column: every job is user 'csv'");
  table::SortAndRebase(t);
  return t;
}

Result<Trace> ReadSacct(std::string_view text) {
  constexpr size_t kFields = 11;
  enum {
    kJobId,
    kSubmit,
    kStart,
    kEnd,
    kTimelimit,
    kNcpus,
    kNnodes,
    kTres,
    kUser,
    kAccount,
    kState
  };
  static constexpr const char* kNames[] = {"JobID",     "Submit",  "Start",  "End",
                                           "Timelimit", "NCPUS",   "NNodes", "AllocTRES",
                                           "User",      "Account", "State"};
  Trace t;
  t.format = "sacct";
  table::Skips skips;
  TextIds text_ids;
  std::vector<std::string_view> f, tres;
  uint64_t read = 0, unlimited = 0;
  table::ForEachLine(text, [&](uint64_t number, std::string_view line) {
    if (table::IsBlank(line)) return true;
    table::SplitFields(line, '|', f);
    if (f.size() != kFields) {
      skips.Add(number, kMalformed,
                std::to_string(kFields) + " '|'-separated fields expected, " +
                    std::to_string(f.size()) + " found");
      return true;
    }
    if (EqualsIgnoreCase(f[kJobId], "JobID")) return true;  // sacct without -n
    auto bad = [&](size_t k, const char* forms) {
      skips.Add(number, kMalformed,
                std::string(kNames[k]) + " is not " + forms + ": '" + table::Shown(f[k]) + "'");
      return true;
    };
    const auto submit = table::IsoTime(f[kSubmit]);
    if (!submit) return bad(kSubmit, "a time (2024-01-05T10:11:12)");
    const bool never_started = f[kStart].empty() || EqualsIgnoreCase(f[kStart], "Unknown") ||
                               EqualsIgnoreCase(f[kStart], "None");
    std::optional<int64_t> start, end;
    if (!never_started) {
      start = table::IsoTime(f[kStart]);
      if (!start) return bad(kStart, "a time, Unknown or None");
      if (!EqualsIgnoreCase(f[kEnd], "Unknown") && !f[kEnd].empty()) {
        end = table::IsoTime(f[kEnd]);
        if (!end) return bad(kEnd, "a time or Unknown");
      }
    }
    const auto limit = TimeLimit(f[kTimelimit]);
    if (!limit) return bad(kTimelimit, "a time limit ([D-]HH:MM:SS, UNLIMITED)");
    const auto cpus = table::Integer(f[kNcpus]);
    if (!cpus || *cpus < 0) return bad(kNcpus, "a non-negative integer");
    const auto nodes = table::Integer(f[kNnodes]);
    if (!nodes || *nodes < 0) return bad(kNnodes, "a non-negative integer");
    int64_t gpus = 0;
    table::SplitFields(f[kTres], ',', tres);
    for (std::string_view item : tres) {
      constexpr std::string_view kGpu = "gres/gpu=";
      if (item.substr(0, kGpu.size()) != kGpu) continue;  // gres/gpu:a100=2 repeats it by type
      auto n = table::Integer(item.substr(kGpu.size()));
      if (!n || *n < 0) return bad(kTres, "TRES with gres/gpu=N");
      gpus = *n;
    }
    ++read;
    if (never_started) {
      skips.Add(number, "never started (Start Unknown or None): dropped",
                "State " + table::Shown(f[kState]));
      return true;
    }
    if (!end) {
      skips.Add(number, "not ended (End Unknown): dropped", "State " + table::Shown(f[kState]));
      return true;
    }
    const int64_t run = *end - *start;
    if (run <= 0) {
      skips.Add(number, kNoRun, "run " + std::to_string(run) + " s");
      return true;
    }
    if (*cpus < 1) {
      skips.Add(number, kNoProcs);
      return true;
    }
    // Start too, as Submit: 1970 to 2070, or the wait would be past the bounds (End: the run is).
    if (!table::InTimeRange(*start)) {
      skips.Add(number, table::kOutOfRange, table::TimeOutOfRange("Start", *start));
      return true;
    }
    if (auto why = OutOfRange(*submit, run, *limit, *cpus, gpus, *nodes)) {
      skips.Add(number, table::kOutOfRange, *why);
      return true;
    }
    SimJob j;
    if (auto id = table::Integer(f[kJobId]); id && f[kJobId].find('.') == std::string_view::npos) {
      j.trace_id = *id;
    } else {
      j.trace_id = static_cast<int64_t>(number);
      text_ids.Add(number, f[kJobId]);
    }
    j.submit_s = *submit;
    j.run_s = run;
    j.req_time_s = *limit;
    if (*limit == 0) ++unlimited;
    j.procs = static_cast<uint32_t>(*cpus);
    j.gpus = static_cast<uint32_t>(gpus);
    j.nodes = static_cast<uint32_t>(*nodes);
    j.user = f[kUser].empty() ? "sacct" : std::string(f[kUser]);
    j.account = std::string(f[kAccount]);
    j.traced_wait_s = *start >= *submit ? *start - *submit : -1;
    t.jobs.push_back(std::move(j));
    return true;
  });
  if (read == 0 && skips.total() > 0) {
    return InvalidArgument(
        "not sacct -P output (JobID|Submit|Start|End|Timelimit|NCPUS|NNodes|AllocTRES|User|"
        "Account|State): no line could be read (" +
        skips.First() + ")");
  }
  t.skipped = skips.total();
  skips.AppendNotes(t.notes);
  text_ids.AppendNotes(t.notes);
  if (unlimited > 0) {
    t.notes.push_back(std::to_string(unlimited) +
                      " jobs have no time limit (UNLIMITED or Partition_Limit)");
  }
  table::SortAndRebase(t);
  return t;
}

}  // namespace muster::sim
