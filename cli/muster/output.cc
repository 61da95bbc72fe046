#include "output.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <map>

#include "muster/common/duration.h"
#include "muster/common/hostlist.h"
#include "muster/common/signals.h"
#include "muster/common/strings.h"

namespace muster::cli {

std::string NodeList(const v1::JobInfo& j) {
  return CompressHostlist({j.nodes().begin(), j.nodes().end()});
}

int64_t ElapsedMs(const v1::JobInfo& j, int64_t now) {
  if (j.start_time_ms() <= 0 || j.state() == v1::PENDING) return 0;
  int64_t end = j.end_time_ms() > 0 && j.state() != v1::RUNNING ? j.end_time_ms() : now;
  return end - j.start_time_ms();
}

std::string TimeLimitText(int64_t ms) { return ms <= 0 ? "UNLIMITED" : FormatDuration(ms); }

void EmitRecord(const std::string& record, bool oneliner) {
  if (!oneliner) {
    std::fputs((record + "\n").c_str(), stdout);
    return;
  }
  std::string line;
  for (size_t i = 0; i < record.size(); ++i) {
    if (record[i] != '\n') {
      line += record[i];
      continue;
    }
    while (i + 1 < record.size() && record[i + 1] == ' ') ++i;  // the next line's indent
    if (i + 1 < record.size() && record[i + 1] != '\n') line += ' ';
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  std::printf("%s\n", line.c_str());
}

int ParseSignalName(const std::string& v) { return SignalNumber(v); }

std::string Right(const std::string& s, size_t width) {
  if (s.size() >= width) return s.substr(0, width);
  return std::string(width - s.size(), ' ') + s;
}

std::string Left(const std::string& s, size_t width) {
  if (s.size() >= width) return s;
  return s + std::string(width - s.size(), ' ');
}

std::string Factor(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", f);
  return buf;
}

std::string FormatHms(int64_t ms) {
  if (ms < 0) ms = 0;
  int64_t s = ms / 1000;
  char buf[48];
  if (s >= 86400) {
    std::snprintf(buf, sizeof buf, "%lld-%02lld:%02lld:%02lld", static_cast<long long>(s / 86400),
                  static_cast<long long>(s % 86400 / 3600), static_cast<long long>(s % 3600 / 60),
                  static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60), static_cast<long long>(s % 60));
  }
  return buf;
}

std::string JobStateName(v1::JobState s, bool completing) {
  if (completing) return "COMPLETING";
  switch (s) {
    case v1::PENDING:
      return "PENDING";
    case v1::RUNNING:
      return "RUNNING";
    case v1::COMPLETED:
      return "COMPLETED";
    case v1::FAILED:
      return "FAILED";
    case v1::CANCELLED:
      return "CANCELLED";
    case v1::TIMEOUT:
      return "TIMEOUT";
    case v1::NODE_FAIL:
      return "NODE_FAIL";
    case v1::PREEMPTED:
      return "PREEMPTED";
    case v1::SUSPENDED:
      return "SUSPENDED";
    case v1::DEADLINE:
      return "DEADLINE";
    default:
      return "UNKNOWN";
  }
}

std::string JobStateCode(v1::JobState s, bool completing) {
  if (completing) return "CG";
  switch (s) {
    case v1::PENDING:
      return "PD";
    case v1::RUNNING:
      return "R";
    case v1::COMPLETED:
      return "CD";
    case v1::FAILED:
      return "F";
    case v1::CANCELLED:
      return "CA";
    case v1::TIMEOUT:
      return "TO";
    case v1::NODE_FAIL:
      return "NF";
    case v1::PREEMPTED:
      return "PR";
    case v1::SUSPENDED:
      return "S";
    case v1::DEADLINE:
      return "DL";
    default:
      return "?";
  }
}

bool ParseJobState(const std::string& in, v1::JobState* out) {
  static const std::pair<const char*, v1::JobState> kMap[] = {
      {"pd", v1::PENDING},   {"pending", v1::PENDING},
      {"r", v1::RUNNING},    {"running", v1::RUNNING},
      {"cd", v1::COMPLETED}, {"completed", v1::COMPLETED},
      {"f", v1::FAILED},     {"failed", v1::FAILED},
      {"ca", v1::CANCELLED}, {"cancelled", v1::CANCELLED},
      {"to", v1::TIMEOUT},   {"timeout", v1::TIMEOUT},
      {"nf", v1::NODE_FAIL}, {"node_fail", v1::NODE_FAIL},
      {"pr", v1::PREEMPTED}, {"preempted", v1::PREEMPTED},
      {"s", v1::SUSPENDED},  {"suspended", v1::SUSPENDED},
      {"dl", v1::DEADLINE},  {"deadline", v1::DEADLINE}};
  std::string s = ToLower(in);
  for (const auto& [k, v] : kMap) {
    if (s == k) {
      *out = v;
      return true;
    }
  }
  return false;
}

Result<StateFilter> ParseStateFilter(const std::string& list) {
  // Slurm's states no Muster job is ever in (squeue(1), JOB STATE CODES).
  static const char* const kNever[] = {
      "bf", "boot_fail",   "cf", "configuring",  "oom", "out_of_memory", "rd", "resv_del_hold",
      "rf", "requeue_fed", "rh", "requeue_hold", "rq",  "requeued",      "rs", "resizing",
      "rv", "revoked",     "si", "signaling",    "se",  "special_exit",  "so", "stage_out",
      "st", "stopped"};
  StateFilter f;
  for (const std::string& word : Split(list, ',', true)) {
    const std::string s = ToLower(word);
    if (s == "all") {
      f.all = true;
      continue;
    }
    f.named = true;
    v1::JobState js;
    if (s == "cg" || s == "completing") {
      f.completing = true;
    } else if (ParseJobState(s, &js)) {
      if (std::find(f.states.begin(), f.states.end(), js) == f.states.end()) f.states.push_back(js);
    } else if (std::none_of(std::begin(kNever), std::end(kNever),
                            [&](const char* n) { return s == n; })) {
      return InvalidArgument("unknown job state '" + word + "'");
    }
  }
  return f;
}

bool InSqueueDefaultStates(const v1::JobInfo& j) {
  return j.completing() || j.state() == v1::PENDING || j.state() == v1::RUNNING ||
         j.state() == v1::SUSPENDED;
}

bool StateFilter::Matches(const v1::JobInfo& j) const {
  if (all || !named) return true;
  // As Slurm: a job cleaning up is COMPLETING and also in the state it ended in.
  return (completing && j.completing()) ||
         std::find(states.begin(), states.end(), j.state()) != states.end();
}

Result<std::vector<JobRef>> ParseJobRefs(const std::string& list) {
  std::vector<std::string> items;
  int depth = 0;
  std::string cur;
  for (char c : list) {
    if (c == ',' && depth == 0) {
      if (!cur.empty()) items.push_back(cur);
      cur.clear();
      continue;
    }
    depth += c == '[' ? 1 : c == ']' ? -1 : 0;
    cur += c;
  }
  if (!cur.empty()) items.push_back(cur);
  std::vector<JobRef> refs;
  for (const std::string& item : items) {
    auto bad = [&] { return InvalidArgument("invalid job id '" + item + "'"); };
    const std::string base = item.substr(0, item.find('.'));  // a step's job: "7.1", "7.batch"
    const size_t us = base.find('_');
    auto id = ParseUint(base.substr(0, us));
    if (!id || *id == 0) return bad();
    JobRef ref;
    ref.id = *id;
    if (us != std::string::npos) {
      std::string tasks = base.substr(us + 1);
      if (tasks.size() >= 2 && tasks.front() == '[' && tasks.back() == ']') {
        tasks = tasks.substr(1, tasks.size() - 2);
      }
      for (const std::string& part : Split(tasks, ',', false)) {
        const size_t dash = part.find('-');
        auto lo = ParseUint(part.substr(0, dash));
        auto hi = dash == std::string::npos ? lo : ParseUint(part.substr(dash + 1));
        if (!lo || !hi || *hi < *lo || *hi - *lo > 1'000'000) return bad();
        for (uint64_t t = *lo; t <= *hi; ++t) ref.tasks.push_back(static_cast<uint32_t>(t));
      }
      if (ref.tasks.empty()) return bad();
    }
    refs.push_back(std::move(ref));
  }
  return refs;
}

bool RefsMatch(const std::vector<JobRef>& refs, const v1::JobInfo& j) {
  if (refs.empty()) return true;
  for (const JobRef& r : refs) {
    if (r.tasks.empty()) {
      if (r.id == j.id() || (j.has_array() && j.array().array_job_id() == r.id)) return true;
    } else if (j.has_array() && j.array().array_job_id() == r.id &&
               std::find(r.tasks.begin(), r.tasks.end(), j.array().task_id()) != r.tasks.end()) {
      return true;
    }
  }
  return false;
}

std::string JobIdText(const v1::JobInfo& j) {
  if (!j.has_array()) return std::to_string(j.id());
  return std::to_string(j.array().array_job_id()) + "_" + std::to_string(j.array().task_id());
}

std::string CurrentUserName() {
  struct passwd* pw = nullptr;
  struct passwd pwd;
  char buf[4096];
  if (::getpwuid_r(::getuid(), &pwd, buf, sizeof buf, &pw) == 0 && pw) return pw->pw_name;
  return std::to_string(::getuid());
}

}  // namespace muster::cli
