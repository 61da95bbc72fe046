#include "sacctmgr_limits.h"

#include <cstdio>
#include <functional>
#include <vector>

#include "cli.h"
#include "format_spec.h"
#include "muster/common/duration.h"
#include "muster/common/strings.h"

namespace muster::cli {
namespace {

constexpr uint32_t kClear = 0xFFFFFFFFu;  // the controller's "clear this limit"

Result<uint32_t> Count(const std::string& key, const std::string& v) {
  if (v == "-1") return kClear;
  auto n = ParseUint(v);
  if (!n || *n > 1'000'000'000)
    return InvalidArgument(key + ": expected a count or -1, not '" + v + "'");
  return static_cast<uint32_t>(*n);
}

// "gres/gpu=16,gres/gpu:h100=8,node=4": GPUs by type into `gpus`, nodes into `nodes`.
Status Tres(const std::string& key, const std::string& v,
            google::protobuf::Map<std::string, uint32_t>* gpus, std::optional<uint32_t>* nodes) {
  for (const std::string& item : Split(v, ',', true)) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return InvalidArgument(key + ": '" + item + "' is not TRES=COUNT");
    const std::string name = ToLower(item.substr(0, eq));
    MUSTER_ASSIGN_OR_RETURN(uint32_t n, Count(key, item.substr(eq + 1)));
    if (name == "node" || name == "nodes") {
      if (!nodes) return InvalidArgument(key + ": node is not limited here");
      *nodes = n;
    } else if (name == "gres/gpu") {
      (*gpus)[""] = n;
    } else if (StartsWith(name, "gres/gpu:")) {
      (*gpus)[name.substr(9)] = n;
    } else {
      return Unimplemented(key + ": " + name +
                           " is not limited by Muster (gres/gpu, gres/gpu:TYPE and node are)");
    }
  }
  return Status::Ok();
}

std::string GpuTres(const google::protobuf::Map<std::string, uint32_t>& m) {
  std::map<std::string, uint32_t> sorted(m.begin(), m.end());
  std::vector<std::string> out;
  for (const auto& [t, n] : sorted) {
    out.push_back((t.empty() ? "gres/gpu" : "gres/gpu:" + t) + "=" + std::to_string(n));
  }
  return Join(out, ",");
}

std::string ModeName(v1::PreemptMode m) {
  return m == v1::PREEMPT_CANCEL ? "cancel" : m == v1::PREEMPT_SUSPEND ? "suspend" : "requeue";
}

}  // namespace

std::optional<std::string> TakeKey(std::map<std::string, std::string>& m,
                                   std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    auto it = m.find(k);
    if (it == m.end()) continue;
    std::string v = it->second;
    m.erase(it);
    return v;
  }
  return std::nullopt;
}

Status TakeLimits(std::map<std::string, std::string>& values, bool qos, v1::UsageLimits* out) {
  auto count = [&](std::initializer_list<const char*> keys, auto set) -> Status {
    if (auto v = TakeKey(values, keys)) {
      MUSTER_ASSIGN_OR_RETURN(uint32_t n, Count(*keys.begin(), *v));
      set(n);
    }
    return Status::Ok();
  };
  MUSTER_RETURN_IF_ERROR(count({"grpjobs"}, [&](uint32_t n) { out->set_grp_jobs(n); }));
  MUSTER_RETURN_IF_ERROR(
      count({"grpsubmitjobs", "grpsubmit"}, [&](uint32_t n) { out->set_grp_submit(n); }));
  MUSTER_RETURN_IF_ERROR(count({"maxjobs", "maxjobsperuser", "maxjobspu"},
                               [&](uint32_t n) { out->set_max_jobs_per_user(n); }));
  MUSTER_RETURN_IF_ERROR(
      count({"maxsubmitjobs", "maxsubmitjobsperuser", "maxsubmit", "maxsubmitpu"},
            [&](uint32_t n) { out->set_max_submit_per_user(n); }));
  MUSTER_RETURN_IF_ERROR(count({"maxnodes"}, [&](uint32_t n) { out->set_max_nodes_per_job(n); }));
  MUSTER_RETURN_IF_ERROR(count({"grpstoredmb"}, [&](uint32_t n) { out->set_grp_stored_mb(n); }));
  MUSTER_RETURN_IF_ERROR(count({"maxstoredmbperuser", "maxstoredmbpu", "maxstoredmb"},
                               [&](uint32_t n) { out->set_max_stored_mb_per_user(n); }));
  if (auto v = TakeKey(values, {"grptres"})) {
    std::optional<uint32_t> nodes;
    MUSTER_RETURN_IF_ERROR(Tres("GrpTRES", *v, out->mutable_grp_gpus(), &nodes));
    if (nodes) out->set_grp_nodes(*nodes);
  }
  if (auto v = TakeKey(values, {"maxtres", "maxtresperjob"})) {
    google::protobuf::Map<std::string, uint32_t> gpus;
    std::optional<uint32_t> nodes;
    MUSTER_RETURN_IF_ERROR(Tres("MaxTRES", *v, &gpus, &nodes));
    if (nodes) out->set_max_nodes_per_job(*nodes);
    for (const auto& [t, n] : gpus) {
      if (!t.empty()) return Unimplemented("MaxTRES: GPUs per job are limited without a type");
      out->set_max_gpus_per_job(n);
    }
  }
  if (auto v = TakeKey(values, {"maxtresperuser", "maxtrespu"})) {
    if (!qos) return InvalidArgument("MaxTRESPerUser is a QoS limit; an account uses GrpTRES");
    MUSTER_RETURN_IF_ERROR(Tres("MaxTRESPerUser", *v, out->mutable_max_gpus_per_user(), nullptr));
  }
  if (auto v = TakeKey(values, {"maxwall", "maxwalldurationperjob"})) {
    if (*v == "-1") {
      out->set_max_wall_ms(kClear);
    } else {
      auto ms = ParseTimeLimit(*v);
      if (!ms.ok() || *ms <= 0) return InvalidArgument("MaxWall: bad time '" + *v + "'");
      out->set_max_wall_ms(static_cast<uint64_t>(*ms));
    }
  }
  return Status::Ok();
}

std::string LimitColumn(const v1::UsageLimits& l, const std::string& c) {
  if (c == "GrpTRES") {
    std::string s = l.has_grp_nodes() ? "node=" + std::to_string(l.grp_nodes()) : "";
    const std::string g = GpuTres(l.grp_gpus());
    return s.empty() ? g : g.empty() ? s : s + "," + g;
  }
  if (c == "GrpJobs") return l.has_grp_jobs() ? std::to_string(l.grp_jobs()) : "";
  if (c == "GrpSubmit") return l.has_grp_submit() ? std::to_string(l.grp_submit()) : "";
  if (c == "MaxJobs" || c == "MaxJobsPU") {
    return l.has_max_jobs_per_user() ? std::to_string(l.max_jobs_per_user()) : "";
  }
  if (c == "MaxSubmit" || c == "MaxSubmitPU") {
    return l.has_max_submit_per_user() ? std::to_string(l.max_submit_per_user()) : "";
  }
  if (c == "MaxTRES") {
    std::vector<std::string> parts;
    if (l.has_max_nodes_per_job()) parts.push_back("node=" + std::to_string(l.max_nodes_per_job()));
    if (l.has_max_gpus_per_job()) {
      parts.push_back("gres/gpu=" + std::to_string(l.max_gpus_per_job()));
    }
    return Join(parts, ",");
  }
  if (c == "MaxTRESPU") return GpuTres(l.max_gpus_per_user());
  if (c == "GrpStoredMB") return l.has_grp_stored_mb() ? std::to_string(l.grp_stored_mb()) : "";
  if (c == "MaxStoredMBPU") {
    return l.has_max_stored_mb_per_user() ? std::to_string(l.max_stored_mb_per_user()) : "";
  }
  if (c == "MaxWall") {
    return l.has_max_wall_ms() ? FormatDuration(static_cast<int64_t>(l.max_wall_ms())) : "";
  }
  return "";
}

Status UpdateQos(v1::AccountOp op, const std::string& name,
                 std::map<std::string, std::string>& values) {
  v1::UpdateQosRequest req;
  req.set_op(op);
  req.set_name(name);
  if (auto v = TakeKey(values, {"description", "descr"})) req.set_description(*v);
  if (auto v = TakeKey(values, {"priority"})) {
    auto n = ParseUint(*v);
    if (!n || *n > 1'000'000) return InvalidArgument("Priority must be 0 to 1000000");
    req.set_priority(static_cast<uint32_t>(*n));
  }
  if (auto v = TakeKey(values, {"preempt"})) req.set_preempt(*v == "''" ? "" : *v);
  if (auto v = TakeKey(values, {"preemptmode"})) {
    const std::string m = ToLower(*v);
    if (m == "requeue") {
      req.set_preempt_mode(v1::PREEMPT_REQUEUE);
    } else if (m == "cancel") {
      req.set_preempt_mode(v1::PREEMPT_CANCEL);
    } else if (m == "suspend") {
      req.set_preempt_mode(v1::PREEMPT_SUSPEND);
    } else {
      return Unimplemented("PreemptMode " + *v + " is not supported (requeue, cancel, suspend)");
    }
  }
  if (auto v = TakeKey(values, {"usagefactor"})) {
    char* end = nullptr;
    const double f = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end || !(f >= 0 && f <= 1000)) {
      return InvalidArgument("UsageFactor must be a number from 0 to 1000");
    }
    req.set_usage_factor(f);
  }
  if (auto v = TakeKey(values, {"gracetime"})) {
    auto n = ParseUint(*v);  // seconds, as sacctmgr's
    if (!n || *n > 365ULL * 86'400) return InvalidArgument("GraceTime is a number of seconds");
    req.set_grace_time_ms(*n * 1000);
  }
  if (auto v = TakeKey(values, {"flags"})) {
    const std::string f = ToLower(*v);
    if (f == "denyonlimit") {
      req.set_deny_on_limit(true);
    } else if (f == "-1" || f.empty()) {
      req.set_deny_on_limit(false);
    } else {
      return Unimplemented("flag " + *v + " is not supported (DenyOnLimit)");
    }
  }
  MUSTER_RETURN_IF_ERROR(TakeLimits(values, /*qos=*/true, req.mutable_limits()));
  if (!values.empty()) {
    return Unimplemented("sacctmgr: '" + values.begin()->first + "' is not supported for a QoS");
  }
  auto controller = ConnectController();
  if (!controller.ok()) return controller.status();
  v1::UpdateQosResponse resp;
  return controller->Call(v1::METHOD_UPDATE_QOS, req, &resp);
}

int ShowQos(const std::vector<std::string>& names, const std::string& format_in, bool header,
            const std::string& sep, bool trailing_sep) {
  struct Column {
    const char* name;
    int width;
    std::function<std::string(const v1::QosRecord&)> value;
  };
  auto limit = [](const char* c) {
    return [c](const v1::QosRecord& q) { return LimitColumn(q.limits(), c); };
  };
  static const std::vector<Column> columns = {
      {"Name", 10, [](const v1::QosRecord& q) { return q.name(); }},
      {"Priority", 10, [](const v1::QosRecord& q) { return std::to_string(q.priority()); }},
      {"GraceTime", 10,
       [](const v1::QosRecord& q) {
         return FormatDuration(static_cast<int64_t>(q.grace_time_ms()));
       }},
      {"Preempt", 10,
       [](const v1::QosRecord& q) {
         return Join(std::vector<std::string>(q.preempt().begin(), q.preempt().end()), ",");
       }},
      {"PreemptMode", 11, [](const v1::QosRecord& q) { return ModeName(q.preempt_mode()); }},
      {"Flags", 12, [](const v1::QosRecord& q) { return q.deny_on_limit() ? "DenyOnLimit" : ""; }},
      {"UsageFactor", 11,
       [](const v1::QosRecord& q) {
         char buf[32];
         std::snprintf(buf, sizeof buf, "%.6f", q.usage_factor());
         return std::string(buf);
       }},
      {"GrpTRES", 13, limit("GrpTRES")},
      {"GrpJobs", 7, limit("GrpJobs")},
      {"GrpSubmit", 9, limit("GrpSubmit")},
      {"MaxTRES", 13, limit("MaxTRES")},
      {"MaxWall", 11, limit("MaxWall")},
      {"MaxTRESPU", 13, limit("MaxTRESPU")},
      {"MaxJobsPU", 9, limit("MaxJobsPU")},
      {"MaxSubmitPU", 11, limit("MaxSubmitPU")},
      {"GrpStoredMB", 11, limit("GrpStoredMB")},
      {"MaxStoredMBPU", 13, limit("MaxStoredMBPU")},
      {"Descr", 20, [](const v1::QosRecord& q) { return q.description(); }},
  };
  const std::string format = format_in.empty()
                                 ? "Name,Priority,GraceTime,Preempt,PreemptMode,Flags,UsageFactor,"
                                   "GrpTRES,GrpJobs,MaxTRES,MaxWall,MaxTRESPU,MaxJobsPU,MaxSubmitPU"
                                 : format_in;
  std::string supported;
  for (const Column& c : columns) supported += std::string(supported.empty() ? "" : " ") + c.name;
  auto find = [&](const std::string& name) -> std::optional<size_t> {
    std::string n = ToLower(name);
    if (n == "description") n = "descr";
    for (size_t i = 0; i < columns.size(); ++i) {
      if (ToLower(columns[i].name) == n) return i;
    }
    return std::nullopt;
  };
  auto named = ParseNamedFields(format, find, supported);
  if (!named.ok()) return Fail("sacctmgr", named.status());
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("sacctmgr", controller.status());
  v1::ListAccountsResponse all;
  if (Status st = controller->Call(v1::METHOD_LIST_ACCOUNTS, v1::ListAccountsRequest(), &all);
      !st.ok()) {
    return Fail("sacctmgr", st);
  }
  const bool parsable = !sep.empty();
  auto print = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i) {
      const int width = (*named)[i].width ? static_cast<int>((*named)[i].width)
                                          : columns[(*named)[i].index].width;
      if (parsable) {
        line += cells[i];
        if (i + 1 < cells.size() || trailing_sep) line += sep;
      } else {
        std::string cell = cells[i].substr(0, static_cast<size_t>(width));
        line += (i ? " " : "") + std::string(static_cast<size_t>(width) - cell.size(), ' ') + cell;
      }
    }
    std::printf("%s\n", line.c_str());
  };
  if (header) {
    std::vector<std::string> heads, dashes;
    for (const NamedField& n : *named) {
      heads.push_back(columns[n.index].name);
      const int width = n.width ? static_cast<int>(n.width) : columns[n.index].width;
      dashes.push_back(std::string(static_cast<size_t>(width), '-'));
    }
    print(heads);
    if (!parsable) print(dashes);
  }
  for (const v1::QosRecord& q : all.qos()) {
    if (!names.empty() && std::find(names.begin(), names.end(), q.name()) == names.end()) continue;
    std::vector<std::string> cells;
    for (const NamedField& n : *named) cells.push_back(columns[n.index].value(q));
    print(cells);
  }
  return kExitOk;
}

}  // namespace muster::cli
