// sacctmgr: Slurm's account manager, for the accounts and associations Muster has.
//   sacctmgr [-i] add|create account NAME [parent=P] [fairshare=N] [description=TEXT]
//   sacctmgr [-i] add|create user NAME account=A [defaultaccount=A] [ASSOCIATION]
//   sacctmgr [-i] modify account [where] [name=]NAME set parent=P fairshare=N description=TEXT
//   sacctmgr [-i] modify user [where] [name=]NAME [account=A] set defaultaccount=A | ASSOCIATION
//   ASSOCIATION (the user's own settings in an account): qos=Q,Q qos+=Q qos-=Q defaultqos=Q
//            fairshare=N and the account limits
//   sacctmgr [-i] add|delete coordinator accounts=A,A names=U,U
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
    "  add|create user NAME account=A [defaultaccount=A] [ASSOC]\n"
    "  modify account [where] [name=]NAME set parent=P fairshare=N description=TEXT qos[+-]=Q\n"
    "  modify user [where] [name=]NAME [account=A] set defaultaccount=A | ASSOC\n"
    "  ASSOC: a user's own settings in the account (all its accounts without account=):\n"
    "         qos=Q,Q qos+=Q qos-=Q defaultqos=Q fairshare=N and LIMITS but MaxTRESPerUser\n"
    "         and the stored-bytes ones; unset, they come from the account and those above it\n"
    "  remove|delete account NAME | user NAME [account=A]\n"
    "  add|delete coordinator accounts=A,A names=U,U\n"
    "  show|list account|user|association|qos [where name=N account=A user=U] [format=F,F%W]\n"
    "                          [withassoc] [withcoord] [wopinfo|woplimits]\n"
    "  -n no header; -p '|' after every field; -P '|' between fields; -s (withassoc): an\n"
    "  account's or a user's associations too; -r (--readonly) refuses changes. Changes need an\n"
    "  admin, or a coordinator of an account above what they change.\n";

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

// qos=Q,Q replaces; qos+=Q adds and qos-=Q removes (the controller's "+Q"/"-Q" items); '' or
// an empty value clears.
std::optional<std::string> TakeQos(std::map<std::string, std::string>& values) {
  if (auto q = Take(values, {"qos", "qoslevel"})) return *q == "''" ? "" : *q;
  for (const char sign : {'+', '-'}) {
    const std::string plus = std::string("qos") + sign, level = std::string("qoslevel") + sign;
    if (auto q = Take(values, {plus.c_str(), level.c_str()})) {
      std::vector<std::string> items;
      for (const std::string& item : Split(*q, ',', true)) items.push_back(sign + item);
      return Join(items, ",");
    }
  }
  return std::nullopt;
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
  if (auto q = TakeQos(values)) req.set_qos(*q);
  if (auto q = Take(values, {"defaultqos"})) req.set_default_qos(*q == "''" ? "" : *q);
  MUSTER_RETURN_IF_ERROR(TakeLimits(values, /*qos=*/false, req.mutable_limits()));
  Take(values, {"organization", "org", "cluster", "clusters"});  // one cluster, no organisations
  MUSTER_RETURN_IF_ERROR(NoLeftovers(values));
  v1::UpdateAccountResponse resp;
  return Call(v1::METHOD_UPDATE_ACCOUNT, req, &resp);
}

// A user's association settings among the spec words: QoS, default QoS, fairshare, limits.
Result<v1::UpdateUserRequest> TakeAssociation(std::map<std::string, std::string>& values) {
  v1::UpdateUserRequest req;
  if (auto q = TakeQos(values)) req.set_qos(*q);
  if (auto q = Take(values, {"defaultqos"})) req.set_default_qos(*q == "''" ? "" : *q);
  if (auto f = Take(values, {"fairshare", "share", "shares"})) {
    auto n = ParseUint(*f);
    if (!n || *n == 0 || *n > 1'000'000) return InvalidArgument("fairshare must be 1 to 1000000");
    req.set_shares(static_cast<uint32_t>(*n));
  }
  MUSTER_RETURN_IF_ERROR(TakeLimits(values, /*qos=*/false, req.mutable_limits()));
  Take(values, {"cluster", "clusters"});  // one cluster
  if (auto p = Take(values, {"partition", "partitions"})) {
    return Unimplemented(
        "associations per partition are not supported (a user's "
        "settings hold in all partitions)");
  }
  return req;
}

Status UpdateUser(v1::AccountOp op, const std::string& user, const std::string& account,
                  bool make_default, v1::UpdateUserRequest req = {}) {
  req.set_op(op);
  req.set_user(user);
  req.set_account(account);
  req.set_make_default(make_default);
  v1::UpdateUserResponse resp;
  return Call(v1::METHOD_UPDATE_USER, req, &resp);
}

// sacctmgr add|delete coordinator accounts=A,A names=U,U.
Status UpdateCoordinators(bool add, Specs& s) {
  auto accounts = Take(s.where, {"account", "accounts"});
  auto names = Take(s.where, {"name", "names", "user", "users"});
  for (const std::string& n : s.names) names = names ? *names + "," + n : n;
  if (!accounts || !names) {
    return InvalidArgument("a coordinator needs accounts=A and names=U");
  }
  MUSTER_RETURN_IF_ERROR(NoLeftovers(s.where));
  for (const std::string& account : Split(*accounts, ',', true)) {
    v1::UpdateAccountRequest req;
    req.set_op(v1::ACCOUNT_OP_MODIFY);
    req.set_name(account);
    for (const std::string& user : Split(*names, ',', true)) {
      *(add ? req.add_add_coordinators() : req.add_remove_coordinators()) = user;
    }
    v1::UpdateAccountResponse resp;
    MUSTER_RETURN_IF_ERROR(Call(v1::METHOD_UPDATE_ACCOUNT, req, &resp));
  }
  return Status::Ok();
}

// One line of a listing: an account's, or a user's (in an account, with -s/withassoc).
struct Row {
  const v1::AccountRecord* account = nullptr;
  const v1::UserRecord* user = nullptr;
  // What the line shows: an account's own limits and QoS; for a user in an account, its
  // association's, and what it leaves unset as it comes from the accounts above (unless
  // WOPLimits/WOPInfo).
  v1::UsageLimits limits;
  std::vector<std::string> qos;
  std::string default_qos;
  uint32_t shares = 1;
  std::string coordinators;  // an account's, or the accounts a user coordinates
};

struct Column {
  const char* name;
  int width;
  std::function<std::string(const Row&)> value;
};

std::string DefaultOf(const v1::UserRecord& u) {
  return u.default_account().empty() ? u.accounts(0) : u.default_account();
}

std::function<std::string(const Row&)> Limit(const char* c) {
  return [c](const Row& r) { return r.account ? LimitColumn(r.limits, c) : std::string(); };
}

const std::vector<Column>& Columns() {
  static const std::vector<Column> columns = {
      {"Cluster", 10, [](const Row&) { return std::string(); }},
      {"Account", 10, [](const Row& r) { return r.account ? r.account->name() : ""; }},
      {"User", 10, [](const Row& r) { return r.user ? r.user->name() : ""; }},
      {"Partition", 10, [](const Row&) { return std::string(); }},
      {"Share", 9,
       [](const Row& r) { return r.user || r.account ? std::to_string(r.shares) : ""; }},
      {"ParentName", 10,
       [](const Row& r) { return r.user || !r.account ? std::string() : r.account->parent(); }},
      {"Descr", 20,
       [](const Row& r) { return r.account && !r.user ? r.account->description() : ""; }},
      {"Org", 20, [](const Row& r) { return r.account ? r.account->name() : ""; }},
      {"DefaultAccount", 10, [](const Row& r) { return r.user ? DefaultOf(*r.user) : ""; }},
      {"Admin", 9, [](const Row& r) { return r.user ? std::string("None") : ""; }},
      {"QOS", 20, [](const Row& r) { return r.account ? Join(r.qos, ",") : ""; }},
      {"Def QOS", 9, [](const Row& r) { return r.account ? r.default_qos : ""; }},
      {"GrpTRES", 13, Limit("GrpTRES")},
      {"GrpJobs", 7, Limit("GrpJobs")},
      {"GrpSubmit", 9, Limit("GrpSubmit")},
      {"MaxJobs", 7, Limit("MaxJobs")},
      {"MaxSubmit", 9, Limit("MaxSubmit")},
      {"MaxTRES", 13, Limit("MaxTRES")},
      {"MaxWall", 11, Limit("MaxWall")},
      {"GrpStoredMB", 11, Limit("GrpStoredMB")},
      {"MaxStoredMBPU", 13, Limit("MaxStoredMBPU")},
      {"Coordinators", 20, [](const Row& r) { return r.user ? "" : r.coordinators; }},
      {"Coord Accounts", 20, [](const Row& r) { return r.user ? r.coordinators : ""; }},
  };
  return columns;
}

// The tree as the listing has it, for what a user's line inherits.
class Tree {
 public:
  explicit Tree(const v1::ListAccountsResponse& all) {
    for (const auto& a : all.accounts()) by_name_[a.name()] = &a;
  }
  const v1::AccountRecord* Find(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
  }
  // The account and those above it, nearest first (bounded: the tree has no cycles, but a
  // listing is data).
  std::vector<const v1::AccountRecord*> Lineage(const std::string& account) const {
    std::vector<const v1::AccountRecord*> out;
    for (const v1::AccountRecord* a = Find(account); a && out.size() <= by_name_.size();
         a = a->name() == "root" ? nullptr : Find(a->parent())) {
      out.push_back(a);
    }
    return out;
  }

 private:
  std::map<std::string, const v1::AccountRecord*> by_name_;
};

// A user's line in `account`: its association's settings, and (`inherit`) for each Max* limit
// it does not set the tightest of the accounts' above, which all bind it (as the controller
// enforces them); its QoS list and default from the nearest account that names them.
Row UserRow(const Tree& tree, const v1::AccountRecord* account, const v1::UserRecord& u,
            bool inherit) {
  Row r;
  r.account = account;
  r.user = &u;
  if (!account) return r;
  auto own = u.associations().find(account->name());
  if (own != u.associations().end()) {
    r.limits = own->second.limits();
    r.qos.assign(own->second.qos().begin(), own->second.qos().end());
    r.default_qos = own->second.default_qos();
    if (own->second.has_shares()) r.shares = own->second.shares();
  }
  if (!inherit) return r;
  const v1::UsageLimits mine = r.limits;
  for (const v1::AccountRecord* a : tree.Lineage(account->name())) {
    const v1::UsageLimits& l = a->limits();
    auto tighter = [](bool set_here, uint64_t here, bool set_now, uint64_t now) {
      return set_here && (!set_now || here < now);
    };
    if (!mine.has_max_jobs_per_user() &&
        tighter(l.has_max_jobs_per_user(), l.max_jobs_per_user(), r.limits.has_max_jobs_per_user(),
                r.limits.max_jobs_per_user())) {
      r.limits.set_max_jobs_per_user(l.max_jobs_per_user());
    }
    if (!mine.has_max_submit_per_user() &&
        tighter(l.has_max_submit_per_user(), l.max_submit_per_user(),
                r.limits.has_max_submit_per_user(), r.limits.max_submit_per_user())) {
      r.limits.set_max_submit_per_user(l.max_submit_per_user());
    }
    if (!mine.has_max_gpus_per_job() &&
        tighter(l.has_max_gpus_per_job(), l.max_gpus_per_job(), r.limits.has_max_gpus_per_job(),
                r.limits.max_gpus_per_job())) {
      r.limits.set_max_gpus_per_job(l.max_gpus_per_job());
    }
    if (!mine.has_max_nodes_per_job() &&
        tighter(l.has_max_nodes_per_job(), l.max_nodes_per_job(), r.limits.has_max_nodes_per_job(),
                r.limits.max_nodes_per_job())) {
      r.limits.set_max_nodes_per_job(l.max_nodes_per_job());
    }
    if (!mine.has_max_wall_ms() && tighter(l.has_max_wall_ms(), l.max_wall_ms(),
                                           r.limits.has_max_wall_ms(), r.limits.max_wall_ms())) {
      r.limits.set_max_wall_ms(l.max_wall_ms());
    }
    if (r.qos.empty() && a->qos_size() > 0) r.qos.assign(a->qos().begin(), a->qos().end());
    if (r.default_qos.empty()) r.default_qos = a->default_qos();
  }
  return r;
}

Row AccountRow(const v1::AccountRecord& a, const std::string& coordinators) {
  Row r;
  r.account = &a;
  r.limits = a.limits();
  r.qos.assign(a.qos().begin(), a.qos().end());
  r.default_qos = a.default_qos();
  r.shares = a.shares();
  r.coordinators = coordinators;
  return r;
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
  // WithAssoc among the words is -s/--associations; WOPLimits and WOPInfo show what each line
  // sets itself, not what it inherits; WithCoord adds the coordinators.
  bool inherit = true, with_coord = false;
  std::erase_if(s.names, [&](const std::string& n) {
    const std::string w = ToLower(n);
    if (w == "withassoc") with_assoc = true;
    if (w == "woplimits" || w == "wopinfo") inherit = false;
    if (w == "withcoord" || w == "withcoordinators") with_coord = true;
    return w == "withassoc" || w == "woplimits" || w == "wopinfo" || w == "withcoord" ||
           w == "withcoordinators";
  });
  std::string format;
  if (auto f = Take(s.where, {"format"})) format = *f;
  const bool users = entity == "user" || entity == "users";
  // Bare words and name= match either; account= and user= one side of an association.
  std::set<std::string> only(s.names.begin(), s.names.end()), only_accounts, only_users;
  if (auto names = Take(s.where, {"name", "names"})) {
    for (const auto& n : Split(*names, ',', true)) only.insert(n);
  }
  if (auto a = Take(s.where, {"account", "accounts"})) {
    for (const auto& n : Split(*a, ',', true)) (users ? only_accounts : only).insert(n);
  }
  if (auto u = Take(s.where, {"user", "users"})) {
    for (const auto& n : Split(*u, ',', true)) (users ? only : only_users).insert(n);
  }
  if (Status st = NoLeftovers(s.where); !st.ok()) return Fail("sacctmgr", st);
  // Accounts with their associations are the association listing.
  const bool assoc = entity.rfind("assoc", 0) == 0 || (with_assoc && !users);
  if (format.empty()) {
    format = users && with_assoc
                 ? "User,DefaultAccount,Admin,Cluster,Account,Partition,Share,MaxJobs,MaxSubmit,"
                   "MaxTRES,MaxWall,QOS,Def QOS"
             : users ? "User,DefaultAccount,Admin"
             : assoc ? "Cluster,Account,User,Partition,Share,GrpJobs,GrpTRES,GrpSubmit,MaxJobs,"
                       "MaxTRES,MaxSubmit,MaxWall,QOS,Def QOS"
                     : "Account,Descr,Org";
    if (with_coord) format += users ? ",Coord Accounts" : ",Coordinators";
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
  auto row = [&](const Row& r) {
    std::vector<std::string> cells;
    for (const Chosen& c : chosen) cells.push_back(c.column->value(r));
    print_row(cells);
  };
  const Tree tree(all);
  std::map<std::string, std::vector<std::string>> coordinates;  // user -> accounts
  for (const auto& a : all.accounts()) {
    for (const auto& c : a.coordinators()) coordinates[c].push_back(a.name());
  }
  auto account_row = [&](const v1::AccountRecord& a) {
    return AccountRow(
        a, Join(std::vector<std::string>(a.coordinators().begin(), a.coordinators().end()), ","));
  };
  auto user_row = [&](const v1::AccountRecord* a, const v1::UserRecord& u) {
    Row r = UserRow(tree, a, u, inherit);
    r.coordinators = Join(coordinates[u.name()], ",");
    return r;
  };
  if (users) {
    for (const auto& u : all.users()) {
      if (!only.empty() && !only.count(u.name())) continue;
      if (!with_assoc) {
        row(user_row(nullptr, u));
        continue;
      }
      // A line per account the user is in: its associations.
      for (const auto& in : u.accounts()) {
        if (only_accounts.empty() || only_accounts.count(in)) row(user_row(tree.Find(in), u));
      }
    }
  } else if (assoc) {
    // Each account's own line, then a line per user in it, as sacctmgr lists associations.
    for (const auto& a : all.accounts()) {
      if (only_users.empty() && (only.empty() || only.count(a.name()))) row(account_row(a));
      for (const auto& u : all.users()) {
        if (!only_users.empty() && !only_users.count(u.name())) continue;
        for (const auto& in : u.accounts()) {
          if (in == a.name() && (only.empty() || only.count(a.name()) || only.count(u.name()))) {
            row(user_row(&a, u));
          }
        }
      }
    }
  } else {
    for (const auto& a : all.accounts()) {
      if (only.empty() || only.count(a.name())) row(account_row(a));
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
  if (entity == "coordinator" || entity == "coordinators") {
    Status st;
    if (command == "add" || command == "create") {
      st = UpdateCoordinators(true, s);
    } else if (command == "remove" || command == "delete") {
      st = UpdateCoordinators(false, s);
    } else {
      return Usage("sacctmgr",
                   "coordinators are added or deleted (sacctmgr list account "
                   "withcoord lists them)");
    }
    if (!st.ok()) return Fail("sacctmgr", st);
    return kExitOk;
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
      std::vector<std::string> accounts = Split(account.value_or(""), ',', true);
      if (def && std::find(accounts.begin(), accounts.end(), *def) == accounts.end()) {
        accounts.push_back(*def);
      }
      auto settings = TakeAssociation(s.where);
      if (!settings.ok()) return Fail("sacctmgr", settings.status());
      if (Status left = NoLeftovers(s.where); !left.ok()) return Fail("sacctmgr", left);
      for (const auto& a : accounts) {
        st = UpdateUser(v1::ACCOUNT_OP_ADD, name, a, def && *def == a, *settings);
        if (!st.ok()) break;
      }
    }
  } else if (command == "modify" || command == "update") {
    if (entity == "account") {
      st = UpdateAccount(v1::ACCOUNT_OP_MODIFY, name, s);
    } else {
      auto def = Take(s.set, {"defaultaccount"});
      auto settings = TakeAssociation(s.set);
      if (!settings.ok()) return Fail("sacctmgr", settings.status());
      if (Status left = NoLeftovers(s.set); !left.ok()) return Fail("sacctmgr", left);
      // where account=A: that association only; without: every account of the user's.
      const std::string account = Take(s.where, {"account", "accounts"}).value_or("");
      if (Status left = NoLeftovers(s.where); !left.ok()) return Fail("sacctmgr", left);
      const bool any = settings->ByteSizeLong() > 0;
      if (!def && !any) {
        return Usage("sacctmgr",
                     "modify user needs set defaultaccount=A, qos=, defaultqos=, "
                     "fairshare= or limits");
      }
      if (any) {
        for (const std::string& a :
             account.empty() ? std::vector<std::string>{""} : Split(account, ',', true)) {
          st = UpdateUser(v1::ACCOUNT_OP_MODIFY, name, a, false, *settings);
          if (!st.ok()) break;
        }
      }
      if (st.ok() && def) st = UpdateUser(v1::ACCOUNT_OP_MODIFY, name, *def, true);
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
