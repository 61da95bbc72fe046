// muster control (scontrol): show job|node|partition|reservation|config|hostnames, ping,
// version, update NodeName=.../JobId=..., hold|release|requeue|suspend|resume|top, with
// scontrol's leading options (-o, -Q, -M, ...); create|update|delete reservation go to
// cmd_reservation.cc. Output in scontrol's Key=Value layout, for the scripts that parse it.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "cli.h"
#include "muster/common/clock.h"
#include "muster/common/config.h"
#include "muster/common/duration.h"
#include "muster/common/hostlist.h"
#include "muster/common/strings.h"
#include "muster/common/version.h"
#include "options.h"
#include "output.h"
#include "sinfo_format.h"
#include "slurm_config.h"

namespace muster::cli {
namespace {

std::string OrNull(const std::string& v) { return v.empty() ? "(null)" : v; }
std::string When(int64_t ms) { return ms > 0 ? FormatTimestamp(ms) : "Unknown"; }

std::string NodeStateUpper(const v1::NodeInfo& n) {
  std::string s;
  switch (n.state()) {
    case v1::NODE_IDLE:
      s = "IDLE";
      break;
    case v1::NODE_MIXED:
      s = "MIXED";
      break;
    case v1::NODE_ALLOCATED:
      s = "ALLOCATED";
      break;
    case v1::NODE_NOT_RESPONDING:
      s = "IDLE+NOT_RESPONDING";
      break;
    case v1::NODE_DOWN:
      s = "DOWN";
      break;
    default:
      s = "UNKNOWN";
  }
  if (!n.reservation().empty()) s += n.maint() ? "+MAINT" : "+RESERVED";
  if (n.drain()) s += "+DRAIN";
  if (n.reboot() == "requested") s += "+REBOOT_REQUESTED";
  if (n.reboot() == "issued") s += "+REBOOT_ISSUED";
  return s;
}

// "BEGIN,END,FAIL": the names of --mail-type's bits, as scontrol shows them.
std::string MailTypeNames(uint32_t bits) {
  std::vector<std::string> names;
  for (uint32_t bit = 1; bit <= v1::MAIL_INVALID_DEPEND; bit <<= 1) {
    if (bits & bit) names.push_back(v1::MailType_Name(static_cast<v1::MailType>(bit)).substr(5));
  }
  return Join(names, ",");
}

// `explain`: the Explain= line (muster explain's one-line summary); empty: the reason's sentence.
void PrintJob(const v1::JobInfo& j, int64_t now, bool oneliner, const std::string& explain = "") {
  std::string out;
  auto line = [&](const std::string& l) {  // users' text in it shown, never obeyed
    AppendPrintable(out, l);
    out += '\n';
  };
  const std::string state = JobStateName(j.state(), j.completing());
  int64_t run = 0;
  if (j.start_time_ms() > 0)
    run = (j.end_time_ms() > 0 ? j.end_time_ms() : now) - j.start_time_ms();
  line("JobId=" + std::to_string(j.id()) +
       (j.has_array() ? " ArrayJobId=" + std::to_string(j.array().array_job_id()) +
                            " ArrayTaskId=" + std::to_string(j.array().task_id())
                      : "") +
       " JobName=" + j.name());
  line("   UserId=" + j.user() + "(" + std::to_string(j.uid()) + ") MCS_label=N/A");
  line("   Priority=" + std::to_string(j.priority()) + " Nice=" + std::to_string(j.nice()) +
       " Account=" + OrNull(j.account()) + " QOS=" +
       (j.qos().empty() ? std::string("normal") : j.qos()) + (j.borrowed() ? " Borrowed=Yes" : ""));
  line("   JobState=" + state + " Reason=" + (j.reason().empty() ? "None" : j.reason()) +
       " Dependency=" + OrNull(j.dependency()));
  line("   Requeue=" + std::string(j.no_requeue() || j.interactive() ? "0" : "1") + " Restarts=" +
       std::to_string(j.requeue_count()) + " BatchFlag=" + (j.interactive() ? "0" : "1") +
       " Reboot=0 ExitCode=" + std::to_string(j.exit_code()) + ":" +
       std::to_string(j.exit_signal()));
  line("   RunTime=" + FormatHms(run) + " TimeLimit=" + TimeLimitText(j.time_limit_ms()) +
       " TimeMin=N/A");
  line("   SubmitTime=" + When(j.submit_time_ms()) +
       " EligibleTime=" + When(std::max(j.submit_time_ms(), j.begin_time_ms())));
  std::string start = When(j.start_time_ms());
  std::string end = When(j.end_time_ms());
  if (j.state() == v1::PENDING) {
    start = j.expected_start_ms() > 0 ? FormatTimestamp(j.expected_start_ms()) : "Unknown";
  } else if (j.state() == v1::RUNNING && j.time_limit_ms() > 0) {
    end = FormatTimestamp(j.start_time_ms() + j.time_limit_ms());
  }
  line("   StartTime=" + start + " EndTime=" + end + " Deadline=N/A");
  line("   Partition=" + j.partition());
  if (!j.reservation().empty()) line("   Reservation=" + j.reservation());
  line("   ReqNodeList=" + OrNull(j.required_nodes()) +
       " ExcNodeList=" + OrNull(j.excluded_nodes()));
  const std::string nodes = CompressHostlist({j.nodes().begin(), j.nodes().end()});
  line("   NodeList=" + OrNull(j.state() == v1::PENDING ? "" : nodes));
  if (!j.interactive() && j.nodes_size() > 0 && j.state() != v1::PENDING) {
    line("   BatchHost=" + j.nodes(0));
  }
  std::string num_nodes = std::to_string(j.num_nodes());
  if (j.min_nodes() > 0) num_nodes = std::to_string(j.min_nodes()) + "-" + num_nodes;
  line("   NumNodes=" + num_nodes + " NumCPUs=" + std::to_string(j.cpus_total()) +
       " NumTasks=" + std::to_string(j.num_tasks()) +
       " CPUs/Task=" + std::to_string(std::max<uint32_t>(1, j.cpus_per_task())));
  std::string tres = "cpu=" + std::to_string(j.cpus_total());
  if (j.mem_total_mb() > 0) tres += ",mem=" + std::to_string(j.mem_total_mb()) + "M";
  tres += ",node=" + std::to_string(j.num_nodes());
  if (j.gpus_total() > 0) tres += ",gres/gpu=" + std::to_string(j.gpus_total());
  line("   TRES=" + tres);
  // Slurm's line, ending with what is set aside on each node (CoreSpec=* for nothing).
  line("   Socks/Node=* NtasksPerN:B:S:C=0:0:*:* " +
       (j.thread_spec() > 0 ? "ThreadSpec=" + std::to_string(j.thread_spec())
        : j.core_spec() > 0 ? "CoreSpec=" + std::to_string(j.core_spec())
                            : std::string("CoreSpec=*")));
  line("   Features=" + OrNull(j.features()));
  line("   Contiguous=0 Licenses=" + OrNull(j.licenses()) + " Network=(null)");
  line("   WorkDir=" + j.work_dir());
  line("   StdErr=" + (j.interactive() ? std::string("(null)") : j.stderr_path()));
  line("   StdIn=/dev/null");
  line("   StdOut=" + (j.interactive() ? std::string("(null)") : j.stdout_path()));
  if (j.mail_types() != 0) {
    line("   MailUser=" + j.mail_user() + " MailType=" + MailTypeNames(j.mail_types()));
  }
  if (j.gpus_per_node() > 0) {
    line("   TresPerNode=gres:gpu:" + (j.gpu_type().empty() ? "" : j.gpu_type() + ":") +
         std::to_string(j.gpus_per_node()));
  }
  // Muster's own: why a pending job waits, in a sentence (muster explain tells more).
  if (!explain.empty()) {
    line("   Explain=" + explain);
  } else if (!j.reason_detail().empty()) {
    line("   Explain=" + j.reason_detail());
  }
  EmitRecord(out, oneliner);
}

void PrintNode(const v1::NodeInfo& n, bool oneliner) {
  std::string out;
  auto line = [&](const std::string& l) {  // users' text in it shown, never obeyed
    AppendPrintable(out, l);
    out += '\n';
  };
  line("NodeName=" + n.name() + " CoresPerSocket=" + std::to_string(CoresPerSocket(n)));
  line("   CPUAlloc=" + std::to_string(n.cpus_allocated()) +
       " CPUEfctv=" + std::to_string(n.cpus()) + " CPUTot=" + std::to_string(n.cpus()));
  const std::string features = OrNull(n.features());
  line("   AvailableFeatures=" + features);
  line("   ActiveFeatures=" + features);
  line("   Gres=" + OrNull(n.gpus() ? "gpu:" + (n.gpu_type().empty() ? "" : n.gpu_type() + ":") +
                                          std::to_string(n.gpus())
                                    : ""));
  line("   GresUsed=gpu:" + std::to_string(n.gpus_allocated()));
  std::string addr = n.agent_address().substr(0, n.agent_address().rfind(':'));
  line("   NodeAddr=" + OrNull(addr) + " NodeHostName=" + n.name());
  line("   RealMemory=" + std::to_string(n.memory_mb()) +
       " AllocMem=" + std::to_string(n.memory_allocated_mb()) +
       " Sockets=" + std::to_string(Sockets(n)) + " Boards=1");
  line("   State=" + NodeStateUpper(n) + " ThreadsPerCore=" + std::to_string(ThreadsPerCore(n)) +
       " TmpDisk=" + std::to_string(n.tmp_disk_mb()) +
       " Weight=" + std::to_string(n.has_features() ? n.weight() : 1));
  line("   Partitions=" + Join({n.partitions().begin(), n.partitions().end()}, ","));
  std::string cfg =
      "cpu=" + std::to_string(n.cpus()) + ",mem=" + std::to_string(n.memory_mb()) + "M";
  if (n.gpus()) cfg += ",gres/gpu=" + std::to_string(n.gpus());
  line("   CfgTRES=" + cfg);
  std::string alloc;
  if (n.cpus_allocated()) alloc = "cpu=" + std::to_string(n.cpus_allocated());
  if (n.memory_allocated_mb()) {
    alloc += (alloc.empty() ? "" : ",") + std::string("mem=") +
             std::to_string(n.memory_allocated_mb()) + "M";
  }
  if (n.gpus_allocated()) {
    alloc +=
        (alloc.empty() ? "" : ",") + std::string("gres/gpu=") + std::to_string(n.gpus_allocated());
  }
  line("   AllocTRES=" + alloc);
  if (!n.reason().empty()) {
    line("   Reason=" + n.reason() + " [" + (n.reason_user().empty() ? "muster" : n.reason_user()) +
         "@" + (n.reason_time_ms() ? FormatTimestamp(n.reason_time_ms()) : "Unknown") + "]");
  }
  EmitRecord(out, oneliner);
}

// scontrol ping's lines (and the end of show config): whether the controller answers. With a
// hot standby, the controllers are named together: the client reaches whichever leads.
std::string ControllerStatus(const Config& c) {
  std::string hosts;
  for (const ControllerHostConfig& h : c.controllers) hosts += (hosts.empty() ? "" : ",") + h.name;
  if (hosts.empty()) hosts = HostOf(c.controller.agent_address);
  auto controller = client::ControllerClient::ConnectTo(c);
  const bool up = controller.ok() && controller->Diagnostics().ok();
  return "Slurmctld(primary) at " + hosts + " is " + (up ? "UP" : "DOWN") + "\n";
}

int Show(const std::vector<std::string>& args, bool oneliner) {
  if (args.empty()) {
    return Usage("control", "show what? job, node, partition, reservation, licenses or hostnames");
  }
  // As scontrol: entity names in any case, "jobid" for "job".
  std::string what = ToLower(args[0]);
  if (what == "jobid") what = "job";
  const std::string arg = args.size() > 1 ? args[1] : "";
  if (what == "reservation" || what == "reservations" || what == "res") {
    return ShowReservations(arg, oneliner);
  }
  if (what == "config") {
    const std::string path = ResolveConfigPath("");
    auto config = LoadConfig(path);
    if (!config.ok()) return Fail("control", config.status());
    std::fputs(SlurmConfigLines(*config, path, SystemClock::Get()->NowMs()).c_str(), stdout);
    std::printf("\n%s", ControllerStatus(*config).c_str());
    return kExitOk;
  }
  if (what == "hostnames" || what == "hostname") {
    std::string list = arg;
    if (list.empty()) {
      const char* env = std::getenv("SLURM_JOB_NODELIST");
      if (!env || !*env) {
        return Fail("control",
                    InvalidArgument("no host list given and SLURM_JOB_NODELIST is unset"));
      }
      list = env;
    }
    auto names = ExpandHostlist(list);
    if (!names.ok()) return Fail("control", names.status());
    for (const auto& n : *names) std::printf("%s\n", n.c_str());
    return kExitOk;
  }
  if (what == "hostlist" || what == "hostlistsorted") {
    if (arg.empty()) return Usage("control", "show hostlist NAMES (comma-separated)");
    std::vector<std::string> names = Split(arg, ',', true);
    if (what == "hostlistsorted") std::sort(names.begin(), names.end());
    std::printf("%s\n", CompressHostlist(names).c_str());
    return kExitOk;
  }
  if (what == "partition" || what == "partitions") return ShowPartitions(arg, oneliner);
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("control", controller.status());
  if (what == "licenses" || what == "license" || what == "lic") {
    auto info = controller->ControllerInfo();
    if (!info.ok()) return Fail("control", info.status());
    bool any = false;
    for (const v1::LicenseUse& l : info->licenses()) {
      if (!arg.empty() && l.name() != arg) continue;
      any = true;
      const uint64_t free = l.used() < l.total() ? l.total() - l.used() : 0;
      EmitRecord("LicenseName=" + l.name() + "\n    Total=" + std::to_string(l.total()) +
                     " Used=" + std::to_string(l.used()) + " Free=" + std::to_string(free) +
                     " Reserved=0 Remote=no\n",
                 oneliner);
    }
    if (!any && !arg.empty()) return Fail("control", NotFound("license " + arg + " not found"));
    if (!any) std::printf("No licenses configured in Slurm.\n");
    return kExitOk;
  }
  if (what == "job" || what == "jobs") {
    const int64_t now = SystemClock::Get()->NowMs();
    if (!arg.empty()) {
      auto refs = ParseJobRefs(arg);
      if (!refs.ok() || refs->size() != 1) return Usage("control", "bad job id '" + arg + "'");
      // The job, or every task of a job array (7) or the ones named (7_3).
      v1::ListJobsRequest req;
      req.set_include_finished(true);
      req.add_job_ids(refs->front().id);
      auto resp = controller->ListJobs(req);
      if (!resp.ok()) return Fail("control", resp.status());
      std::vector<const v1::JobInfo*> jobs;
      for (const auto& j : resp->jobs()) {
        if (RefsMatch(*refs, j)) jobs.push_back(&j);
      }
      if (jobs.empty()) return Fail("control", NotFound("Invalid job id specified"));
      for (const v1::JobInfo* j : jobs) {
        std::string explain;
        if (jobs.size() == 1 && j->state() == v1::PENDING) {
          if (auto x = controller->ExplainJob(j->id()); x.ok())
            explain = x->explanation().summary();
        }
        PrintJob(*j, now, oneliner, explain);
      }
      return kExitOk;
    }
    v1::ListJobsRequest req;
    req.set_include_finished(true);
    auto resp = controller->ListJobs(req);
    if (!resp.ok()) return Fail("control", resp.status());
    if (resp->jobs().empty()) std::printf("No jobs in the system\n");
    for (const auto& j : resp->jobs()) PrintJob(j, now, oneliner);
    return kExitOk;
  }
  if (what == "node" || what == "nodes") {
    v1::ListNodesRequest req;
    if (!arg.empty()) {
      auto names = ExpandHostlist(arg);
      if (!names.ok()) return Fail("control", names.status());
      for (const auto& n : *names) req.add_names(n);
    }
    auto resp = controller->ListNodes(req);
    if (!resp.ok()) return Fail("control", resp.status());
    if (!arg.empty() && resp->nodes().empty()) {
      return Fail("control", NotFound("Node " + arg + " not found"));
    }
    for (const auto& n : resp->nodes()) PrintNode(n, oneliner);
    return kExitOk;
  }
  return Fail("control", Unimplemented("show " + what +
                                       " is not supported (job, node, partition, reservation, "
                                       "hostnames, hostlist)"));
}

// KEY=VALUE words, keys case-insensitive as scontrol takes them.
std::map<std::string, std::string> KeyValues(const std::vector<std::string>& args) {
  std::map<std::string, std::string> kv;
  for (const auto& a : args) {
    size_t eq = a.find('=');
    std::string k = a.substr(0, eq);
    for (char& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    kv[k] = eq == std::string::npos ? "" : a.substr(eq + 1);
  }
  return kv;
}

// Sends a job update; each job's error on stderr (exit 1 when any failed).
int SendJobUpdate(const v1::UpdateJobRequest& req) {
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("control", controller.status());
  auto resp = controller->UpdateJob(req);
  if (!resp.ok()) return Fail("control", resp.status());
  int rc = kExitOk;
  for (const auto& r : resp->results()) {
    if (r.code() == 0) continue;
    std::fprintf(stderr, "%s: error: %s\n", ProgramName("control").c_str(), r.message().c_str());
    rc = kExitFailed;
  }
  return rc;
}

// scontrol update JobId=ID[,ID] Key=Value...: a pending job's settings.
int UpdateJob(std::map<std::string, std::string> kv) {
  const std::string ids = kv.count("jobid") ? kv["jobid"] : kv["job"];
  kv.erase("jobid");
  kv.erase("job");
  v1::UpdateJobRequest req;
  req.set_action(v1::UpdateJobRequest::MODIFY);
  for (const auto& item : Split(ids, ',', true)) {
    auto id = ParseUint(item);
    if (!id) return Usage("control", "bad job id '" + item + "'");
    req.add_job_ids(*id);
  }
  if (req.job_ids_size() == 0) return Usage("control", "update needs JobId=ID");
  v1::JobModification& m = *req.mutable_modify();
  auto number = [](const std::string& v) -> std::optional<int64_t> {
    const bool neg = !v.empty() && v[0] == '-';
    auto n = ParseUint(neg ? v.substr(1) : v);
    if (!n || *n > 4'294'967'295ULL) return std::nullopt;
    return neg ? -static_cast<int64_t>(*n) : static_cast<int64_t>(*n);
  };
  for (const auto& [k, v] : kv) {
    if (k == "priority") {
      auto n = number(v);
      if (!n) return Usage("control", "Priority=" + v + ": expected a number");
      m.set_priority(*n);
    } else if (k == "nice") {
      auto n = v.empty() ? std::optional<int64_t>(100) : number(v);
      if (!n || *n < -2'147'483'645 || *n > 2'147'483'645) {
        return Usage("control", "Nice=" + v + ": expected -2147483645 to 2147483645");
      }
      m.set_nice(static_cast<int32_t>(*n));
    } else if (k == "timelimit") {
      auto t = ParseTimeLimit(v);
      if (!t.ok()) return Usage("control", "TimeLimit=" + v + ": " + t.status().message());
      m.set_time_limit_ms(*t);
    } else if (k == "partition") {
      for (const auto& p : Split(v, ',', true)) m.add_partitions(p);
      if (m.partitions_size() == 0) return Usage("control", "Partition= needs a name");
    } else if (k == "qos") {
      m.set_qos(v);
    } else if (k == "account") {
      m.set_account(v);
    } else if (k == "dependency") {
      m.set_dependency(v);
    } else if (k == "begintime" || k == "starttime") {
      auto t = ParseWhen(v, SystemClock::Get()->NowMs());
      if (!t.ok()) return Usage("control", "BeginTime=" + v + ": " + t.status().message());
      m.set_begin_time_ms(*t);
    } else {
      return Fail("control", Unimplemented("update JobId=... " + k +
                                           "=... is not supported (Priority, Nice, TimeLimit, "
                                           "Partition, QOS, Account, Dependency, BeginTime)"));
    }
  }
  return SendJobUpdate(req);
}

int SendNodeUpdate(const v1::UpdateNodeRequest& req) {
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("control", controller.status());
  auto resp = controller->UpdateNode(req);
  if (!resp.ok()) return Fail("control", resp.status());
  return kExitOk;
}

int Update(const std::vector<std::string>& args) {
  auto kv = KeyValues(args);
  if (kv.count("jobid") || kv.count("job")) return UpdateJob(kv);
  if (kv.count("partitionname")) return PartitionCommand("update", args);
  if (kv.count("reservationname") || kv.count("reservation")) {
    return ReservationCommand("update", args);
  }
  const std::string nodes = kv.count("nodename") ? kv["nodename"] : kv["node"];
  if (nodes.empty()) return Usage("control", "update needs NodeName=NODES State=...");
  std::string state = kv["state"];
  for (char& c : state) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const std::set<std::string> kSettings = {"features", "availablefeatures", "activefeatures",
                                                  "weight", "gres"};
  for (const auto& [k, v] : kv) {
    if (k != "nodename" && k != "node" && k != "state" && k != "reason" && !kSettings.count(k)) {
      return Fail("control", Unimplemented("update " + k + "=... is not supported (NodeName, " +
                                           "State=DRAIN|RESUME|UNDRAIN, Reason, Features, " +
                                           "Weight, Gres)"));
    }
  }
  v1::UpdateNodeRequest req;
  req.set_nodes(nodes);
  v1::UpdateNodeRequest settings = req;
  settings.set_action(v1::UpdateNodeRequest::SET);
  if (Status st = NodeSettingsFromKeys(kv, settings.mutable_settings()); !st.ok()) {
    return Fail("control", st);
  }
  const v1::NodeSettings& s = settings.settings();
  const bool set = s.has_features() || s.has_weight() || s.has_gres();
  if (set && state.empty()) return SendNodeUpdate(settings);
  if (state == "DRAIN") {
    if (kv["reason"].empty()) {
      return Fail("control", InvalidArgument("You must specify a reason when DOWNING or DRAINING "
                                             "a node. Request denied"));
    }
    req.set_action(v1::UpdateNodeRequest::DRAIN);
    req.set_reason(kv["reason"]);
  } else if (state == "RESUME" || state == "UNDRAIN" || state == "IDLE") {
    req.set_action(v1::UpdateNodeRequest::RESUME);
  } else if (state == "CANCEL_REBOOT") {
    req.set_action(v1::UpdateNodeRequest::CANCEL_REBOOT);
  } else {
    return Fail("control", Unimplemented("State=" + state +
                                         " is not supported (DRAIN, RESUME, UNDRAIN or "
                                         "CANCEL_REBOOT)"));
  }
  // Both checked: features, weight and GRES first (kept live by the controller), then the state.
  if (set) {
    if (int rc = SendNodeUpdate(settings); rc != kExitOk) return rc;
  }
  return SendNodeUpdate(req);
}

// scontrol reboot [ASAP] [nextstate=RESUME|DOWN] [reason=TEXT] ALL|NODES, and cancel_reboot.
int Reboot(const std::string& verb, const std::vector<std::string>& args) {
  v1::UpdateNodeRequest req;
  req.set_action(verb == "reboot" ? v1::UpdateNodeRequest::REBOOT
                                  : v1::UpdateNodeRequest::CANCEL_REBOOT);
  std::vector<std::string> nodes;
  for (const std::string& a : args) {
    const size_t eq = a.find('=');
    const std::string key = ToLower(a.substr(0, eq));
    if (eq == std::string::npos) {
      if (verb == "reboot" && key == "asap") {
        req.set_asap(true);
      } else {
        nodes.push_back(key == "all" && verb == "reboot" ? "ALL" : a);
      }
    } else if (verb == "reboot" && key == "nextstate") {
      const std::string next = ToLower(a.substr(eq + 1));
      if (next != "resume" && next != "down") {
        return Fail("control", InvalidArgument("nextstate takes RESUME or DOWN, not '" +
                                               a.substr(eq + 1) + "'"));
      }
      req.set_next_state(next);
    } else if (verb == "reboot" && key == "reason") {
      req.set_reason(a.substr(eq + 1));
    } else {
      return Usage("control", "unknown " + verb + " argument '" + a + "'");
    }
  }
  if (nodes.size() != 1) {
    return Usage("control", verb == "reboot"
                                ? "reboot [ASAP] [nextstate=RESUME|DOWN] [reason=TEXT] ALL|NODES"
                                : "cancel_reboot NODES");
  }
  req.set_nodes(nodes[0]);
  return SendNodeUpdate(req);
}

int JobAction(const std::string& verb, const std::vector<std::string>& args) {
  std::vector<uint64_t> ids;
  for (const auto& a : args) {
    for (const auto& item : Split(a, ',', true)) {
      auto id = ParseUint(item);
      if (!id) return Usage("control", "bad job id '" + item + "'");
      ids.push_back(*id);
    }
  }
  if (ids.empty()) return Usage("control", verb + " needs a job id");
  v1::UpdateJobRequest req;
  for (uint64_t id : ids) req.add_job_ids(id);
  req.set_action(verb == "hold"      ? v1::UpdateJobRequest::HOLD
                 : verb == "release" ? v1::UpdateJobRequest::RELEASE
                 : verb == "top"     ? v1::UpdateJobRequest::TOP
                 : verb == "suspend" ? v1::UpdateJobRequest::SUSPEND
                 : verb == "resume"  ? v1::UpdateJobRequest::RESUME
                                     : v1::UpdateJobRequest::REQUEUE);
  return SendJobUpdate(req);
}

// scontrol write batch_script JOBID [FILE]: the job's script, to slurm-JOBID.sh (or FILE; "-":
// stdout), as Slurm. A file that is there already is not written over, nor reached through a
// symbolic link.
int WriteBatchScript(const std::vector<std::string>& args) {
  if (args.empty() || args.size() > 2) {
    return Usage("control", "write batch_script JOBID [FILE]");
  }
  auto refs = ParseJobRefs(args[0]);
  if (!refs.ok() || refs->size() != 1) return Usage("control", "bad job id '" + args[0] + "'");
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("control", controller.status());
  v1::GetJobRequest req;
  req.set_job_id(refs->front().id);
  req.set_with_script(true);
  auto got = controller->GetJob(req);
  if (!got.ok()) return Fail("control", got.status());
  const std::string& script = got->script();
  const std::string file = args.size() > 1 ? args[1] : "slurm-" + args[0] + ".sh";
  if (file == "-") {
    std::fwrite(script.data(), 1, script.size(), stdout);
    return kExitOk;
  }
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Fail("control", ErrnoStatus("cannot create " + file, errno));
  const bool written =
      ::write(fd, script.data(), script.size()) == static_cast<ssize_t>(script.size());
  ::close(fd);
  if (!written) return Fail("control", ErrnoStatus("cannot write " + file, errno));
  std::printf("batch script for job %s written to %s\n", args[0].c_str(), file.c_str());
  return kExitOk;
}

// One scontrol command: `verb` and the words after it.
int Run(const std::string& verb, std::vector<std::string> rest, bool oneliner) {
  if (verb == "write") {
    if (rest.empty() || ToLower(rest[0]) != "batch_script") {
      return Fail("control", Unimplemented("write " + (rest.empty() ? "" : rest[0]) +
                                           " is not supported (write batch_script)"));
    }
    return WriteBatchScript({rest.begin() + 1, rest.end()});
  }
  if (verb == "show") return Show(rest, oneliner);
  if (verb == "version") {
    // Slurm's line first, for tools that parse it; then Muster's own.
    std::printf("slurm %s\nmuster %s\n", kSlurmCompatVersion, kVersion);
    return kExitOk;
  }
  if (verb == "ping") {
    const std::string path = ResolveConfigPath("");
    auto config = LoadConfig(path);
    if (!config.ok()) return Fail("control", config.status());
    const std::string status = ControllerStatus(*config);
    std::fputs(status.c_str(), stdout);
    return status.find(" is UP") != std::string::npos ? kExitOk : kExitFailed;
  }
  if (verb == "update") return Update(rest);
  if (verb == "reboot" || verb == "reboot_nodes" || verb == "cancel_reboot") {
    return Reboot(verb == "reboot_nodes" ? "reboot" : verb, rest);
  }
  if (verb == "reconfigure") {
    if (!rest.empty()) {
      return Fail("control",
                  InvalidArgument("reconfigure takes no arguments, got '" + rest[0] + "'"));
    }
    return Reconfigure(/*quiet=*/true);
  }
  if (verb == "create" || verb == "delete") {
    // scontrol create partition KEY=VALUE...; scontrol delete PartitionName=NAME.
    if (!rest.empty() && (ToLower(rest[0]) == "partition" || ToLower(rest[0]) == "part")) {
      rest.erase(rest.begin());
      return PartitionCommand(verb, rest);
    }
    if (!rest.empty() && StartsWith(ToLower(rest[0]), "partitionname=")) {
      return PartitionCommand(verb, rest);
    }
    // scontrol create reservation KEY=VALUE...; scontrol delete ReservationName=NAME.
    if (!rest.empty() && (ToLower(rest[0]) == "reservation" || ToLower(rest[0]) == "res")) {
      rest.erase(rest.begin());
    } else if (verb == "create") {
      return Fail("control", Unimplemented("create " + (rest.empty() ? "" : rest[0]) +
                                           " is not supported (create reservation, create "
                                           "partition)"));
    }
    return ReservationCommand(verb, rest);
  }
  if (verb == "hold" || verb == "release" || verb == "requeue" || verb == "top" ||
      verb == "suspend" || verb == "resume") {
    return JobAction(verb, rest);
  }
  return Fail("control", Unimplemented("'" + verb +
                                       "' is not supported (show, update, create, delete, hold, "
                                       "release, requeue, suspend, resume, top, write, "
                                       "reboot, cancel_reboot, reconfigure, ping, version)"));
}

}  // namespace

int CmdControl(int argc, char** argv) {
  // scontrol's options, before, between or after the command's words.
  enum { kHide = 1000, kFederation, kLocal, kSibling };
  const struct option opts[] = {{"all", no_argument, nullptr, 'a'},
                                {"details", no_argument, nullptr, 'd'},
                                {"future", no_argument, nullptr, 'F'},
                                {"help", no_argument, nullptr, 'h'},
                                {"hide", no_argument, nullptr, kHide},
                                {"federation", no_argument, nullptr, kFederation},
                                {"local", no_argument, nullptr, kLocal},
                                {"sibling", no_argument, nullptr, kSibling},
                                {"clusters", required_argument, nullptr, 'M'},
                                {"cluster", required_argument, nullptr, 'M'},
                                {"oneliner", no_argument, nullptr, 'o'},
                                {"quiet", no_argument, nullptr, 'Q'},
                                {"uid", required_argument, nullptr, 'u'},
                                {"verbose", no_argument, nullptr, 'v'},
                                {"version", no_argument, nullptr, 'V'},
                                {nullptr, 0, nullptr, 0}};
  bool oneliner = false;  // -o: one line per record
  bool quiet = false;     // -Q: the command's errors are not printed
  bool help = false;
  std::string clusters;
  std::vector<std::string> args;
  OptionReader in(argc, argv, "adFhM:oQu:vV", opts);
  for (int c; (c = in.Next()) != -1;) {
    switch (c) {
      case 'o':
        oneliner = true;
        break;
      case 'V':
        args = {"version"};
        break;
      case 'h':  // help in the command's place; after it, a word the command refuses
        if (args.empty()) {
          help = true;
        } else if (in.Once()) {
          args.push_back(in.Word());
        }
        break;
      case 'Q':
        quiet = true;
        break;
      case 'M':
        clusters = optarg;
        break;
      case 'u':
        return Usage("control",
                     "-u/--uid: acting as another user is not supported (Muster acts as the "
                     "caller it authenticates; an admin may update any job)");
      case 'a':          // every partition and job is always shown: none is hidden
      case 'd':          // show job has no further details to add
      case 'F':          // Muster has no nodes in FUTURE state
      case kHide:        // none is hidden, so none is left out
      case kFederation:  // one cluster, no federation...
      case kLocal:       // ...so it is always the local one
      case kSibling:     // ...and no sibling jobs
      case 'v':          // nothing is logged on the way
        break;
      case OptionReader::kWord:
        args.push_back(in.Word());
        break;
      case ':':
        return Usage("control", "option " + in.Word() + " needs a value");
      default:
        // Before the command, a dash word that is no option is a mistake; after it, a word the
        // command reads (or refuses), as "--" and the words after it are.
        if (args.empty()) return Usage("control", "unknown option " + in.Word());
        if (in.Once()) args.push_back(in.Word());
    }
    if (c == 'V') break;
  }
  if (help) args = {"help"};
  if (args.empty() || args[0] == "help") {
    std::printf(
        "Usage: %s COMMAND\n"
        "  show job|jobid [ID] | show node [NODES] | show partition [NAME]\n"
        "  show reservation [NAME] [-o]\n"
        "  show config                Muster's settings under Slurm's names (Key = value)\n"
        "  ping | version             whether the controller answers; Slurm's and Muster's "
        "versions\n"
        "  create reservation KEY=VALUE... | update ReservationName=NAME KEY=VALUE...\n"
        "  delete ReservationName=NAME   advance reservations (admins; see muster reservation)\n"
        "  show hostnames [LIST]      one name per line (LIST defaults to $SLURM_JOB_NODELIST)\n"
        "  show hostlist NAMES        the compressed form of a comma-separated list\n"
        "  create partition PartitionName=P Nodes=N [MaxTime=T] [DefaultTime=T] [Default=YES]\n"
        "         [PriorityTier=N] [PreemptMode=M] [GraceTime=S] | update PartitionName=P ...\n"
        "  delete PartitionName=P     partitions changed live (admins; see muster partition)\n"
        "  update NodeName=NODES State=DRAIN Reason=TEXT | State=RESUME (admins)\n"
        "  reboot [ASAP] [nextstate=RESUME|DOWN] [reason=TEXT] ALL|NODES   once their jobs end\n"
        "  cancel_reboot NODES        a reboot not yet issued (admins)\n"
        "  update JobId=ID[,ID] [Priority=N] [Nice=N] [TimeLimit=T] [Partition=P] [QOS=Q]\n"
        "         [Account=A] [Dependency=D] [BeginTime=T]   (a pending job)\n"
        "  hold ID... | release ID... | requeue ID...\n"
        "  suspend ID... | resume ID...   stop a running job in place, continue it (operators)\n"
        "  top ID[,ID]                first among your pending jobs of its partition, account\n"
        "                             and QoS (admins; users with enable_user_top)\n",
        ProgramName("control").c_str());
    return args.empty() ? kExitUsage : kExitOk;
  }
  const std::string verb = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  // What needs the configuration (all but version and the host list tools) reads it here when
  // -M names a cluster (checked against it) or -Q silences what follows: an unreadable
  // configuration keeps scontrol from working at all, and says so even then.
  const std::string what = rest.empty() ? "" : ToLower(rest[0]);
  const bool needs_config = verb != "version" &&
                            !(verb == "show" && StartsWith(what, "hostlist")) &&
                            !(verb == "show" && (what == "hostnames" || what == "hostname"));
  if (!clusters.empty() || (quiet && needs_config)) {
    auto config = LoadConfig(ResolveConfigPath(""));
    if (!config.ok()) return Fail("control", config.status());
    if (Status st = CheckClusters(clusters, config->cluster_name); !st.ok()) {
      return Fail("control", st);
    }
  }
  if (!quiet) return Run(verb, rest, oneliner);
  // -Q: as scontrol's, the command's errors go unprinted; its exit status still tells.
  std::fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (saved >= 0 && null >= 0) dup2(null, STDERR_FILENO);
  if (null >= 0) close(null);
  const int rc = Run(verb, rest, oneliner);
  std::fflush(stderr);
  if (saved >= 0) {
    dup2(saved, STDERR_FILENO);
    close(saved);
  }
  return rc;
}

}  // namespace muster::cli
