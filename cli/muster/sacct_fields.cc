#include "sacct_fields.h"

#include <grp.h>
#include <pwd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

#include "muster/common/duration.h"
#include "muster/common/hostlist.h"
#include "muster/common/strings.h"
#include "output.h"

namespace muster::cli {
namespace {

using Value = Field::Value;

std::string Time(int64_t ms) { return ms > 0 ? FormatTimestamp(ms) : "Unknown"; }

std::string GroupName(gid_t gid) {
  struct group gr, *found = nullptr;
  std::vector<char> buf(16384);
  while (::getgrgid_r(gid, &gr, buf.data(), buf.size(), &found) == ERANGE && buf.size() < 1 << 24) {
    buf.resize(buf.size() * 2);
  }
  return found ? std::string(gr.gr_name) : std::to_string(gid);
}

// A size in MiB as sacct prints memory: in the largest unit it divides into exactly (2048 ->
// 2G), in --units (two decimals where it does not divide), or in MiB with --noconvert.
std::string Mem(uint64_t mb, char units, bool noconvert) {
  static constexpr char kUnits[] = "KMGTP";
  if (mb == 0) return "0";
  double v = static_cast<double>(mb);
  int unit = 1;  // M
  if (units) {
    const int want = static_cast<int>(std::strchr(kUnits, units) - kUnits);
    for (; unit < want; ++unit) v /= 1024;
    for (; unit > want; --unit) v *= 1024;
  } else if (!noconvert) {
    for (; unit < 4 && std::fmod(v, 1024) == 0; ++unit) v /= 1024;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, v == std::floor(v) ? "%.0f%c" : "%.2f%c", v, kUnits[unit]);
  return buf;
}

// Trackable resources as sacct lists them, by name: cpu=4,gres/gpu=2,mem=8G,node=1.
std::string Tres(const Row& r) {
  std::string t = "cpu=" + std::to_string(r.cpus);
  if (r.gpus > 0) t += ",gres/gpu=" + std::to_string(r.gpus);
  if (r.is_job && r.job->mem_total_mb() > 0) t += ",mem=" + Mem(r.job->mem_total_mb(), 0, false);
  return t + ",node=" + std::to_string(r.nnodes);
}

int64_t RanMs(const Row& r, int64_t now) {
  if (r.start_ms <= 0) return 0;
  return std::max<int64_t>(0, (r.end_ms > 0 ? r.end_ms : now) - r.start_ms);
}

// Slurm's way: the field named exactly (any case), else the first whose name starts with it.
const Field* FindField(const std::string& name) {
  for (const Field& f : Fields()) {
    if (EqualsIgnoreCase(f.name, name)) return &f;
  }
  for (const Field& f : Fields()) {
    if (!name.empty() && name.size() < f.name.size() &&
        EqualsIgnoreCase(f.name.substr(0, name.size()), name)) {
      return &f;
    }
  }
  return nullptr;
}

// The batch script's row's state: its job's, where the job did not end on its own.
std::string BatchState(const v1::JobInfo& j) {
  switch (j.state()) {
    case v1::RUNNING:
      return "RUNNING";
    case v1::SUSPENDED:
      return "SUSPENDED";
    case v1::COMPLETED:
      return "COMPLETED";
    case v1::FAILED:
      return "FAILED";
    default:
      return "CANCELLED";  // killed with the job (cancel, time limit, node failure)
  }
}

}  // namespace

const std::pair<uid_t, gid_t>* PasswdOf(const std::string& user) {
  static std::map<std::string, std::optional<std::pair<uid_t, gid_t>>> known;
  auto [it, fresh] = known.try_emplace(user);
  if (fresh) {
    struct passwd pw, *found = nullptr;
    std::vector<char> buf(16384);
    if (::getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found) == 0 && found) {
      it->second = std::make_pair(pw.pw_uid, pw.pw_gid);
    }
  }
  return it->second ? &*it->second : nullptr;
}

uint64_t LimitMinutes(int64_t ms) {
  return ms > 0 ? static_cast<uint64_t>((ms + 59'999) / 60'000) : UINT64_MAX;
}

const std::vector<Field>& Fields() {
  static const std::vector<Field> fields = [] {
    auto job_only = [](std::function<std::string(const v1::JobInfo&, const View&)> f) -> Value {
      return [f](const Row& r, const View& v) { return r.is_job ? f(*r.job, v) : std::string(); };
    };
    auto constant = [](const char* text) -> Value {
      return [text](const Row&, const View&) { return std::string(text); };
    };
    const char* const no_eligible = "when a job became eligible to start is not recorded";
    std::vector<Field> f = {
        {"JobID", 12, [](const Row& r, const View&) { return r.id; }, nullptr},
        {"JobIDRaw", 12, [](const Row& r, const View&) { return r.raw_id; }, nullptr},
        {"JobName", 10, [](const Row& r, const View&) { return r.name; }, nullptr},
        {"Partition", 10, [](const Row& r, const View&) { return r.partition; }, nullptr},
        {"Account", 10, [](const Row& r, const View&) { return r.job->account(); }, nullptr},
        {"QOS", 10, [](const Row& r, const View&) { return r.job->qos(); }, nullptr},
        {"Reservation", 12, [](const Row& r, const View&) { return r.job->reservation(); },
         nullptr},
        {"Cluster", 10, [](const Row&, const View& v) { return v.cluster; }, nullptr},
        {"AllocCPUS", 10, [](const Row& r, const View&) { return std::to_string(r.cpus); },
         nullptr},
        {"NCPUS", 10, [](const Row& r, const View&) { return std::to_string(r.cpus); }, nullptr},
        {"ReqCPUS", 8, [](const Row& r, const View&) { return std::to_string(r.cpus); }, nullptr},
        {"State", 10, [](const Row& r, const View&) { return r.state; }, nullptr},
        {"ExitCode", 8,
         [](const Row& r, const View&) {
           return std::to_string(r.exit_code) + ":" + std::to_string(r.exit_signal);
         },
         nullptr},
        {"DerivedExitCode", 15, job_only([](const v1::JobInfo& j, const View&) {
           // The highest exit code of the job's steps, with the signal that ended that step.
           int32_t code = 0, sig = 0;
           for (const v1::StepRecord& s : j.steps()) {
             if (s.exit_code() > code || (s.exit_code() == code && s.exit_signal() > sig)) {
               code = s.exit_code();
               sig = s.exit_signal();
             }
           }
           return std::to_string(code) + ":" + std::to_string(sig);
         }),
         nullptr},
        {"User", 9, job_only([](const v1::JobInfo& j, const View&) { return j.user(); }), nullptr},
        {"UID", 6, job_only([](const v1::JobInfo& j, const View& v) {
           const auto* pw = v.local_uid ? PasswdOf(j.user()) : nullptr;
           return std::to_string(pw ? pw->first : j.uid());
         }),
         nullptr},
        {"GID", 6, job_only([](const v1::JobInfo& j, const View&) {
           const auto* pw = PasswdOf(j.user());
           return pw ? std::to_string(pw->second) : std::string();
         }),
         nullptr},
        {"Group", 9, job_only([](const v1::JobInfo& j, const View&) {
           const auto* pw = PasswdOf(j.user());
           return pw ? GroupName(pw->second) : std::string();
         }),
         nullptr},
        {"Submit", 19, [](const Row& r, const View&) { return Time(r.job->submit_time_ms()); },
         nullptr},
        {"Start", 19, [](const Row& r, const View&) { return Time(r.start_ms); }, nullptr},
        {"End", 19, [](const Row& r, const View&) { return Time(r.end_ms); }, nullptr},
        {"Elapsed", 10, [](const Row& r, const View& v) { return FormatHms(RanMs(r, v.now)); },
         nullptr},
        {"ElapsedRaw", 10,
         [](const Row& r, const View& v) { return std::to_string(RanMs(r, v.now) / 1000); },
         nullptr},
        {"CPUTime", 10,
         [](const Row& r, const View& v) {
           return FormatHms(RanMs(r, v.now) / 1000 * 1000 * r.cpus);
         },
         nullptr},
        {"CPUTimeRAW", 10,
         [](const Row& r, const View& v) {
           return std::to_string(RanMs(r, v.now) / 1000 * r.cpus);
         },
         nullptr},
        {"NNodes", 8, [](const Row& r, const View&) { return std::to_string(r.nnodes); }, nullptr},
        {"ReqNodes", 8, [](const Row& r, const View&) { return std::to_string(r.nnodes); },
         nullptr},
        {"AllocNodes", 10,
         [](const Row& r, const View&) { return std::to_string(r.start_ms > 0 ? r.nnodes : 0); },
         nullptr},
        {"NodeList", 15,
         [](const Row& r, const View&) {
           return r.nodelist.empty() ? "None assigned" : r.nodelist;
         },
         nullptr},
        {"NTasks", 8,
         [](const Row& r, const View&) {
           return r.is_job ? std::string() : std::to_string(r.ntasks);
         },
         nullptr},
        {"ReqMem", 10,
         [](const Row& r, const View& v) {
           return Mem(r.job->mem_total_mb(), v.units, v.noconvert);
         },
         nullptr},
        {"AllocTRES", 30,
         [](const Row& r, const View&) { return r.start_ms > 0 ? Tres(r) : std::string(); },
         nullptr},
        {"ReqTRES", 30,
         [](const Row& r, const View&) { return r.is_job ? Tres(r) : std::string(); }, nullptr},
        {"Timelimit", 10, job_only([](const v1::JobInfo& j, const View&) {
           // As sacct's other time fields: [D-]HH:MM:SS.
           return j.time_limit_ms() > 0 ? FormatHms(j.time_limit_ms()) : std::string("UNLIMITED");
         }),
         nullptr},
        {"TimelimitRaw", 12, job_only([](const v1::JobInfo& j, const View&) {
           const uint64_t m = LimitMinutes(j.time_limit_ms());
           return m == UINT64_MAX ? std::string("UNLIMITED") : std::to_string(m);
         }),
         nullptr},
        {"Reason", 20, job_only([](const v1::JobInfo& j, const View&) { return j.reason(); }),
         nullptr},
        {"WorkDir", 20, [](const Row& r, const View&) { return r.job->work_dir(); }, nullptr},
        {"Priority", 10,
         job_only([](const v1::JobInfo& j, const View&) { return std::to_string(j.priority()); }),
         nullptr},
        {"Restarts", 8, job_only([](const v1::JobInfo& j, const View&) {
           return std::to_string(j.requeue_count());
         }),
         nullptr},
        // Nothing sets these here: no energy plugin, no wckeys, comments or MCS labels kept, no
        // containers, no CPU frequency requests.
        {"ConsumedEnergy", 14, constant("0"), nullptr},
        {"ConsumedEnergyRaw", 17, constant("0"), nullptr},
        {"WCKey", 10, constant(""), nullptr},
        {"WCKeyID", 7, constant("0"), nullptr},
        {"AdminComment", 15, constant(""), nullptr},
        {"Comment", 15, constant(""), nullptr},
        {"SystemComment", 15, constant(""), nullptr},
        {"McsLabel", 10, constant(""), nullptr},
        {"Container", 20, constant(""), nullptr},
        {"BlockID", 10, constant(""), nullptr},
        {"ReqCPUFreq", 13, constant("Unknown"), nullptr},
        {"ReqCPUFreqGov", 13, constant("Unknown"), nullptr},
        {"ReqCPUFreqMax", 13, constant("Unknown"), nullptr},
        {"ReqCPUFreqMin", 13, constant("Unknown"), nullptr},
        {"AssocID", 0, nullptr, "associations have no numeric ids here"},
        {"Constraints", 0, nullptr,
         "the controller's accounting replies do not carry a job's constraints"},
        {"DBIndex", 0, nullptr, "there is no accounting database"},
        {"Eligible", 0, nullptr, no_eligible},
        {"Reserved", 0, nullptr, no_eligible},
        {"ResvCPU", 0, nullptr, no_eligible},
        {"ResvCPURAW", 0, nullptr, no_eligible},
        {"Flags", 0, nullptr, "which scheduling pass started a job is not recorded"},
        {"Layout", 0, nullptr, "a step's task layout is not recorded"},
        {"QOSRAW", 0, nullptr, "QoS have no numeric ids here"},
        {"ReservationId", 0, nullptr, "reservations have no numeric ids here"},
        {"SubmitLine", 0, nullptr, "the command line that submitted a job is not kept"},
        {"Suspended", 0, nullptr, "the time a job spent suspended is not in its accounting record"},
    };
    // Per-task usage: not gathered (no jobacct_gather), so blank.
    for (const char* name :
         {"AveCPU",           "AveCPUFreq",      "AveDiskRead",  "AveDiskWrite",
          "AvePages",         "AveRSS",          "AveVMSize",    "MaxDiskRead",
          "MaxDiskReadNode",  "MaxDiskReadTask", "MaxDiskWrite", "MaxDiskWriteNode",
          "MaxDiskWriteTask", "MaxPages",        "MaxPagesNode", "MaxPagesTask",
          "MaxRSS",           "MaxRSSNode",      "MaxRSSTask",   "MaxVMSize",
          "MaxVMSizeNode",    "MaxVMSizeTask",   "MinCPU",       "MinCPUNode",
          "MinCPUTask",       "SystemCPU",       "TotalCPU",     "UserCPU"}) {
      f.push_back({name, 10, constant(""), nullptr});
    }
    for (const char* dir : {"In", "Out"}) {
      for (const char* what :
           {"Ave", "Max", "MaxNode", "MaxTask", "Min", "MinNode", "MinTask", "Tot"}) {
        f.push_back({std::string("TRESUsage") + dir + what, 18, constant(""), nullptr});
      }
    }
    for (Field& x : f) x.width = std::max(x.width, x.name.size());  // a default width fits the name
    std::stable_sort(f.begin(), f.end(), [](const Field& a, const Field& b) {
      return ToLower(a.name) < ToLower(b.name);
    });
    return f;
  }();
  return fields;
}

Result<std::vector<Column>> ParseFormat(const std::string& spec) {
  std::vector<Column> out;
  for (std::string item : Split(spec, ',', true)) {
    item = std::string(Trim(item));
    Column c{nullptr, 0, false};
    if (const size_t pct = item.find('%'); pct != std::string::npos) {
      std::string w = item.substr(pct + 1);
      c.left = StartsWith(w, "-");
      auto n = ParseUint(c.left ? w.substr(1) : w);
      if (!n || *n == 0 || *n > 1000) return InvalidArgument("bad width in format field " + item);
      c.width = static_cast<size_t>(*n);
      item.resize(pct);
    }
    if (EqualsIgnoreCase(item, "ALL")) {
      for (const Field& f : Fields()) {
        if (f.value) out.push_back({&f, c.width ? c.width : f.width, c.left});
      }
      continue;
    }
    c.field = FindField(item);
    if (!c.field) {
      return InvalidArgument("unknown format field '" + item + "' (--helpformat lists them)");
    }
    if (!c.field->value) {
      return InvalidArgument("format field '" + c.field->name +
                             "' is not available: " + c.field->refusal);
    }
    if (!c.width) c.width = c.field->width;
    out.push_back(c);
  }
  if (out.empty()) return InvalidArgument("the format lists no fields");
  return out;
}

std::string Fit(const std::string& v, size_t width, bool left) {
  if (v.size() > width) return v.substr(0, width - 1) + "+";
  const std::string pad(width - v.size(), ' ');
  return left ? v + pad : pad + v;
}

std::vector<Row> RowsOf(const v1::JobInfo& j, bool allocations_only) {
  std::vector<Row> rows;
  Row job;
  job.job = &j;
  job.is_job = true;
  job.id = JobIdText(j);
  job.raw_id = std::to_string(j.id());
  job.name = j.name();
  job.partition = j.partition();
  job.state = JobStateName(j.state(), false);
  if (j.state() == v1::PENDING && j.requeue_count() > 0) job.state = "PENDING";
  job.exit_code = j.exit_code();
  job.exit_signal = j.exit_signal();
  job.cpus = j.cpus_total();
  job.gpus = j.gpus_total();
  job.nnodes = j.num_nodes();
  job.nodelist = CompressHostlist({j.nodes().begin(), j.nodes().end()});
  job.start_ms = j.start_time_ms();
  job.end_ms = j.end_time_ms();
  if (j.state() == v1::PENDING) job.nodelist.clear();
  rows.push_back(job);
  if (allocations_only || j.start_time_ms() <= 0) return rows;
  if (!j.interactive() && j.nodes_size() > 0) {
    Row b = job;
    b.is_job = false;
    b.id = job.id + ".batch";
    b.raw_id = job.raw_id + ".batch";
    b.name = "batch";
    b.partition.clear();
    b.state = BatchState(j);
    b.nnodes = 1;
    b.ntasks = 1;
    b.nodelist = j.nodes(0);
    b.gpus = 0;
    b.cpus = j.allocation().nodes_size() > 0
                 ? static_cast<uint32_t>(j.allocation().nodes(0).cpu_ids_size())
                 : (j.num_nodes() ? j.cpus_total() / j.num_nodes() : 0);
    rows.push_back(b);
  }
  for (const v1::StepRecord& s : j.steps()) {
    Row r;
    r.job = &j;
    r.id = job.id + "." + std::to_string(s.id());
    r.raw_id = job.raw_id + "." + std::to_string(s.id());
    r.name = s.name();
    r.state = JobStateName(s.state(), false);
    r.exit_code = s.exit_code();
    r.exit_signal = s.exit_signal();
    std::vector<std::string> names;
    for (const auto& na : s.nodes()) {
      names.push_back(na.node());
      r.cpus += static_cast<uint32_t>(na.cpu_ids_size());
      r.gpus += static_cast<uint32_t>(na.gpu_indices_size());
    }
    if (s.overlap()) r.cpus = s.ntasks() * std::max<uint32_t>(1, s.cpus_per_task());
    r.nnodes = static_cast<uint32_t>(names.size());
    r.ntasks = s.ntasks();
    r.nodelist = CompressHostlist(names);
    r.start_ms = s.start_time_ms();
    r.end_ms = s.end_time_ms();
    rows.push_back(r);
  }
  return rows;
}

}  // namespace muster::cli
