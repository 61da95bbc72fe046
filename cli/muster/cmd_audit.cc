// muster audit: the controller's audit log (admins and operators).
#include <getopt.h>

#include <chrono>
#include <cstdio>

#include "cli.h"
#include "muster/common/duration.h"
#include "muster/common/strings.h"
#include "output.h"

namespace muster::cli {
namespace {

void PrintAuditHelp() {
  std::printf(
      "Usage: muster audit [--since TIME] [--until TIME] [--user NAME] [--limit N]\n"
      "                    [--oldest-first] [--json]\n"
      "What admins and operators did (drain, resume, cancel, hold, ... of others' jobs) and what\n"
      "anyone tried on what was not theirs, newest first. Admins and operators only.\n"
      "  -S, --since TIME   default: now-1days (times as sacct's: 2026-11-24T08:00, now-2hours)\n"
      "  -E, --until TIME   default: now\n"
      "  -u, --user NAME    only this user's actions\n"
      "      --limit N      at most N entries (default 1000, at most 10000)\n"
      "      --oldest-first the oldest entries of the window first\n"
      "      --json         one JSON document\n");
}

}  // namespace

int CmdAudit(int argc, char** argv) {
  v1::ListAuditRequest req;
  bool json = false;
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const struct option opts[] = {
      {"since", required_argument, nullptr, 'S'},  {"until", required_argument, nullptr, 'E'},
      {"user", required_argument, nullptr, 'u'},   {"limit", required_argument, nullptr, 'l'},
      {"oldest-first", no_argument, nullptr, 'O'}, {"json", no_argument, nullptr, 'j'},
      {"help", no_argument, nullptr, 'h'},         {nullptr, 0, nullptr, 0}};
  optind = 0;
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":S:E:u:h", opts, nullptr)) != -1;) {
    switch (c) {
      case 'S':
      case 'E': {
        auto when = ParseWhen(optarg, now);
        if (!when.ok()) return Usage("audit", when.status().message());
        c == 'S' ? req.set_since_ms(*when) : req.set_until_ms(*when);
        break;
      }
      case 'u':
        req.set_user(optarg);
        break;
      case 'l': {
        auto n = ParseUint(optarg);
        if (!n || *n == 0 || *n > 10'000) return Usage("audit", "bad --limit (1 to 10000)");
        req.set_limit(static_cast<uint32_t>(*n));
        break;
      }
      case 'O':
        req.set_oldest_first(true);
        break;
      case 'j':
        json = true;
        break;
      case 'h':
        PrintAuditHelp();
        return kExitOk;
      default:
        return Usage("audit", "unknown or incomplete option");
    }
  }
  if (optind < argc)
    return Usage("audit", "unexpected argument '" + std::string(argv[optind]) + "'");
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("audit", controller.status());
  v1::ListAuditResponse resp;
  if (Status st = controller->Call(v1::METHOD_LIST_AUDIT, req, &resp); !st.ok()) {
    return Fail("audit", st);
  }
  if (json) {
    JsonWriter w;
    w.BeginObject().Key("entries").BeginArray();
    for (const auto& e : resp.entries()) {
      w.BeginObject()
          .Field("time", e.time_ms() / 1000)
          .Field("user", e.user())
          .Field("uid", e.uid())
          .Field("origin", e.origin())
          .Field("role", e.role())
          .Field("action", e.action())
          .Field("target", e.target())
          .Field("detail", e.detail())
          .Field("allowed", e.allowed())
          .Field("result", e.result())
          .EndObject();
    }
    w.EndArray().Field("truncated", resp.truncated()).EndObject();
    std::printf("%s\n", w.str().c_str());
    return kExitOk;
  }
  std::printf("%-19s %-12s %-8s %-15s %-8s %-24s %s\n", "TIME", "USER", "ROLE", "FROM", "ACTION",
              "TARGET", "RESULT");
  for (const auto& e : resp.entries()) {
    std::string result = e.allowed() ? e.result() : "REFUSED: " + e.result();
    if (!e.detail().empty()) result += " [" + e.detail() + "]";
    std::printf("%-19s %-12s %-8s %-15s %-8s %-24s %s\n", FormatTimestamp(e.time_ms()).c_str(),
                Printable(e.user()).c_str(), Printable(e.role()).c_str(),
                Printable(e.origin()).c_str(), Printable(e.action()).c_str(),
                Printable(e.target()).c_str(), Printable(result).c_str());
  }
  if (resp.truncated()) {
    std::fprintf(stderr,
                 "muster audit: more entries match; narrow --since/--until or raise --limit\n");
  }
  return kExitOk;
}

}  // namespace muster::cli
