// muster report usage: GPU- and CPU-hours by account, user and GPU type over a time window, from
// the controller's job records (what sreport's AccountUtilizationByUser and
// UserUtilizationByAccount tell, in GPU-hours). Jobs that ran across the window's edges count
// for the part inside it; running jobs count up to now.
#include <getopt.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <tuple>

#include "cli.h"
#include "muster/common/duration.h"
#include "muster/common/strings.h"
#include "output.h"
#include "usage_window.h"

namespace muster::cli {
namespace {

void PrintReportHelp() {
  std::printf(
      "Usage: muster report usage [--start TIME] [--end TIME] [--account A,B] [--user U,V]\n"
      "                           [--by account,user,gpu-type] [--json]\n"
      "GPU-hours and CPU-hours used in a time window, by account, user and GPU type (the\n"
      "dimensions --by names; default account,user), most first, with a total.\n"
      "  -S, --start TIME   default: yesterday 00:00 (times as sacct's: 2026-11-24T08:00, "
      "now-7days)\n"
      "  -E, --end TIME     default: today 00:00\n"
      "  -A, --account LIST  -u, --user LIST   only these (a user sees its own jobs only where "
      "the\n"
      "                     cluster keeps jobs private)\n");
}

struct Totals {
  double gpu_s = 0, cpu_s = 0;
  uint64_t jobs = 0;
};

std::string Hours(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", seconds / 3600.0);
  return buf;
}

}  // namespace

int CmdReport(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) != "usage") {
    if (argc >= 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
      PrintReportHelp();
      return kExitOk;
    }
    return Usage("report", "expected 'muster report usage [OPTIONS]'");
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  auto today = ParseWhen("today", now);
  if (!today.ok()) return Fail("report", today.status());
  int64_t start = *today - 86'400'000, end = *today;
  std::vector<std::string> accounts, users, by = {"account", "user"};
  bool json = false;
  const struct option opts[] = {
      {"start", required_argument, nullptr, 'S'},   {"end", required_argument, nullptr, 'E'},
      {"account", required_argument, nullptr, 'A'}, {"user", required_argument, nullptr, 'u'},
      {"by", required_argument, nullptr, 'b'},      {"json", no_argument, nullptr, 'j'},
      {"help", no_argument, nullptr, 'h'},          {nullptr, 0, nullptr, 0}};
  optind = 2;
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":S:E:A:u:h", opts, nullptr)) != -1;) {
    switch (c) {
      case 'S':
      case 'E': {
        auto when = ParseWhen(optarg, now);
        if (!when.ok()) return Usage("report", when.status().message());
        (c == 'S' ? start : end) = *when;
        break;
      }
      case 'A':
        accounts = Split(optarg, ',', true);
        break;
      case 'u':
        users = Split(optarg, ',', true);
        break;
      case 'b':
        by = Split(optarg, ',', true);
        for (const auto& d : by) {
          if (d != "account" && d != "user" && d != "gpu-type") {
            return Usage("report", "--by takes account, user and gpu-type, not '" + d + "'");
          }
        }
        break;
      case 'j':
        json = true;
        break;
      case 'h':
        PrintReportHelp();
        return kExitOk;
      default:
        return Usage("report", "unknown or incomplete option");
    }
  }
  if (optind < argc)
    return Usage("report", "unexpected argument '" + std::string(argv[optind]) + "'");
  if (end <= start) return Usage("report", "--end must come after --start");
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("report", controller.status());
  auto used = UsageInWindow(*controller, start, end, users, now);
  if (!used.ok()) return Fail("report", used.status());

  const bool by_account = std::count(by.begin(), by.end(), "account") > 0;
  const bool by_user = std::count(by.begin(), by.end(), "user") > 0;
  const bool by_type = std::count(by.begin(), by.end(), "gpu-type") > 0;
  using Key = std::tuple<std::string, std::string, std::string>;
  std::map<Key, Totals> rows;
  Totals total;
  for (const JobUsage& j : *used) {
    if (!accounts.empty() &&
        std::find(accounts.begin(), accounts.end(), j.account) == accounts.end()) {
      continue;
    }
    Key key{by_account ? (j.account.empty() ? "(none)" : j.account) : "", by_user ? j.user : "",
            by_type ? j.gpu_type : ""};
    Totals& t = rows[key];
    t.gpu_s += j.gpu_s;
    t.cpu_s += j.cpu_s;
    ++t.jobs;
    total.gpu_s += j.gpu_s;
    total.cpu_s += j.cpu_s;
    ++total.jobs;
  }
  std::vector<std::pair<Key, Totals>> sorted(rows.begin(), rows.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second.gpu_s > b.second.gpu_s; });
  if (json) {
    JsonWriter w;
    w.BeginObject().Field("start", start / 1000).Field("end", end / 1000).Key("rows").BeginArray();
    for (const auto& [key, t] : sorted) {
      w.BeginObject();
      if (by_account) w.Field("account", std::get<0>(key));
      if (by_user) w.Field("user", std::get<1>(key));
      if (by_type) w.Field("gpu_type", std::get<2>(key));
      w.Key("gpu_hours").Double(t.gpu_s / 3600.0);
      w.Key("cpu_hours").Double(t.cpu_s / 3600.0);
      w.Field("jobs", t.jobs).EndObject();
    }
    w.EndArray().Key("total").BeginObject();
    w.Key("gpu_hours").Double(total.gpu_s / 3600.0);
    w.Key("cpu_hours").Double(total.cpu_s / 3600.0);
    w.Field("jobs", total.jobs).EndObject().EndObject();
    std::printf("%s\n", w.str().c_str());
    return kExitOk;
  }
  std::printf("Usage from %s to %s (%lld s)\n", FormatTimestamp(start).c_str(),
              FormatTimestamp(end).c_str(), static_cast<long long>((end - start) / 1000));
  std::string head;
  if (by_account) head += Left("ACCOUNT", 16) + " ";
  if (by_user) head += Left("USER", 12) + " ";
  if (by_type) head += Left("GPU_TYPE", 10) + " ";
  head += Right("GPU_HOURS", 12) + " " + Right("CPU_HOURS", 12) + " " + Right("JOBS", 8);
  std::printf("%s\n", head.c_str());
  auto line = [&](const Key& key, const Totals& t) {
    std::string out;
    if (by_account) out += Left(std::get<0>(key), 16) + " ";
    if (by_user) out += Left(std::get<1>(key), 12) + " ";
    if (by_type) out += Left(std::get<2>(key), 10) + " ";
    out += Right(Hours(t.gpu_s), 12) + " " + Right(Hours(t.cpu_s), 12) + " " +
           Right(std::to_string(t.jobs), 8);
    std::printf("%s\n", out.c_str());
  };
  for (const auto& [key, t] : sorted) line(key, t);
  line(Key{by_account ? "TOTAL" : "", by_user && !by_account ? "TOTAL" : "",
           by_type && !by_account && !by_user ? "TOTAL" : ""},
       total);
  return kExitOk;
}

}  // namespace muster::cli
