// muster quota: the GPU quotas of accounts, with what their jobs use, borrow and lend now.
#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include "cli.h"
#include "options.h"
#include "output.h"

namespace muster::cli {

int CmdQuota(int argc, char** argv) {
  bool json = false;
  // A word is refused in its place, so the first bad one is named, before a later --help.
  if (std::optional<int> rc = ReadJsonOption(
          "quota", "unknown argument", argc, argv,
          "Usage: muster quota [--json]\n"
          "Each account's GPU quotas (set in [[accounts]] quota = {...} or with\n"
          "`muster account modify NAME --quota TYPE=G[:MAX[:LEND]] --cohort C`): guaranteed,\n"
          "max, what it lends at most, and now: GPUs in use, borrowed beyond its guarantee,\n"
          "and idle guaranteed GPUs lent to its cohort.\n",
          &json)) {
    return *rc;
  }
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("quota", controller.status());
  v1::ListAccountsResponse all;
  if (Status st = controller->Call(v1::METHOD_LIST_ACCOUNTS, v1::ListAccountsRequest(), &all);
      !st.ok()) {
    return Fail("quota", st);
  }
  std::map<std::string, const v1::AccountRecord*> accounts;
  for (const v1::AccountRecord& a : all.accounts()) accounts[a.name()] = &a;
  JsonWriter w;
  if (json) {
    w.BeginObject().Key("quotas").BeginArray();
  } else {
    std::printf("%-20s %-10s %-12s %10s %10s %8s %7s %8s %5s\n", "ACCOUNT", "GPU_TYPE", "COHORT",
                "GUARANTEED", "MAX", "LEND_MAX", "IN_USE", "BORROWED", "LENT");
  }
  for (const v1::QuotaUse& u : all.quota_use()) {
    auto it = accounts.find(u.account());
    if (it == accounts.end()) continue;
    const v1::AccountRecord& a = *it->second;
    auto qi = a.quotas().find(u.gpu_type());
    if (qi == a.quotas().end()) continue;
    const v1::GpuQuota& q = qi->second;
    const bool cohort = !a.cohort().empty();
    const std::string max = q.has_max() ? std::to_string(q.max())
                            : cohort    ? std::string("cohort")
                                        : std::to_string(q.guaranteed());
    const uint32_t lend = !cohort ? 0 : q.has_lending_limit() ? q.lending_limit() : q.guaranteed();
    if (json) {
      w.BeginObject()
          .Field("account", u.account())
          .Field("gpu_type", u.gpu_type())
          .Field("cohort", a.cohort())
          .Field("guaranteed", q.guaranteed());
      if (q.has_max()) w.Field("max", q.max());
      w.Field("lending_limit", lend)
          .Field("used", u.used())
          .Field("borrowed", u.borrowed())
          .Field("lent", u.lent())
          .EndObject();
    } else {
      std::printf("%-20s %-10s %-12s %10u %10s %8u %7llu %8llu %5llu\n", u.account().c_str(),
                  u.gpu_type().c_str(), cohort ? a.cohort().c_str() : "-", q.guaranteed(),
                  max.c_str(), lend, static_cast<unsigned long long>(u.used()),
                  static_cast<unsigned long long>(u.borrowed()),
                  static_cast<unsigned long long>(u.lent()));
    }
  }
  if (json) {
    w.EndArray().EndObject();
    std::printf("%s\n", w.str().c_str());
  }
  return kExitOk;
}

}  // namespace muster::cli
