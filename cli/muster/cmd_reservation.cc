// Advance reservations: `muster reservation create|update|delete|list|show` and scontrol's
// `create|update|delete reservation` and `show reservation` (ReservationCommand, ShowReservations;
// cmd_control.cc routes scontrol's words here). Keys as scontrol takes them, case-insensitive:
// ReservationName, StartTime, EndTime, Duration, Nodes, NodeCnt, TRES=gres/gpu[:TYPE]=N (or
// GPUs=[TYPE:]N), PartitionName, Users, Accounts, Flags.
#include <cstdio>
#include <map>

#include "cli.h"
#include "muster/common/clock.h"
#include "muster/common/duration.h"
#include "muster/common/hostlist.h"
#include "muster/common/strings.h"
#include "options.h"
#include "output.h"

namespace muster::cli {
namespace {

std::string OrNull(const std::string& v) { return v.empty() ? "(null)" : v; }

// Slurm's reservation duration: [D-]HH:MM:SS.
std::string ResvDuration(int64_t ms) {
  int64_t s = ms / 1000;
  const int64_t days = s / 86'400;
  s %= 86'400;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  return days ? std::to_string(days) + "-" + buf : std::string(buf);
}

std::string FlagText(const v1::ReservationRecord& r) {
  std::vector<std::string> f;
  if (r.maint()) f.push_back("MAINT");
  if (r.ignore_jobs()) f.push_back("IGNORE_JOBS");
  if (r.overlap()) f.push_back("OVERLAP");
  if (r.daily()) f.push_back("DAILY");
  if (r.weekly()) f.push_back("WEEKLY");
  if (r.flex()) f.push_back("FLEX");
  if (r.node_count() == 0 && r.gpu_count() == 0) f.push_back("SPEC_NODES");
  return Join(f, ",");
}

bool Active(const v1::ReservationRecord& r, int64_t now) {
  return r.start_ms() <= now && now < r.end_ms();
}

uint32_t GpuTotal(const v1::ReservationRecord& r) {
  uint32_t g = 0;
  for (uint32_t n : r.gpus()) g += n;
  return g;
}

// scontrol show reservation's Key=Value block (one line with -o).
void PrintReservation(const v1::ReservationRecord& r, int64_t now,
                      const std::map<std::string, uint32_t>& cpus, bool oneliner) {
  uint32_t cores = 0;
  for (const std::string& n : r.nodes()) {
    auto it = cpus.find(n);
    if (it != cpus.end()) cores += it->second;
  }
  std::string tres = "cpu=" + std::to_string(r.gpus_size() ? 0 : cores);
  if (r.gpus_size())
    tres = "gres/gpu" + (r.gpu_type().empty() ? "" : ":" + r.gpu_type()) + "=" +
           std::to_string(GpuTotal(r));
  const std::string sep = oneliner ? " " : "\n   ";
  std::string out =
      "ReservationName=" + r.name() + " StartTime=" + FormatTimestamp(r.start_ms()) +
      " EndTime=" + FormatTimestamp(r.end_ms()) +
      " Duration=" + ResvDuration(r.end_ms() - r.start_ms()) + sep +
      "Nodes=" + OrNull(CompressHostlist({r.nodes().begin(), r.nodes().end()})) +
      " NodeCnt=" + std::to_string(r.nodes_size()) +
      " CoreCnt=" + std::to_string(r.gpus_size() ? 0 : cores) +
      " Features=(null) PartitionName=" + OrNull(r.partition()) + " Flags=" + FlagText(r) + sep +
      "TRES=" + tres + sep + "Users=" + OrNull(Join({r.users().begin(), r.users().end()}, ",")) +
      " Groups=(null) Accounts=" + OrNull(Join({r.accounts().begin(), r.accounts().end()}, ",")) +
      " Licenses=(null) State=" + (Active(r, now) ? "ACTIVE" : "INACTIVE") +
      " BurstBuffer=(null) Watts=n/a" + sep + "MaxStartDelay=(null)\n";
  if (!oneliner) out += "\n";
  std::fputs(out.c_str(), stdout);
}

Result<v1::ListReservationsResponse> Fetch(client::ControllerClient& c, const std::string& name) {
  v1::ListReservationsRequest req;
  req.set_name(name);
  v1::ListReservationsResponse resp;
  MUSTER_RETURN_IF_ERROR(c.Call(v1::METHOD_LIST_RESERVATIONS, req, &resp));
  return resp;
}

// KEY=VALUE words into a request; keys case-insensitive.
Status FillRequest(const std::vector<std::string>& words, v1::UpdateReservationRequest* req) {
  const int64_t now = SystemClock::Get()->NowMs();
  for (const std::string& w : words) {
    const size_t eq = w.find('=');
    if (eq == std::string::npos) {
      return InvalidArgument("expected KEY=VALUE, got '" + w.substr(0, 64) + "'");
    }
    const std::string k = ToLower(w.substr(0, eq));
    std::string v = w.substr(eq + 1);
    if (k == "reservationname" || k == "reservation" || k == "name") {
      req->set_name(v);
    } else if (k == "starttime" || k == "start") {
      MUSTER_ASSIGN_OR_RETURN(int64_t t, ParseWhen(v, now));
      req->set_start_ms(t);
    } else if (k == "endtime" || k == "end") {
      MUSTER_ASSIGN_OR_RETURN(int64_t t, ParseWhen(v, now));
      req->set_end_ms(t);
    } else if (k == "duration") {
      MUSTER_ASSIGN_OR_RETURN(int64_t d, ParseTimeLimit(v));
      if (d <= 0) return InvalidArgument("Duration must be a positive time");
      req->set_duration_ms(d);
    } else if (k == "nodes" || k == "nodelist") {
      req->set_nodes(v);
    } else if (k == "nodecnt" || k == "nodecount") {
      auto n = ParseUint(v);
      if (!n || *n == 0 || *n > 1'000'000) return InvalidArgument("NodeCnt must be a count");
      req->set_node_count(static_cast<uint32_t>(*n));
    } else if (k == "tres" || k == "gpus") {
      // TRES=gres/gpu[:TYPE]=N, or GPUs=[TYPE:]N.
      std::string spec = v;
      if (k == "tres") {
        if (!StartsWith(ToLower(spec), "gres/gpu")) {
          return Unimplemented("TRES=" + v +
                               " is not supported (gres/gpu[:TYPE]=N; use Nodes= "
                               "or NodeCnt= for nodes)");
        }
        spec = spec.substr(8);
        const size_t at = spec.find('=');
        if (at == std::string::npos) return InvalidArgument("TRES=gres/gpu[:TYPE]=N");
        std::string type = spec.substr(0, at);
        if (!type.empty() && type[0] == ':') type = type.substr(1);
        spec = (type.empty() ? "" : type + ":") + spec.substr(at + 1);
      }
      const size_t colon = spec.rfind(':');
      auto n = ParseUint(colon == std::string::npos ? spec : spec.substr(colon + 1));
      if (!n || *n == 0 || *n > 1'000'000) return InvalidArgument("a GPU count: " + v);
      req->set_gpus(static_cast<uint32_t>(*n));
      if (colon != std::string::npos) req->set_gpu_type(spec.substr(0, colon));
    } else if (k == "partitionname" || k == "partition") {
      req->set_partition(v);
    } else if (k == "users" || k == "user") {
      req->set_users(v);
    } else if (k == "accounts" || k == "account") {
      req->set_accounts(v);
    } else if (k == "flags" || k == "flag") {
      req->set_flags(v);
    } else {
      return Unimplemented("reservation key '" + w.substr(0, eq) +
                           "' is not supported (ReservationName, StartTime, EndTime, Duration, "
                           "Nodes, NodeCnt, TRES=gres/gpu[:TYPE]=N, PartitionName, Users, "
                           "Accounts, Flags)");
    }
  }
  return Status::Ok();
}

int ListTable(const v1::ListReservationsResponse& resp, bool json) {
  const int64_t now = resp.now_ms();
  if (json) {
    JsonWriter w;
    w.BeginObject().Key("reservations").BeginArray();
    for (const auto& r : resp.reservations()) {
      w.BeginObject()
          .Field("name", r.name())
          .Field("state", std::string(Active(r, now) ? "active" : "inactive"));
      w.Key("start").String(FormatTimestamp(r.start_ms()));
      w.Key("end").String(FormatTimestamp(r.end_ms()));
      w.Key("nodes").BeginArray();
      for (const auto& n : r.nodes()) w.String(n);
      w.EndArray();
      w.Key("gpus").Uint(GpuTotal(r));
      w.Field("gpu_type", r.gpu_type()).Field("partition", r.partition());
      w.Key("users").BeginArray();
      for (const auto& u : r.users()) w.String(u);
      w.EndArray().Key("accounts").BeginArray();
      for (const auto& a : r.accounts()) w.String(a);
      w.EndArray().Field("flags", FlagText(r)).EndObject();
    }
    w.EndArray().EndObject();
    std::printf("%s\n", w.str().c_str());
    return kExitOk;
  }
  std::printf("%-16s %-8s %-19s %-19s %-16s %-6s %-24s %s\n", "NAME", "STATE", "START", "END",
              "NODES", "GPUS", "FLAGS", "USERS/ACCOUNTS");
  for (const auto& r : resp.reservations()) {
    std::string who = Join({r.users().begin(), r.users().end()}, ",");
    if (r.accounts_size()) {
      who += (who.empty() ? "" : " ") + std::string("accounts=") +
             Join({r.accounts().begin(), r.accounts().end()}, ",");
    }
    std::printf("%-16s %-8s %-19s %-19s %-16s %-6s %-24s %s\n", r.name().c_str(),
                Active(r, now) ? "ACTIVE" : "INACTIVE", FormatTimestamp(r.start_ms()).c_str(),
                FormatTimestamp(r.end_ms()).c_str(),
                CompressHostlist({r.nodes().begin(), r.nodes().end()}).c_str(),
                r.gpus_size() ? std::to_string(GpuTotal(r)).c_str() : "-", FlagText(r).c_str(),
                who.c_str());
  }
  return kExitOk;
}

}  // namespace

int ShowReservations(const std::string& name, bool oneliner) {
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("control", controller.status());
  auto resp = Fetch(*controller, name);
  if (!resp.ok()) {
    if (resp.status().code() == StatusCode::kNotFound) {
      std::fprintf(stderr, "Reservation %s not found\n", name.c_str());
      return kExitFailed;
    }
    return Fail("control", resp.status());
  }
  if (resp->reservations().empty()) {
    std::printf("No reservations in the system\n");
    return kExitOk;
  }
  std::map<std::string, uint32_t> cpus;
  if (auto nodes = controller->ListNodes(v1::ListNodesRequest()); nodes.ok()) {
    for (const auto& n : nodes->nodes()) cpus[n.name()] = n.cpus();
  }
  for (const auto& r : resp->reservations()) PrintReservation(r, resp->now_ms(), cpus, oneliner);
  return kExitOk;
}

// verb: create, update or delete; words: KEY=VALUE (delete: ReservationName=NAME or NAME).
int ReservationCommand(const std::string& verb, const std::vector<std::string>& words) {
  v1::UpdateReservationRequest req;
  req.set_op(verb == "create"   ? v1::ACCOUNT_OP_ADD
             : verb == "update" ? v1::ACCOUNT_OP_MODIFY
                                : v1::ACCOUNT_OP_REMOVE);
  std::vector<std::string> kv = words;
  if (verb == "delete" && kv.size() == 1 && kv[0].find('=') == std::string::npos) {
    kv[0] = "ReservationName=" + kv[0];
  }
  const char* doing = verb == "create" ? "creating" : verb == "update" ? "updating" : "deleting";
  auto error = [&](const Status& st) {
    std::fprintf(stderr, "Error %s the reservation: %s\n", doing, st.message().c_str());
    return st.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailed;
  };
  if (Status st = FillRequest(kv, &req); !st.ok()) return error(st);
  if (verb != "create" && req.name().empty()) {
    return error(InvalidArgument("ReservationName= is required"));
  }
  if (verb == "delete" && kv.size() != 1) {
    return error(InvalidArgument("delete takes ReservationName=NAME only"));
  }
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("control", controller.status());
  v1::UpdateReservationResponse resp;
  if (Status st = controller->Call(v1::METHOD_UPDATE_RESERVATION, req, &resp); !st.ok()) {
    return error(st);
  }
  if (verb == "create") std::printf("Reservation created: %s\n", resp.name().c_str());
  if (verb == "update") std::printf("Reservation updated.\n");
  return kExitOk;
}

int CmdReservation(int argc, char** argv) {
  constexpr const char* kUsage =
      "Usage: muster reservation list [NAME] [--json]\n"
      "       muster reservation show [NAME] [-o]        (scontrol's layout)\n"
      "       muster reservation create [ReservationName=NAME] StartTime=WHEN\n"
      "              Duration=TIME|EndTime=WHEN Nodes=LIST|NodeCnt=N|GPUs=[TYPE:]N\n"
      "              [PartitionName=P] Users=U,U|Accounts=A,A [Flags=maint,ignore_jobs,daily,\n"
      "              weekly,flex,overlap]\n"
      "       muster reservation update ReservationName=NAME KEY=VALUE...  (Users=+u, "
      "Flags=-maint)\n"
      "       muster reservation delete NAME\n"
      "Creating, changing and deleting need an admin.\n";
  if (argc < 2) return Usage("reservation", "expected list, show, create, update or delete");
  const std::string op = argv[1];
  std::vector<std::string> rest(argv + 2, argv + argc);
  if (op == "-h" || op == "--help") {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (op == "create" || op == "update" || op == "delete") return ReservationCommand(op, rest);
  if (op != "show" && op != "list") {
    return Usage("reservation",
                 "unknown operation '" + op + "' (list, show, create, update, delete)");
  }
  // show's -o/--oneliner and list's --json, anywhere after the operation.
  const bool show = op == "show";
  const struct option show_opts[] = {{"oneliner", no_argument, nullptr, 'o'},
                                     {nullptr, 0, nullptr, 0}};
  const struct option list_opts[] = {{"json", no_argument, nullptr, 'j'}, {nullptr, 0, nullptr, 0}};
  bool oneliner = false, json = false;
  std::vector<std::string> words;
  OptionReader in(argc - 1, argv + 1, show ? "o" : "", show ? show_opts : list_opts);
  // The words come in order. A dash word that is no option here stays a word, as it always was:
  // the name, when it comes first; so do "--" and the words after it.
  for (int c; (c = in.Next()) != -1;) {
    if (c == 'o') {
      oneliner = true;
    } else if (c == 'j') {
      json = true;
    } else if (in.Once()) {
      words.push_back(in.Word());
    }
  }
  const std::string name = words.empty() ? "" : words[0];
  if (show) return ShowReservations(name, oneliner);
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("reservation", controller.status());
  auto resp = Fetch(*controller, name);
  if (!resp.ok()) return Fail("reservation", resp.status());
  return ListTable(*resp, json);
}

}  // namespace muster::cli
