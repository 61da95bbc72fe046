// muster account / muster user: the account tree and users' associations (admins change them;
// anyone may list them).
#include <getopt.h>

#include <cstdio>
#include <map>

#include "cli.h"
#include "muster/common/strings.h"
#include "output.h"

namespace muster::cli {
namespace {

void PrintAccountHelp() {
  std::printf(
      "Usage: muster account add NAME [--parent P] [--shares N] [--description TEXT]\n"
      "                              [--quota TYPE=G[:MAX[:LEND]]]... [--cohort C]\n"
      "       muster account modify NAME [same options]\n"
      "       muster account remove NAME\n"
      "       muster account list [--json]\n"
      "The account tree (under root) that jobs charge with -A; its users come from\n"
      "`muster user add`. Accounts in the config file ([[accounts]]) are changed there.\n"
      "  --parent P         the account above (default root)\n"
      "  --shares N         fair-share weight among its siblings (default 1)\n"
      "  --description TEXT\n"
      "  --quota TYPE=G[:MAX[:LEND]]  GPU quota: G guaranteed TYPE GPUs, borrowing up to MAX\n"
      "                     in all (default: as far as the cohort lends), lending at most\n"
      "                     LEND of its idle ones (default G); TYPE=none removes it\n"
      "  --cohort C         the cohort it lends to and borrows from (\"\" leaves it)\n"
      "`muster quota` shows the quotas with what they use, borrow and lend.\n"
      "Adding, changing and removing need an admin. An account with sub-accounts, users or\n"
      "unfinished jobs is not removed.\n");
}

void PrintUserHelp() {
  std::printf(
      "Usage: muster user add NAME --account A [--default]\n"
      "       muster user modify NAME --default-account A\n"
      "       muster user remove NAME --account A\n"
      "       muster user list [--json]\n"
      "Which accounts a user's jobs may charge (-A), and the one they charge by default (the\n"
      "first the user was added to, unless --default says otherwise). Admins only, but list.\n");
}

// The accounts and users as the controller has them.
Result<v1::ListAccountsResponse> ListAll() {
  auto controller = ConnectController();
  if (!controller.ok()) return controller.status();
  v1::ListAccountsResponse resp;
  MUSTER_RETURN_IF_ERROR(
      controller->Call(v1::METHOD_LIST_ACCOUNTS, v1::ListAccountsRequest(), &resp));
  return resp;
}

int PrintAccounts(bool json) {
  auto all = ListAll();
  if (!all.ok()) return Fail("account", all.status());
  std::map<std::string, std::vector<std::string>> users_of;
  for (const v1::UserRecord& u : all->users()) {
    for (const std::string& a : u.accounts()) users_of[a].push_back(u.name());
  }
  std::map<std::string, int> depth = {{"root", 0}};
  if (json) {
    JsonWriter w;
    w.BeginObject().Key("accounts").BeginArray();
    for (const v1::AccountRecord& a : all->accounts()) {
      w.BeginObject()
          .Field("name", a.name())
          .Field("parent", a.parent())
          .Field("shares", a.shares())
          .Field("description", a.description())
          .Field("from_config", a.from_config())
          .Key("users")
          .BeginArray();
      for (const auto& u : users_of[a.name()]) w.String(u);
      w.EndArray().EndObject();
    }
    w.EndArray().EndObject();
    std::printf("%s\n", w.str().c_str());
    return kExitOk;
  }
  std::printf("%-24s %-16s %7s  %-6s %-24s %s\n", "ACCOUNT", "PARENT", "SHARES", "SOURCE", "USERS",
              "DESCRIPTION");
  for (const v1::AccountRecord& a : all->accounts()) {
    const int d = a.name() == "root" ? 0 : depth[a.parent()] + 1;
    depth[a.name()] = d;
    std::printf("%-24s %-16s %7u  %-6s %-24s %s\n",
                (std::string(2 * static_cast<size_t>(d), ' ') + a.name()).c_str(),
                a.parent().c_str(), a.shares(),
                a.name() == "root" ? "" : (a.from_config() ? "config" : "live"),
                Join(users_of[a.name()], ",").c_str(), a.description().c_str());
  }
  return kExitOk;
}

int PrintUsers(bool json) {
  auto all = ListAll();
  if (!all.ok()) return Fail("user", all.status());
  if (json) {
    JsonWriter w;
    w.BeginObject().Key("users").BeginArray();
    for (const v1::UserRecord& u : all->users()) {
      w.BeginObject().Field("name", u.name()).Key("accounts").BeginArray();
      for (const auto& a : u.accounts()) w.String(a);
      w.EndArray()
          .Field("default_account",
                 u.default_account().empty() ? u.accounts(0) : u.default_account())
          .EndObject();
    }
    w.EndArray().EndObject();
    std::printf("%s\n", w.str().c_str());
    return kExitOk;
  }
  std::printf("%-16s %-16s %s\n", "USER", "DEFAULT", "ACCOUNTS");
  for (const v1::UserRecord& u : all->users()) {
    const std::string def = u.default_account().empty() ? u.accounts(0) : u.default_account();
    std::printf("%-16s %-16s %s\n", u.name().c_str(), def.c_str(),
                Join({u.accounts().begin(), u.accounts().end()}, ",").c_str());
  }
  return kExitOk;
}

// TYPE=G[:MAX[:LEND]], or TYPE=none (removes the quota: guaranteed 4294967295).
Result<v1::GpuQuota> ParseQuota(const std::string& v, std::string* type) {
  const size_t eq = v.find('=');
  const std::string bad = "bad --quota '" + v + "' (expected TYPE=GUARANTEED[:MAX[:LEND]])";
  if (eq == std::string::npos || eq == 0) return InvalidArgument(bad);
  *type = ToLower(v.substr(0, eq));
  v1::GpuQuota q;
  if (ToLower(v.substr(eq + 1)) == "none") {
    q.set_guaranteed(0xFFFFFFFFu);
    return q;
  }
  std::vector<std::string> f = Split(v.substr(eq + 1), ':');
  if (f.empty() || f.size() > 3) return InvalidArgument(bad);
  std::vector<uint32_t> n;
  for (const std::string& x : f) {
    auto u = ParseUint(x);
    if (!u || *u > 1'000'000'000) return InvalidArgument(bad);
    n.push_back(static_cast<uint32_t>(*u));
  }
  q.set_guaranteed(n[0]);
  if (n.size() > 1) q.set_max(n[1]);
  if (n.size() > 2) q.set_lending_limit(n[2]);
  return q;
}

Result<v1::AccountOp> OpOf(const std::string& verb) {
  if (verb == "add") return v1::ACCOUNT_OP_ADD;
  if (verb == "modify") return v1::ACCOUNT_OP_MODIFY;
  if (verb == "remove" || verb == "delete") return v1::ACCOUNT_OP_REMOVE;
  return InvalidArgument("unknown subcommand '" + verb + "' (add, modify, remove, list)");
}

}  // namespace

int CmdAccount(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    PrintAccountHelp();
    return argc < 2 ? kExitUsage : kExitOk;
  }
  const std::string verb = argv[1];
  if (verb == "list" || verb == "show") {
    const bool json = argc > 2 && std::string(argv[argc - 1]) == "--json";
    return PrintAccounts(json);
  }
  auto op = OpOf(verb);
  if (!op.ok()) return Usage("account", op.status().message());
  v1::UpdateAccountRequest req;
  req.set_op(*op);
  const struct option opts[] = {{"parent", required_argument, nullptr, 'p'},
                                {"shares", required_argument, nullptr, 's'},
                                {"description", required_argument, nullptr, 'd'},
                                {"quota", required_argument, nullptr, 'q'},
                                {"cohort", required_argument, nullptr, 'c'},
                                {"help", no_argument, nullptr, 'h'},
                                {nullptr, 0, nullptr, 0}};
  optind = 2;
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":h", opts, nullptr)) != -1;) {
    switch (c) {
      case 'p':
        req.set_parent(optarg);
        break;
      case 's': {
        auto n = ParseUint(optarg);
        if (!n || *n == 0 || *n > 1'000'000) return Usage("account", "bad --shares (1 to 1000000)");
        req.set_shares(static_cast<uint32_t>(*n));
        break;
      }
      case 'd':
        req.set_description(optarg);
        break;
      case 'q': {
        std::string type;
        auto q = ParseQuota(optarg, &type);
        if (!q.ok()) return Usage("account", q.status().message());
        (*req.mutable_quotas())[type] = *q;
        break;
      }
      case 'c':
        req.set_cohort(optarg);
        break;
      case 'h':
        PrintAccountHelp();
        return kExitOk;
      default:
        return Usage("account", "unknown or incomplete option");
    }
  }
  if (optind + 1 != argc) return Usage("account", "expected one account name");
  req.set_name(argv[optind]);
  if (*op == v1::ACCOUNT_OP_REMOVE &&
      (req.has_parent() || req.has_shares() || req.has_description() || req.quotas_size() > 0 ||
       req.has_cohort())) {
    return Usage("account", "remove takes no options");
  }
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("account", controller.status());
  v1::UpdateAccountResponse resp;
  if (Status st = controller->Call(v1::METHOD_UPDATE_ACCOUNT, req, &resp); !st.ok()) {
    return Fail("account", st);
  }
  return kExitOk;
}

int CmdUser(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    PrintUserHelp();
    return argc < 2 ? kExitUsage : kExitOk;
  }
  const std::string verb = argv[1];
  if (verb == "list" || verb == "show") {
    const bool json = argc > 2 && std::string(argv[argc - 1]) == "--json";
    return PrintUsers(json);
  }
  auto op = OpOf(verb);
  if (!op.ok()) return Usage("user", op.status().message());
  v1::UpdateUserRequest req;
  req.set_op(*op);
  const struct option opts[] = {{"account", required_argument, nullptr, 'A'},
                                {"default-account", required_argument, nullptr, 'D'},
                                {"default", no_argument, nullptr, 'd'},
                                {"help", no_argument, nullptr, 'h'},
                                {nullptr, 0, nullptr, 0}};
  optind = 2;
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":A:h", opts, nullptr)) != -1;) {
    switch (c) {
      case 'A':
        req.set_account(optarg);
        break;
      case 'D':
        req.set_account(optarg);
        req.set_make_default(true);
        break;
      case 'd':
        req.set_make_default(true);
        break;
      case 'h':
        PrintUserHelp();
        return kExitOk;
      default:
        return Usage("user", "unknown or incomplete option");
    }
  }
  if (optind + 1 != argc) return Usage("user", "expected one user name");
  req.set_user(argv[optind]);
  if (req.account().empty()) return Usage("user", "--account (or --default-account) is required");
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("user", controller.status());
  v1::UpdateUserResponse resp;
  if (Status st = controller->Call(v1::METHOD_UPDATE_USER, req, &resp); !st.ok()) {
    return Fail("user", st);
  }
  return kExitOk;
}

}  // namespace muster::cli
