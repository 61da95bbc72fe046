// Partitions as the controller has them (the config file's with the live changes laid over
// them): `muster partition list|create|update|delete|reset`, scontrol's `create|update|delete
// partition` and `show partition` (PartitionCommand, ShowPartitions; cmd_control.cc routes
// scontrol's words here), and the list sinfo draws its rows from (UseControllerPartitions).
// Keys as scontrol takes them, case-insensitive: PartitionName, Nodes, MaxTime, DefaultTime,
// Default, PriorityTier, PreemptMode, GraceTime, State=UP.
#include <cstdio>
#include <map>

#include "cli.h"
#include "muster/common/duration.h"
#include "muster/common/hostlist.h"
#include "muster/common/strings.h"
#include "options.h"
#include "output.h"

namespace muster::cli {
namespace {

Result<v1::ListPartitionsResponse> Fetch(client::ControllerClient& c) {
  v1::ListPartitionsResponse resp;
  MUSTER_RETURN_IF_ERROR(c.Call(v1::METHOD_LIST_PARTITIONS, v1::ListPartitionsRequest(), &resp));
  return resp;
}

// An older controller has no partition list: the local copy of the file stands in for it.
bool OlderController(const Status& s) { return s.code() == StatusCode::kUnimplemented; }

// scontrol show partition's Key=Value block (one line with -o).
void PrintPartition(const v1::PartitionInfo& p, bool oneliner) {
  const std::string allow = p.allowed_uids().empty()
                                ? "ALL"
                                : Join({p.allowed_uids().begin(), p.allowed_uids().end()}, ",");
  std::string out;
  out += "PartitionName=" + p.name() + "\n";
  out += "   AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllowUsers=" + allow + "\n";
  if (!p.denied_uids().empty()) {
    out += "   DenyUsers=" + Join({p.denied_uids().begin(), p.denied_uids().end()}, ",") + "\n";
  }
  out += std::string("   AllocNodes=ALL Default=") + (p.is_default() ? "YES" : "NO") + " QoS=N/A\n";
  out +=
      "   DefaultTime=" + (p.default_time_ms() ? FormatDuration(p.default_time_ms()) : "NONE") +
      " DisableRootJobs=NO ExclusiveUser=NO GraceTime=" + std::to_string(p.grace_time_ms() / 1000) +
      " Hidden=NO\n";
  out += "   MaxNodes=UNLIMITED MaxTime=" + TimeLimitText(p.max_time_ms()) + " MinNodes=0\n";
  out += "   Nodes=" + CompressHostlist({p.nodes().begin(), p.nodes().end()}) + "\n";
  out += "   OverTimeLimit=NONE PreemptMode=" + ToUpper(p.preempt_mode()) + "\n";
  out += "   PriorityJobFactor=1 PriorityTier=" + std::to_string(p.priority_tier()) +
         " RootOnly=NO ReqResv=NO OverSubscribe=NO\n";
  out += "   State=UP TotalCPUs=" + std::to_string(p.total_cpus()) +
         " TotalNodes=" + std::to_string(p.nodes_size()) + "\n";
  out += "   TRES=cpu=" + std::to_string(p.total_cpus()) +
         ",mem=" + std::to_string(p.total_memory_mb()) +
         "M,node=" + std::to_string(p.nodes_size()) +
         (p.total_gpus() ? ",gres/gpu=" + std::to_string(p.total_gpus()) : "") + "\n";
  out += "   Origin=" + p.origin() + "\n";  // Muster's: where the definition comes from
  EmitRecord(out, oneliner);
}

// KEY=VALUE words (scontrol's) into a request; keys case-insensitive.
Status FillRequest(const std::vector<std::string>& words, v1::UpdatePartitionRequest* req) {
  for (const std::string& w : words) {
    const size_t eq = w.find('=');
    if (eq == std::string::npos) {
      return InvalidArgument("expected KEY=VALUE, got '" + w.substr(0, 64) + "'");
    }
    const std::string k = ToLower(w.substr(0, eq));
    const std::string v = w.substr(eq + 1);
    if (k == "partitionname" || k == "partition") {
      req->set_name(v);
    } else if (k == "nodes") {
      req->set_nodes(v);
    } else if (k == "maxtime" || k == "defaulttime") {
      MUSTER_ASSIGN_OR_RETURN(int64_t ms, ParseTimeLimit(v));
      if (k == "maxtime") {
        req->set_max_time_ms(ms);
      } else {
        req->set_default_time_ms(ms);
      }
    } else if (k == "default") {
      const std::string b = ToUpper(v);
      if (b != "YES" && b != "NO") return InvalidArgument("Default= takes YES or NO");
      req->set_is_default(b == "YES");
    } else if (k == "prioritytier") {
      auto n = ParseUint(v);
      if (!n || *n > 65'535) return InvalidArgument("PriorityTier= takes 0..65535");
      req->set_priority_tier(static_cast<uint32_t>(*n));
    } else if (k == "preemptmode") {
      req->set_preempt_mode(ToLower(v));
    } else if (k == "gracetime") {
      auto n = ParseUint(v);
      if (!n || *n > 86'400 * 365) return InvalidArgument("GraceTime= takes seconds");
      req->set_grace_time_ms(*n * 1000);
    } else if (k == "allowusers" || k == "allowuids") {  // Muster's: allowed_uids
      req->set_allowed_uids(ToUpper(v) == "ALL" ? "" : v);
    } else if (k == "denyusers" || k == "denyuids") {
      req->set_denied_uids(v);
    } else if (k == "state") {
      if (ToUpper(v) != "UP") {
        return Unimplemented("State=" + v.substr(0, 32) +
                             " is not supported: a partition is always UP (drain its nodes)");
      }
    } else {
      return Unimplemented(w.substr(0, eq) +
                           "= is not supported (PartitionName, Nodes, MaxTime, DefaultTime, "
                           "Default, PriorityTier, PreemptMode, GraceTime, AllowUsers, "
                           "DenyUsers, State=UP)");
    }
  }
  return Status::Ok();
}

int Send(const std::string& cmd, const v1::UpdatePartitionRequest& req) {
  auto controller = ConnectController();
  if (!controller.ok()) return Fail(cmd, controller.status());
  v1::UpdatePartitionResponse resp;
  if (Status st = controller->Call(v1::METHOD_UPDATE_PARTITION, req, &resp); !st.ok()) {
    return Fail(cmd, st);
  }
  return kExitOk;
}

}  // namespace

Status UseControllerPartitions(client::ControllerClient& c, Config* config) {
  auto fetched = Fetch(c);
  if (!fetched.ok() && OlderController(fetched.status())) return Status::Ok();
  MUSTER_ASSIGN_OR_RETURN(v1::ListPartitionsResponse resp, std::move(fetched));
  config->partitions.clear();
  for (const v1::PartitionInfo& p : resp.partitions()) {
    PartitionConfig pc;
    pc.name = p.name();
    pc.nodes.assign(p.nodes().begin(), p.nodes().end());
    pc.nodes_expr = CompressHostlist(pc.nodes);
    pc.is_default = p.is_default();
    pc.max_time_ms = p.max_time_ms();
    pc.default_time_ms = p.default_time_ms();
    pc.priority_tier = p.priority_tier();
    pc.preempt_mode = p.preempt_mode();
    pc.grace_time_ms = p.grace_time_ms();
    pc.allowed_uids.assign(p.allowed_uids().begin(), p.allowed_uids().end());
    pc.denied_uids.assign(p.denied_uids().begin(), p.denied_uids().end());
    config->partitions.push_back(std::move(pc));
  }
  return Status::Ok();
}

int ShowPartitions(const std::string& name, bool oneliner) {
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("control", controller.status());
  auto resp = Fetch(*controller);
  if (!resp.ok()) return Fail("control", resp.status());
  bool any = false;
  for (const v1::PartitionInfo& p : resp->partitions()) {
    if (!name.empty() && p.name() != name) continue;
    PrintPartition(p, oneliner);
    any = true;
  }
  if (!any) return Fail("control", NotFound("Partition " + name + " not found"));
  return kExitOk;
}

int PartitionCommand(const std::string& verb, const std::vector<std::string>& words) {
  v1::UpdatePartitionRequest req;
  req.set_action(verb == "create"   ? v1::UpdatePartitionRequest::CREATE
                 : verb == "update" ? v1::UpdatePartitionRequest::UPDATE
                                    : v1::UpdatePartitionRequest::DELETE);
  std::vector<std::string> kv = words;
  // scontrol delete PartitionName=NAME (or just NAME).
  if (verb == "delete" && kv.size() == 1 && kv[0].find('=') == std::string::npos) {
    kv[0] = "PartitionName=" + kv[0];
  }
  if (Status st = FillRequest(kv, &req); !st.ok()) return Fail("control", st);
  if (req.name().empty()) return Usage("control", "PartitionName= is required");
  if (verb == "delete" && kv.size() != 1) {
    return Usage("control", "delete takes PartitionName=NAME only");
  }
  return Send("control", req);
}

int CmdPartition(int argc, char** argv) {
  constexpr const char* kUsage =
      "Usage: muster partition list [--json]\n"
      "       muster partition create NAME --nodes NODES [--default] [--max-time T]\n"
      "           [--default-time T] [--priority-tier N] [--preempt-mode off|requeue|cancel|"
      "suspend]\n"
      "           [--grace-time SECONDS] [--allowed-users U,U] [--denied-users U,U]\n"
      "       muster partition update NAME [the same options]\n"
      "       muster partition delete NAME | reset NAME   (reset: back to the config file's)\n";
  if (argc < 2) return Usage("partition", kUsage);
  const std::string action = argv[1];
  if (action == "-h" || action == "--help" || action == "help") {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (action == "list") {
    bool json = false;
    if (std::optional<int> rc = ReadJsonOption("partition list", "unknown argument", argc - 1,
                                               argv + 1, kUsage, &json)) {
      return *rc;
    }
    auto controller = ConnectController();
    if (!controller.ok()) return Fail("partition", controller.status());
    auto resp = Fetch(*controller);
    if (!resp.ok()) return Fail("partition", resp.status());
    if (json) {
      JsonWriter w;
      w.BeginObject().Key("partitions").BeginArray();
      for (const auto& p : resp->partitions()) {
        w.BeginObject().Field("name", p.name()).Field("default", p.is_default());
        w.Field("nodes", CompressHostlist({p.nodes().begin(), p.nodes().end()}));
        w.Field("max_time_ms", p.max_time_ms()).Field("default_time_ms", p.default_time_ms());
        w.Field("priority_tier", p.priority_tier()).Field("preempt_mode", p.preempt_mode());
        w.Field("grace_time_ms", p.grace_time_ms()).Field("origin", p.origin());
        w.Field("cpus", p.total_cpus()).Field("gpus", p.total_gpus()).EndObject();
      }
      w.EndArray().Key("problems").BeginArray();
      for (const auto& problem : resp->problems()) w.String(problem);
      w.EndArray().EndObject();
      std::printf("%s\n", w.str().c_str());
      return kExitOk;
    }
    std::printf("%-14s %-8s %-11s %-5s %-8s %-20s %s\n", "PARTITION", "DEFAULT", "MAXTIME", "TIER",
                "PREEMPT", "ORIGIN", "NODES");
    for (const auto& p : resp->partitions()) {
      std::printf("%-14s %-8s %-11s %-5u %-8s %-20s %s\n", p.name().c_str(),
                  p.is_default() ? "yes" : "no", TimeLimitText(p.max_time_ms()).c_str(),
                  p.priority_tier(), p.preempt_mode().c_str(), p.origin().c_str(),
                  CompressHostlist({p.nodes().begin(), p.nodes().end()}).c_str());
    }
    for (const auto& problem : resp->problems()) {
      std::fprintf(stderr, "muster partition: %s\n", problem.c_str());
    }
    return kExitOk;
  }
  v1::UpdatePartitionRequest req;
  if (action == "create") {
    req.set_action(v1::UpdatePartitionRequest::CREATE);
  } else if (action == "update") {
    req.set_action(v1::UpdatePartitionRequest::UPDATE);
  } else if (action == "delete") {
    req.set_action(v1::UpdatePartitionRequest::DELETE);
  } else if (action == "reset") {
    req.set_action(v1::UpdatePartitionRequest::RESET);
  } else {
    return Usage("partition", "unknown action '" + action + "'\n" + kUsage);
  }
  const bool settings = action == "create" || action == "update";
  enum { kNodes = 1000, kDefault, kMaxTime, kDefaultTime, kTier, kPreempt, kGrace, kAllow, kDeny };
  const struct option opts[] = {{"nodes", required_argument, nullptr, kNodes},
                                {"default", no_argument, nullptr, kDefault},
                                {"max-time", required_argument, nullptr, kMaxTime},
                                {"default-time", required_argument, nullptr, kDefaultTime},
                                {"priority-tier", required_argument, nullptr, kTier},
                                {"preempt-mode", required_argument, nullptr, kPreempt},
                                {"grace-time", required_argument, nullptr, kGrace},
                                {"allowed-users", required_argument, nullptr, kAllow},
                                {"denied-users", required_argument, nullptr, kDeny},
                                {nullptr, 0, nullptr, 0}};
  OptionReader in(argc - 1, argv + 1, "", opts);  // from the action on
  for (int c; (c = in.Next()) != -1;) {
    if (c == OptionReader::kWord) {
      if (!req.name().empty()) return Usage("partition", "one partition at a time");
      req.set_name(in.Word());
      continue;
    }
    if (!settings || c < kNodes) {
      return Usage("partition", "unknown option '" + in.Word() + "'");
    }
    const std::string v = optarg ? optarg : "";
    switch (c) {
      case kNodes:
        req.set_nodes(v);
        break;
      case kDefault:
        req.set_is_default(true);
        break;
      case kMaxTime:
      case kDefaultTime: {
        auto ms = ParseTimeLimit(v);
        if (!ms.ok()) return Usage("partition", ms.status().message());
        if (c == kMaxTime) {
          req.set_max_time_ms(*ms);
        } else {
          req.set_default_time_ms(*ms);
        }
        break;
      }
      case kTier: {
        auto n = ParseUint(v);
        if (!n || *n > 65'535) return Usage("partition", "--priority-tier takes 0..65535");
        req.set_priority_tier(static_cast<uint32_t>(*n));
        break;
      }
      case kPreempt:
        req.set_preempt_mode(ToLower(v));
        break;
      case kGrace: {
        auto n = ParseUint(v);
        if (!n || *n > 86'400 * 365) return Usage("partition", "--grace-time takes seconds");
        req.set_grace_time_ms(*n * 1000);
        break;
      }
      case kAllow:
        req.set_allowed_uids(ToUpper(v) == "ALL" ? "" : v);  // as show partition prints it
        break;
      case kDeny:
        req.set_denied_uids(v);
        break;
    }
  }
  if (req.name().empty()) return Usage("partition", "which partition?\n" + std::string(kUsage));
  if (action == "create" && !req.has_nodes()) {
    return Usage("partition", "a new partition needs --nodes");
  }
  return Send("partition " + action, req);
}

}  // namespace muster::cli
