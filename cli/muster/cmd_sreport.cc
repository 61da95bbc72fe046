// sreport: `cluster AccountUtilizationByUser` and `cluster UserUtilizationByAccount` in
// sreport's layout, from the same job records as `muster report usage` (usage_window.h). Usage
// is CPU time by default; -T gres/gpu (or cpu,gres/gpu) reports GPU time with a TRES Name column.
// An account's line is its whole subtree's; root's is the cluster's.
#include <pwd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "cli.h"
#include "muster/common/duration.h"
#include "muster/common/strings.h"
#include "options.h"
#include "output.h"
#include "usage_window.h"

namespace muster::cli {
namespace {

struct Options {
  bool header = true;
  std::string sep;        // "" for columns; "|" parsable
  bool trailing = false;  // -p: a separator after the last field too
  int64_t unit_s = 60;    // -t: minutes (default), hours, seconds
  std::string unit_name = "Minutes";
  std::vector<std::string> tres = {"cpu"};
  int64_t start = 0, end = 0;
  std::set<std::string> accounts, users;
  std::string clusters;  // -M or cluster=: must name this cluster (or be "all")
};

std::string ProperName(const std::string& user) {
  struct passwd pw, *out = nullptr;
  char buf[4096];
  if (getpwnam_r(user.c_str(), &pw, buf, sizeof buf, &out) != 0 || !out || !pw.pw_gecos) {
    return "";
  }
  std::string g = pw.pw_gecos;
  return g.substr(0, g.find(','));
}

struct Column {
  std::string name;
  size_t width;
};

class Table {
 public:
  Table(const Options& o, std::vector<Column> cols) : o_(o), cols_(std::move(cols)) {}
  void Header() const {
    std::vector<std::string> names;
    for (const Column& c : cols_) names.push_back(c.name);
    Row(names);
    if (!o_.sep.empty()) return;
    std::string dashes;
    for (const Column& c : cols_) dashes += std::string(c.width, '-') + " ";
    std::printf("%s\n", dashes.c_str());
  }
  void Row(const std::vector<std::string>& v) const {
    std::string line;
    for (size_t k = 0; k < cols_.size(); ++k) {
      const std::string& s = k < v.size() ? v[k] : std::string();
      if (o_.sep.empty()) {
        // Right-aligned and cut to the width, as sreport's (a cut value ends in '+').
        std::string cell = s.size() > cols_[k].width ? s.substr(0, cols_[k].width - 1) + "+" : s;
        line += Right(cell, cols_[k].width) + " ";
      } else {
        line += s;
        if (k + 1 < cols_.size() || o_.trailing) line += o_.sep;
      }
    }
    std::printf("%s\n", line.c_str());
  }

 private:
  const Options& o_;
  std::vector<Column> cols_;
};

std::string Amount(double seconds, const Options& o) {
  return std::to_string(static_cast<long long>(std::llround(seconds / o.unit_s)));
}

int Report(const std::string& which, const Options& o) {
  auto controller = ConnectController(o.clusters);
  if (!controller.ok()) return Fail("report", controller.status());
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  auto info = controller->ControllerInfo();
  const std::string cluster = info.ok() ? info->cluster_name() : "cluster";
  v1::ListAccountsResponse tree;
  if (Status st = controller->Call(v1::METHOD_LIST_ACCOUNTS, v1::ListAccountsRequest(), &tree);
      !st.ok()) {
    return Fail("report", st);
  }
  auto used = UsageInWindow(*controller, o.start, o.end,
                            std::vector<std::string>(o.users.begin(), o.users.end()), now);
  if (!used.ok()) return Fail("report", used.status());

  // Usage per (account, user), per TRES; an account's parent chain for subtree totals.
  std::map<std::string, std::string> parent;
  std::vector<std::string> order;  // parents before children, root first
  for (const auto& a : tree.accounts()) {
    parent[a.name()] = a.name() == "root" ? "" : a.parent();
    order.push_back(a.name());
  }
  if (order.empty() || order.front() != "root") order.insert(order.begin(), "root");
  using Key = std::pair<std::string, std::string>;
  std::map<Key, std::vector<double>> assoc;          // (account, user) -> per TRES
  std::map<std::string, std::vector<double>> whole;  // account subtree -> per TRES
  const size_t nt = o.tres.size();
  for (const JobUsage& j : *used) {
    std::vector<double> v(nt);
    for (size_t k = 0; k < nt; ++k) v[k] = o.tres[k] == "cpu" ? j.cpu_s : j.gpu_s;
    // A job that charged no account (run before any existed) counts in root's line only.
    const std::string account = j.account.empty() ? "root" : j.account;
    if (!j.account.empty()) {
      auto& a = assoc[{account, j.user}];
      a.resize(nt);
      for (size_t k = 0; k < nt; ++k) a[k] += v[k];
    }
    std::set<std::string> seen;
    for (std::string at = account; !at.empty() && seen.insert(at).second;) {
      auto& w = whole[at];
      w.resize(nt);
      for (size_t k = 0; k < nt; ++k) w[k] += v[k];
      if (!parent.count(at)) {
        if (at != "root") order.push_back(at);  // charged, but not in the tree (no accounts)
        at = at == "root" ? "" : "root";
      } else {
        at = parent[at];
      }
    }
  }
  // Every association, with its usage (zero included), as sreport lists them.
  for (const auto& u : tree.users()) {
    for (const auto& a : u.accounts()) assoc.try_emplace({a, u.name()}, std::vector<double>(nt));
  }
  auto shown = [&](const std::string& account) {
    if (o.accounts.empty()) return true;
    return o.accounts.count(account) > 0;
  };

  const bool tres_column = !(nt == 1 && o.tres[0] == "cpu");
  const bool by_user = which == "accountutilizationbyuser";
  if (o.header) {
    const std::string rule(80, '-');
    std::printf("%s\n%s %s - %s (%lld secs)\n", rule.c_str(),
                by_user ? "Cluster/Account/User Utilization" : "Cluster/User/Account Utilization",
                FormatTimestamp(o.start).c_str(), FormatTimestamp(o.end - 1000).c_str(),
                static_cast<long long>((o.end - o.start) / 1000));
    std::printf("Usage reported in %s %s\n%s\n", tres_column ? "TRES" : "CPU", o.unit_name.c_str(),
                rule.c_str());
  }
  std::vector<Column> cols = {{"Cluster", 9}};
  if (by_user) {
    cols.insert(cols.end(), {{"Account", 15}, {"Login", 9}, {"Proper Name", 15}});
  } else {
    cols.insert(cols.end(), {{"Login", 9}, {"Proper Name", 15}, {"Account", 15}});
  }
  if (tres_column) {
    cols.insert(cols.end(), {{"TRES Name", 14}, {"Used", 9}});
  } else {
    cols.insert(cols.end(), {{"Used", 8}, {"Energy", 8}});
  }
  Table t(o, cols);
  if (o.header) t.Header();
  auto emit = [&](const std::string& account, const std::string& user,
                  const std::vector<double>& v) {
    for (size_t k = 0; k < nt; ++k) {
      std::vector<std::string> row = {cluster};
      const std::string proper = user.empty() ? "" : ProperName(user);
      if (by_user) {
        row.insert(row.end(), {account, user, proper});
      } else {
        row.insert(row.end(), {user, proper, account});
      }
      const double value = k < v.size() ? v[k] : 0;
      if (tres_column) {
        row.insert(row.end(), {o.tres[k], Amount(value, o)});
      } else {
        row.insert(row.end(), {Amount(value, o), "0"});
      }
      t.Row(row);
    }
  };
  if (by_user) {
    for (const std::string& account : order) {
      if (!shown(account)) continue;
      auto w = whole.find(account);
      emit(account, "", w == whole.end() ? std::vector<double>(nt) : w->second);
      for (const auto& [key, v] : assoc) {
        if (key.first == account && (o.users.empty() || o.users.count(key.second))) {
          emit(account, key.second, v);
        }
      }
    }
    return kExitOk;
  }
  // By user: each (user, account) with usage, the most first.
  std::vector<std::pair<Key, std::vector<double>>> rows;
  for (const auto& [key, v] : assoc) {
    if (!shown(key.first) || (!o.users.empty() && !o.users.count(key.second))) continue;
    double sum = 0;
    for (double x : v) sum += x;
    if (sum > 0) rows.emplace_back(key, v);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.second.front() > b.second.front();
  });
  for (const auto& [key, v] : rows) emit(key.first, key.second, v);
  return kExitOk;
}

}  // namespace

int CmdSreport(int argc, char** argv) {
  constexpr const char* kUsage =
      "Usage: sreport [-n] [-P|-p] [-t minutes|hours|seconds] [-T cpu|gres/gpu|cpu,gres/gpu]\n"
      "               [-M CLUSTER] cluster AccountUtilizationByUser|UserUtilizationByAccount\n"
      "               [start=TIME] [end=TIME] [accounts=A,B] [users=U,V]\n"
      "Usage inside the window (default: yesterday), from the controller's job records; an\n"
      "account's line is its whole subtree's.\n";
  Options o;
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  auto today = ParseWhen("today", now);
  if (!today.ok()) return Fail("report", today.status());
  o.start = *today - 86'400'000;
  o.end = *today;
  std::vector<std::string> words;
  enum { kFederation = 1000, kLocal };
  const struct option opts[] = {{"noheader", no_argument, nullptr, 'n'},
                                {"all_clusters", no_argument, nullptr, 'a'},
                                {"cluster", required_argument, nullptr, 'M'},
                                {"clusters", required_argument, nullptr, 'M'},
                                {"federation", no_argument, nullptr, kFederation},
                                {"local", no_argument, nullptr, kLocal},
                                {"quiet", no_argument, nullptr, 'Q'},
                                {"verbose", no_argument, nullptr, 'v'},
                                {"parsable2", no_argument, nullptr, 'P'},
                                {"parsable", no_argument, nullptr, 'p'},
                                {"time-format", required_argument, nullptr, 't'},
                                {"tres", required_argument, nullptr, 'T'},
                                {"help", no_argument, nullptr, 'h'},
                                {nullptr, 0, nullptr, 0}};
  OptionReader in(argc, argv, "hnPpt:T:aM:Qv", opts);
  // The report's words come in order; options may come between and after them.
  for (int c; (c = in.Next()) != -1;) {
    switch (c) {
      case 'h':
        std::fputs(kUsage, stdout);
        return kExitOk;
      case 'n':
        o.header = false;
        break;
      case 'M':
        o.clusters = optarg;
        break;
      case 'a':          // all clusters: this one is all there is
      case kFederation:  // no federation to report on
      case kLocal:       // ...so the report is always the local cluster's
      case 'Q':          // sreport prints no warnings here to silence
      case 'v':          // nothing is logged on the way
        break;
      case 'P':
        o.sep = "|";
        break;
      case 'p':
        o.sep = "|";
        o.trailing = true;
        break;
      case 't': {
        const std::string u = ToLower(optarg);
        if (u == "minutes" || u == "minute" || u == "min" || u == "m") {
          o.unit_s = 60;
          o.unit_name = "Minutes";
        } else if (u == "hours" || u == "hour" || u == "h") {
          o.unit_s = 3600;
          o.unit_name = "Hours";
        } else if (u == "seconds" || u == "second" || u == "sec" || u == "s") {
          o.unit_s = 1;
          o.unit_name = "Seconds";
        } else {
          return Usage("report",
                       "-t " + std::string(optarg) + " is not supported (minutes, hours, seconds)");
        }
        break;
      }
      case 'T':
        o.tres.clear();
        for (const std::string& x : Split(ToLower(optarg), ',', true)) {
          if (x != "cpu" && x != "gres/gpu") {
            return Usage("report", "-T/--tres: TRES " + x + " is not supported (cpu, gres/gpu)");
          }
          o.tres.push_back(x);
        }
        if (o.tres.empty()) return Usage("report", "-T needs cpu or gres/gpu");
        break;
      case OptionReader::kWord:
        words.push_back(in.Word());
        break;
      default:  // not an option of sreport's, or -t/-T with nothing after it
        return Usage("report", "unknown option '" + in.Word() + "'");
    }
  }
  if (words.size() < 2 || ToLower(words[0]) != "cluster") {
    return Fail(
        "report",
        Unimplemented(words.empty() ? std::string("expected a report")
                                    : "report '" + Join(words, " ") +
                                          "' is not supported (cluster AccountUtilizationByUser, "
                                          "cluster UserUtilizationByAccount)"));
  }
  const std::string which = ToLower(words[1]);
  if (which != "accountutilizationbyuser" && which != "userutilizationbyaccount") {
    return Fail("report", Unimplemented("report cluster " + words[1] +
                                        " is not supported (AccountUtilizationByUser, "
                                        "UserUtilizationByAccount)"));
  }
  for (size_t k = 2; k < words.size(); ++k) {
    const size_t eq = words[k].find('=');
    const std::string key = ToLower(words[k].substr(0, eq));
    const std::string v = eq == std::string::npos ? "" : words[k].substr(eq + 1);
    if (key == "start" || key == "end") {
      auto when = ParseWhen(v, now);
      if (!when.ok()) return Usage("report", key + "=" + v + ": " + when.status().message());
      (key == "start" ? o.start : o.end) = *when;
    } else if (key == "accounts" || key == "account") {
      for (const auto& x : Split(v, ',', true)) o.accounts.insert(x);
    } else if (key == "users" || key == "user") {
      for (const auto& x : Split(v, ',', true)) o.users.insert(x);
    } else if (key == "cluster" || key == "clusters") {
      o.clusters = v;  // checked against the config's cluster_name, as -M
    } else {
      return Fail("report", Unimplemented("'" + words[k] +
                                          "' is not supported (start=, end=, accounts=, "
                                          "users=)"));
    }
  }
  if (o.end <= o.start) return Usage("report", "end must come after start");
  return Report(which, o);
}

}  // namespace muster::cli
