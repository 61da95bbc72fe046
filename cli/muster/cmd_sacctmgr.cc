// sacctmgr: Slurm's account manager, for the accounts and associations Muster has.
//   sacctmgr [-i] add|create account NAME [parent=P] [fairshare=N] [description=TEXT]
//   sacctmgr [-i] add|create user NAME account=A [defaultaccount=A]
//   sacctmgr [-i] modify account [where] [name=]NAME set parent=P fairshare=N description=TEXT
//   sacctmgr [-i] modify user [where] [name=]NAME set defaultaccount=A
//   sacctmgr [-i] remove|delete account NAME | user NAME [account=A]
//   sacctmgr [-i] add|modify|remove qos NAME [set] Priority=N Preempt=Q1,Q2 PreemptMode=M
//            UsageFactor=F GraceTime=SECS Flags=DenyOnLimit and limits
//   account and qos limits: GrpTRES=gres/gpu[:TYPE]=N,node=N GrpJobs= GrpSubmitJobs= MaxJobs=
//            MaxSubmitJobs= MaxTRES=gres/gpu=N,node=N MaxTRESPerUser= (qos) MaxWall= (-1 clears)
//   sacctmgr [-n] [-p|-P] show|list account|user|assoc|qos [where ...] [format=F1,F2%W,...]
// Changes are made at once (-i is accepted and implied: there is no confirmation prompt).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "cli.h"
#include "format_spec.h"
#include "muster/common/strings.h"
#include "options.h"
#include "sacctmgr_limits.h"

namespace muster::cli {
namespace {

constexpr const char* kHelp =
    "Usage: sacctmgr [-i] [-n] [-p|-P] [-r] COMMAND ENTITY [SPECS]\n"
    "  add|create account NAME [parent=P] [fairshare=N] [description=TEXT] [qos=Q,Q]\n"
    "                          [defaultqos=Q] [LIMITS]\n"
    "  add|modify|remove qos NAME [set] [priority=N] [preempt=Q,Q] [preemptmode=requeue|cancel]\n"
    "                          [usagefactor=F] [gracetime=SECS] [flags=DenyOnLimit] [LIMITS]\n"
    "  LIMITS: GrpTRES=gres/gpu[:TYPE]=N,node=N GrpJobs=N GrpSubmitJobs=N MaxJobs=N\n"
    "          MaxSubmitJobs=N MaxTRES=gres/gpu=N,node=N MaxTRESPerUser=gres/gpu=N MaxWall=T\n"
    "          GrpStoredMB=N MaxStoredMBPerUser=N (stored scripts and environments, MiB)\n"
    "  add|create user NAME account=A [defaultaccount=A]\n"
    "  modify account|user [where] [name=]NAME set parent=P fairshare=N description=TEXT\n"
    "                                                  | defaultaccount=A\n"
    "  remove|delete account NAME | user NAME [account=A]\n"
    "  show|list account|user|association|qos [where name=N account=A user=U] [format=F,F%W]\n"
    "                          [withassoc]\n"
    "  -n no header; -p '|' after every field; -P '|' between fields; -s (withassoc): an\n"
    "  account's or a user's associations too; -r (--readonly) refuses changes. Changes need an\n"
    "  admin.\n";

// key=value words (keys case-insensitive), split at "where" and "set".
struct Specs {
  std::vector<std::string> names;            // bare words (entity names)
  std::map<std::string, std::string> where;  // before "set" (and after "where")
  std::map<std::string, std::string> set;
};

Result<Specs> ParseSpecs(const std::vector<std::string>& words) {
  Specs s;
  bool in_set = false;
  for (const std::string& w : words) {
    const std::string lw = ToLower(w);
    if (lw == "where") continue;
    if (lw == "set") {
      in_set = true;
      continue;
    }
    const size_t eq = w.find('=');
    if (eq == std::string::npos) {
      if (in_set) return InvalidArgument("'" + w + "' after set is not KEY=VALUE");
      s.names.push_back(w);
      continue;
    }
    std::string key = ToLower(w.substr(0, eq));
    (in_set ? s.set : s.where)[key] = w.substr(eq + 1);
  }
  return s;
}

std::optional<std::string> Take(std::map<std::string, std::string>& m,
                                std::initializer_list<const char*> keys) {
  return TakeKey(m, keys);
}

Status NoLeftovers(const std::map<std::string, std::string>& m) {
  if (m.empty()) return Status::Ok();
  return Unimplemented("sacctmgr: '" + m.begin()->first +
                       "' is not supported (Muster has accounts, parents, fairshare, "
                       "descriptions, users, default accounts, QoS and the limits in -h)");
}

Status Call(v1::Method method, const google::protobuf::MessageLite& req,
            google::protobuf::MessageLite* resp) {
  auto controller = ConnectController();
  if (!controller.ok()) return controller.status();
  return controller->Call(method, req, resp);
}

Status UpdateAccount(v1::AccountOp op, const std::string& name, Specs& s) {
  v1::UpdateAccountRequest req;
  req.set_op(op);
  req.set_name(name);
  auto& values = op == v1::ACCOUNT_OP_MODIFY ? s.set : s.where;
  if (auto p = Take(values, {"parent", "parentname"})) req.set_parent(*p);
  if (auto f = Take(values, {"fairshare", "share", "shares"})) {
    auto n = ParseUint(*f);
    if (!n || *n == 0 || *n > 1'000'000) return InvalidArgument("fairshare must be 1 to 1000000");
    req.set_shares(static_cast<uint32_t>(*n));
  }
  if (auto d = Take(values, {"description", "descr"})) req.set_description(*d);
  if (auto q = Take(values, {"qos", "qoslevel"})) req.set_qos(*q == "''" ? "" : *q);
  if (auto q = Take(values, {"defaultqos"})) req.set_default_qos(*q == "''" ? "" : *q);
  MUSTER_RETURN_IF_ERROR(TakeLimits(values, /*qos=*/false, req.mutable_limits()));
  Take(values, {"organization", "org", "cluster", "clusters"});  // one cluster, no organisations
  MUSTER_RETURN_IF_ERROR(NoLeftovers(values));
  v1::UpdateAccountResponse resp;
  return Call(v1::METHOD_UPDATE_ACCOUNT, req, &resp);
}

Status UpdateUser(v1::AccountOp op, const std::string& user, const std::string& account,
                  bool make_default) {
  v1::UpdateUserRequest req;
  req.set_op(op);
  req.set_user(user);
  req.set_account(account);
  req.set_make_default(make_default);
  v1::UpdateUserResponse resp;
  return Call(v1::METHOD_UPDATE_USER, req, &resp);
}

struct Column {
  const char* name;
  int width;
  std::function<std::string(const v1::AccountRecord*, const v1::UserRecord*)> value;
};

std::string DefaultOf(const v1::UserRecord& u) {
  return u.default_account().empty() ? u.accounts(0) : u.default_account();
}

// An account's limit column; user lines show their account's limits, as inherited.
std::function<std::string(const v1::AccountRecord*, const v1::UserRecord*)> Limit(const char* c) {
  return [c](const v1::AccountRecord* a, const v1::UserRecord*) {
    return a ? LimitColumn(a->limits(), c) : std::string();
  };
}

const std::vector<Column>& Columns() {
  static const std::vector<Column> columns = {
      {"Cluster", 10, [](auto, auto) { return std::string(); }},
      {"Account", 10, [](const v1::AccountRecord* a, auto) { return a ? a->name() : ""; }},
      {"User", 10, [](auto, const v1::UserRecord* u) { return u ? u->name() : ""; }},
      {"Partition", 10, [](auto, auto) { return std::string(); }},
      {"Share", 9,
       [](const v1::AccountRecord* a, const v1::UserRecord* u) {
         return u ? std::string("1") : a ? std::to_string(a->shares()) : "";
       }},
      {"ParentName", 10,
       [](const v1::AccountRecord* a, const v1::UserRecord* u) {
         return u || !a ? std::string() : a->parent();
       }},
      {"Descr", 20, [](const v1::AccountRecord* a, auto) { return a ? a->description() : ""; }},
      {"Org", 20, [](const v1::AccountRecord* a, auto) { return a ? a->name() : ""; }},
      {"DefaultAccount", 10, [](auto, const v1::UserRecord* u) { return u ? DefaultOf(*u) : ""; }},
      {"Admin", 9, [](auto, const v1::UserRecord* u) { return u ? std::string("None") : ""; }},
      {"QOS", 20,
       [](const v1::AccountRecord* a, auto) {
         return a ? Join(std::vector<std::string>(a->qos().begin(), a->qos().end()), ",") : "";
       }},
      {"Def QOS", 9, [](const v1::AccountRecord* a, auto) { return a ? a->default_qos() : ""; }},
      {"GrpTRES", 13, Limit("GrpTRES")},
      {"GrpJobs", 7, Limit("GrpJobs")},
      {"GrpSubmit", 9, Limit("GrpSubmit")},
      {"MaxJobs", 7, Limit("MaxJobs")},
      {"MaxSubmit", 9, Limit("MaxSubmit")},
      {"MaxTRES", 13, Limit("MaxTRES")},
      {"MaxWall", 11, Limit("MaxWall")},
      {"GrpStoredMB", 11, Limit("GrpStoredMB")},
      {"MaxStoredMBPU", 13, Limit("MaxStoredMBPU")},
  };
  return columns;
}

const Column* FindColumn(const std::string& name) {
  std::string lname = ToLower(name);
  if (lname == "def acct" || lname == "defaultacct" || lname == "defacct") lname = "defaultaccount";
  if (lname == "description") lname = "descr";
  if (lname == "organization") lname = "org";
  if (lname == "fairshare") lname = "share";
  if (lname == "parent") lname = "parentname";
  if (lname == "defaultqos" || lname == "defqos") lname = "def qos";
  for (const Column& c : Columns()) {
    if (ToLower(c.name) == lname) return &c;
  }
  return nullptr;
}

int Show(const std::string& entity, Specs& s, bool header, const std::string& sep,
         bool trailing_sep, bool with_assoc) {
  // WithAssoc among the words is -s/--associations.
  std::erase_if(s.names, [&](const std::string& n) {
    const bool is = ToLower(n) == "withassoc";
    with_assoc = with_assoc || is;
    return is;
  });
  std::string format;
  if (auto f = Take(s.where, {"format"})) format = *f;
  auto names = Take(s.where, {"name", "names", "account", "accounts", "user", "users"});
  std::set<std::string> only(s.names.begin(), s.names.end());
  if (names) {
    for (const auto& n : Split(*names, ',', true)) only.insert(n);
  }
  if (Status st = NoLeftovers(s.where); !st.ok()) return Fail("sacctmgr", st);
  const bool users = entity == "user" || entity == "users";
  // Accounts with their associations are the association listing.
  const bool assoc = entity.rfind("assoc", 0) == 0 || (with_assoc && !users);
  if (format.empty()) {
    format = users && with_assoc ? "User,DefaultAccount,Admin,Cluster,Account,Partition,Share"
             : users             ? "User,DefaultAccount,Admin"
             : assoc             ? "Cluster,Account,User,Partition,Share"
                                 : "Account,Descr,Org";
  }
  struct Chosen {
    const Column* column;
    int width;
  };
  std::string supported;
  for (const Column& c : Columns()) supported += std::string(supported.empty() ? "" : " ") + c.name;
  auto find = [](const std::string& name) -> std::optional<size_t> {
    const Column* c = FindColumn(name);
    return c ? std::optional<size_t>(static_cast<size_t>(c - Columns().data())) : std::nullopt;
  };
  auto named = ParseNamedFields(format, find, supported);
  if (!named.ok()) return Fail("sacctmgr", named.status());
  std::vector<Chosen> chosen;
  for (const NamedField& n : *named) {
    const Column& c = Columns()[n.index];
    chosen.push_back({&c, n.width ? static_cast<int>(n.width) : c.width});
  }
  v1::ListAccountsResponse all;
  if (Status st = Call(v1::METHOD_LIST_ACCOUNTS, v1::ListAccountsRequest(), &all); !st.ok()) {
    return Fail("sacctmgr", st);
  }
  const bool parsable = !sep.empty();
  auto print_row = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i) {
      if (parsable) {
        line += cells[i];
        if (i + 1 < cells.size() || trailing_sep) line += sep;
      } else {
        std::string cell = cells[i].substr(0, static_cast<size_t>(chosen[i].width));
        line += (i ? " " : "") + std::string(chosen[i].width - cell.size(), ' ') + cell;
      }
    }
    std::printf("%s\n", line.c_str());
  };
  if (header) {
    std::vector<std::string> names_row, dashes;
    for (const Chosen& c : chosen) {
      // sacctmgr's own headings where they differ from the field names.
      const std::string heading = c.column->name;
      names_row.push_back(heading == "DefaultAccount" ? "Def Acct" : heading);
      dashes.push_back(std::string(static_cast<size_t>(c.width), '-'));
    }
    print_row(names_row);
    if (!parsable) print_row(dashes);
  }
  auto row = [&](const v1::AccountRecord* a, const v1::UserRecord* u) {
    std::vector<std::string> cells;
    for (const Chosen& c : chosen) cells.push_back(c.column->value(a, u));
    print_row(cells);
  };
  std::map<std::string, const v1::AccountRecord*> by_name;
  for (const auto& a : all.accounts()) by_name[a.name()] = &a;
  if (users) {
    for (const auto& u : all.users()) {
      if (!only.empty() && !only.count(u.name())) continue;
      if (!with_assoc) {
        row(nullptr, &u);
        continue;
      }
      // A line per account the user is in: its associations.
      for (const auto& in : u.accounts()) {
        auto a = by_name.find(in);
        row(a == by_name.end() ? nullptr : a->second, &u);
      }
    }
  } else if (assoc) {
    // Each account's own line, then a line per user in it, as sacctmgr lists associations.
    for (const auto& a : all.accounts()) {
      if (only.empty() || only.count(a.name())) row(&a, nullptr);
      for (const auto& u : all.users()) {
        for (const auto& in : u.accounts()) {
          if (in == a.name() && (only.empty() || only.count(a.name()) || only.count(u.name()))) {
            row(&a, &u);
          }
        }
      }
    }
  } else {
    for (const auto& a : all.accounts()) {
      if (only.empty() || only.count(a.name())) row(&a, nullptr);
    }
  }
  return kExitOk;
}

}  // namespace

int CmdSacctmgr(int argc, char** argv) {
  bool header = true, trailing = false;
  std::string sep;
  std::vector<std::string> words;
  const struct option opts[] = {{"immediate", no_argument, nullptr, 'i'},
                                {"noheader", no_argument, nullptr, 'n'},
                                {"parsable", no_argument, nullptr, 'p'},
                                {"parsable2", no_argument, nullptr, 'P'},
                                {"help", no_argument, nullptr, 'h'},
                                {"associations", no_argument, nullptr, 's'},
                                {"quiet", no_argument, nullptr, 'Q'},
                                {"readonly", no_argument, nullptr, 'r'},
                                {"verbose", no_argument, nullptr, 'v'},
                                {"oneliner", no_argument, nullptr, 'o'},
                                {nullptr, 0, nullptr, 0}};
  bool with_assoc = false;  // -s: the entity's associations too
  bool readonly = false;    // -r: show and list only
  OptionReader in(argc, argv, "hinpPsQrvo", opts);
  // COMMAND ENTITY SPECS come in order; options may come between and after them.
  for (int c; (c = in.Next()) != -1;) {
    switch (c) {
      case 'h':
        std::fputs(kHelp, stdout);
        return kExitOk;
      case 'i':  // implied: there is no prompt
      case 'Q':  // only errors are ever printed
      case 'v':  // nothing is logged on the way
      case 'o':  // every record is one line already
        break;
      case 'r':
        readonly = true;
        break;
      case 's':
        with_assoc = true;
        break;
      case 'n':
        header = false;
        break;
      case 'p':
        sep = "|";
        trailing = true;
        break;
      case 'P':
        sep = "|";
        trailing = false;
        break;
      case OptionReader::kWord:
        words.push_back(in.Word());
        break;
      default:
        return Usage("sacctmgr", "unknown option " + in.Word());
    }
  }
  if (words.size() < 2) return Usage("sacctmgr", "expected a command and an entity (see -h)");
  const std::string command = ToLower(words[0]);
  std::string entity = ToLower(words[1]);
  if (readonly && command != "show" && command != "list") {
    return Fail("sacctmgr", FailedPrecondition("-r/--readonly: '" + words[0] +
                                               "' would change the accounting data"));
  }
  auto specs = ParseSpecs({words.begin() + 2, words.end()});
  if (!specs.ok()) return Usage("sacctmgr", specs.status().message());
  Specs& s = *specs;
  if (entity == "qos") {
    if (command == "show" || command == "list") {
      auto format = Take(s.where, {"format"});
      if (auto n = Take(s.where, {"name", "names"})) {
        for (const auto& x : Split(*n, ',', true)) s.names.push_back(x);
      }
      if (Status left = NoLeftovers(s.where); !left.ok()) return Fail("sacctmgr", left);
      return ShowQos(s.names, format.value_or(""), header, sep, trailing);
    }
    if (auto n = Take(s.where, {"name", "names"})) s.names.push_back(*n);
    if (s.names.size() != 1) return Usage("sacctmgr", "expected one qos name");
    Status st;
    if (command == "add" || command == "create") {
      st = UpdateQos(v1::ACCOUNT_OP_ADD, s.names[0], s.where);
    } else if (command == "modify" || command == "update") {
      if (Status left = NoLeftovers(s.where); !left.ok()) return Fail("sacctmgr", left);
      st = UpdateQos(v1::ACCOUNT_OP_MODIFY, s.names[0], s.set);
    } else if (command == "remove" || command == "delete") {
      st = UpdateQos(v1::ACCOUNT_OP_REMOVE, s.names[0], s.where);
    } else {
      return Usage("sacctmgr", "unknown command '" + command + "' (add, modify, remove, show)");
    }
    if (!st.ok()) return Fail("sacctmgr", st);
    return kExitOk;
  }
  if (command == "show" || command == "list") {
    if (entity != "account" && entity != "accounts" && entity != "user" && entity != "users" &&
        entity.rfind("assoc", 0) != 0) {
      return Fail("sacctmgr", Unimplemented("sacctmgr show " + entity +
                                            " is not supported (account, user, association)"));
    }
    return Show(entity, s, header, sep, trailing, with_assoc);
  }
  if (entity == "accounts") entity = "account";
  if (entity == "users") entity = "user";
  if (entity != "account" && entity != "user") {
    return Fail("sacctmgr", Unimplemented("sacctmgr " + command + " " + entity +
                                          " is not supported (account, user)"));
  }
  // The entity's name: a bare word, or name= before set.
  if (auto n = Take(s.where, {"name", "names"})) s.names.push_back(*n);
  if (s.names.size() != 1) return Usage("sacctmgr", "expected one " + entity + " name");
  const std::string name = s.names[0];
  Status st;
  if (command == "add" || command == "create") {
    if (entity == "account") {
      st = UpdateAccount(v1::ACCOUNT_OP_ADD, name, s);
    } else {
      auto account = Take(s.where, {"account", "accounts"});
      auto def = Take(s.where, {"defaultaccount"});
      if (!account && !def) return Usage("sacctmgr", "add user needs account=A");
      if (Status left = NoLeftovers(s.where); !left.ok()) return Fail("sacctmgr", left);
      std::vector<std::string> accounts = Split(account.value_or(""), ',', true);
      if (def && std::find(accounts.begin(), accounts.end(), *def) == accounts.end()) {
        accounts.push_back(*def);
      }
      for (const auto& a : accounts) {
        st = UpdateUser(v1::ACCOUNT_OP_ADD, name, a, def && *def == a);
        if (!st.ok()) break;
      }
    }
  } else if (command == "modify" || command == "update") {
    if (entity == "account") {
      st = UpdateAccount(v1::ACCOUNT_OP_MODIFY, name, s);
    } else {
      auto def = Take(s.set, {"defaultaccount"});
      if (!def) return Usage("sacctmgr", "modify user needs set defaultaccount=A");
      if (Status left = NoLeftovers(s.set); !left.ok()) return Fail("sacctmgr", left);
      st = UpdateUser(v1::ACCOUNT_OP_MODIFY, name, *def, true);
    }
  } else if (command == "remove" || command == "delete") {
    if (entity == "account") {
      st = UpdateAccount(v1::ACCOUNT_OP_REMOVE, name, s);
    } else {
      auto account = Take(s.where, {"account", "accounts"});
      v1::ListAccountsResponse all;
      if (!account) {
        // Every account of the user's that is not the config's.
        st = Call(v1::METHOD_LIST_ACCOUNTS, v1::ListAccountsRequest(), &all);
        std::vector<std::string> mine;
        for (const auto& u : all.users()) {
          if (u.name() != name) continue;
          for (const auto& a : u.accounts()) mine.push_back(a);
        }
        if (st.ok() && mine.empty()) st = NotFound("user " + name + " is in no account");
        account = Join(mine, ",");
      }
      for (const auto& a : Split(*account, ',', true)) {
        if (!st.ok()) break;
        st = UpdateUser(v1::ACCOUNT_OP_REMOVE, name, a, false);
      }
    }
  } else {
    return Usage("sacctmgr", "unknown command '" + command + "' (add, modify, remove, show)");
  }
  if (!st.ok()) return Fail("sacctmgr", st);
  return kExitOk;
}

}  // namespace muster::cli
