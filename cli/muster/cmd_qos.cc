// muster qos list|add|modify|remove: QoS with sacctmgr's KEY=VALUE words (sacctmgr_limits.h).
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "cli.h"
#include "muster/common/strings.h"
#include "options.h"
#include "sacctmgr_limits.h"

namespace muster::cli {

int CmdQos(int argc, char** argv) {
  constexpr const char* kUsage =
      "Usage: muster qos list [NAME...] [--parsable]\n"
      "       muster qos add|modify NAME [priority=N] [preempt=Q,Q] "
      "[preemptmode=requeue|cancel|suspend]\n"
      "                  [usagefactor=F] [gracetime=SECS] [flags=DenyOnLimit] [LIMITS]\n"
      "       muster qos remove NAME\n"
      "LIMITS as sacctmgr's: GrpTRES=gres/gpu[:TYPE]=N,node=N GrpJobs=N GrpSubmitJobs=N\n"
      "  MaxJobsPerUser=N MaxSubmitJobsPerUser=N MaxTRES=gres/gpu=N,node=N\n"
      "  MaxTRESPerUser=gres/gpu[:TYPE]=N MaxWall=TIME, and Muster's GrpStoredMB=N\n"
      "  MaxStoredMBPerUser=N (stored scripts and environments). -1 clears one. Changes need an\n"
      "  admin.\n";
  if (argc < 2) return Usage("qos", "expected list, add, modify or remove");
  const std::string op = argv[1];
  if (op == "-h" || op == "--help") {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  std::vector<std::string> names;
  std::map<std::string, std::string> values;
  auto word = [&](const std::string& a) {
    const size_t eq = a.find('=');
    if (eq == std::string::npos) {
      names.push_back(a);
    } else {
      values[ToLower(a.substr(0, eq))] = a.substr(eq + 1);
    }
  };
  bool parsable = false;
  const struct option opts[] = {{"parsable", no_argument, nullptr, 'P'}, {nullptr, 0, nullptr, 0}};
  OptionReader in(argc - 1, argv + 1, "P", opts);  // from the operation on
  // NAME and KEY=VALUE words come in order. A dash word that is not -P stays a word, as it always
  // was: a name or key the checks below (or the controller) refuse; so do "--" and the words
  // after it.
  for (int c; (c = in.Next()) != -1;) {
    if (c == 'P') {
      parsable = true;
    } else if (in.Once()) {
      word(in.Word());
    }
  }
  if (op == "list" || op == "show") {
    if (!values.empty()) return Usage("qos", "list takes QoS names only");
    return ShowQos(names, "", true, parsable ? "|" : "", false);
  }
  v1::AccountOp aop = op == "add"      ? v1::ACCOUNT_OP_ADD
                      : op == "modify" ? v1::ACCOUNT_OP_MODIFY
                      : op == "remove" ? v1::ACCOUNT_OP_REMOVE
                                       : v1::ACCOUNT_OP_UNSPECIFIED;
  if (aop == v1::ACCOUNT_OP_UNSPECIFIED) {
    return Usage("qos", "unknown operation '" + op + "' (list, add, modify, remove)");
  }
  if (names.size() != 1) return Usage("qos", "expected one QoS name");
  if (Status st = UpdateQos(aop, names[0], values); !st.ok()) return Fail("qos", st);
  return kExitOk;
}

}  // namespace muster::cli
