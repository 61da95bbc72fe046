// muster explain JOB: why a job waits, in counts, and what would let it start.
#include <cstdio>
#include <optional>

#include "cli.h"
#include "muster/common/clock.h"
#include "muster/common/duration.h"
#include "muster/common/strings.h"
#include "options.h"
#include "output.h"

namespace muster::cli {
namespace {

std::string At(int64_t ms, int64_t now) {
  if (ms <= 0) return "no time limit";
  if (ms <= now) return "now";
  return FormatTimestamp(ms) + " (in " + FormatDuration(ms - now) + ")";
}

void PrintExplanation(const v1::JobExplanation& x, int64_t now) {
  std::string out;
  auto line = [&](const std::string& l) {  // users' text in it shown, never obeyed
    AppendPrintable(out, l);
    out += '\n';
  };
  line("Job " + std::to_string(x.job_id()) + " (" + x.name() + ", user " + x.user() + "): " +
       JobStateName(x.state(), false) + (x.state() == v1::PENDING ? ", reason " + x.reason() : ""));
  line("  asks for " + x.shape());
  if (x.state() != v1::PENDING) {
    line("  " + x.summary());
    std::fputs(out.c_str(), stdout);
    return;
  }
  if (!x.reason_detail().empty()) line("  " + x.reason_detail());
  const v1::PriorityFactors& f = x.priority_factors();
  if (x.rank() > 0) {
    line("Priority " + std::to_string(x.priority()) + ": rank " + std::to_string(x.rank()) +
         " of " + std::to_string(x.pending_total()) + " pending jobs in its partitions");
  } else {
    line("Priority " + std::to_string(x.priority()) + ": not in the queue yet (" + x.reason() +
         ")");
  }
  line("  factors: age " + Factor(f.age()) + "  size " + Factor(f.size()) + "  partition " +
       Factor(f.partition()) + "  qos " + Factor(f.qos()) + "  fairshare " + Factor(f.fairshare()) +
       "  nice " + std::to_string(f.nice()));
  for (const v1::LimitHeld& l : x.limits()) {
    line("Limit " + l.reason() + ": " + l.what());
    line("  " + std::to_string(l.used()) + " of " + std::to_string(l.max()) +
         " in use, this job needs " + std::to_string(l.need()) + ", " + std::to_string(l.over()) +
         " over");
    line("  it can start " + l.frees());
  }
  if (x.expected_start_ms() > 0) {
    line(std::string(x.reserved() ? "Reserved start: " : "Expected start: ") +
         At(x.expected_start_ms(), now) +
         (x.reserved() ? "" : " (an estimate: no reservation holds it yet)"));
  } else {
    line("Expected start: unknown");
  }
  for (const v1::PartitionExplanation& p : x.partitions()) {
    line("Partition " + p.name() + ": " + std::to_string(p.nodes()) + " nodes; the job needs " +
         std::to_string(p.needed()) + ", " + std::to_string(p.fit_now()) +
         " could take one of its slots now");
    for (const v1::NodeGroup& g : p.groups()) {
      std::string what = g.verdict() == "fits_now" ? "can take it now" : g.cause();
      if (g.verdict() == "unavailable") what = "unavailable: " + what;
      line("  " + Right(std::to_string(g.count()), 5) + (g.count() == 1 ? " node   " : " nodes  ") +
           Left(what, 44) + " " + g.nodes());
    }
    if (!p.never().empty()) {
      line("  never: " + p.never());
    } else if (p.gang_now().empty()) {
      line("  the whole gang fits now");
    } else {
      line("  now: " + p.gang_now());
    }
  }
  if (x.holding_total() > 0) {
    line("Held by " + std::to_string(x.holding_total()) + " running job" +
         (x.holding_total() == 1 ? "" : "s") + " on the busy nodes, first to end:");
    for (const v1::HoldingJob& h : x.holding()) {
      line("  job " + std::to_string(h.job_id()) + " (" + h.user() + ") on " + h.nodes() +
           ", ends " + At(h.end_ms(), now));
    }
  }
  if (x.reservations_ahead_total() > 0) {
    line(std::to_string(x.reservations_ahead_total()) + " reservation" +
         (x.reservations_ahead_total() == 1 ? "" : "s") + " ahead of it on those nodes:");
    for (const v1::ReservationAhead& r : x.reservations_ahead()) {
      line("  job " + std::to_string(r.job_id()) + " from " + FormatTimestamp(r.start_ms()) +
           (r.end_ms() > 0 ? " to " + FormatTimestamp(r.end_ms()) : " (no time limit)") + " on " +
           r.nodes() + " in " + r.partition());
    }
  }
  if (x.changes_size() > 0) {
    line("What would change it:");
    for (const std::string& c : x.changes()) line("  - " + c);
  }
  std::fputs(out.c_str(), stdout);
}

void ExplanationJson(JsonWriter& w, const v1::JobExplanation& x) {
  w.BeginObject();
  w.Field("job_id", x.job_id()).Field("name", x.name()).Field("user", x.user());
  w.Field("state", JobStateName(x.state(), false)).Field("reason", x.reason());
  w.Field("reason_detail", x.reason_detail()).Field("shape", x.shape());
  w.Field("summary", x.summary());
  w.Field("priority", x.priority()).Field("rank", x.rank());
  w.Field("pending_total", x.pending_total());
  const v1::PriorityFactors& f = x.priority_factors();
  w.Key("priority_factors").BeginObject();
  w.Field("age", f.age()).Field("size", f.size()).Field("partition", f.partition());
  w.Field("qos", f.qos()).Field("fairshare", f.fairshare()).Field("nice", f.nice());
  w.EndObject();
  w.Field("expected_start_time", x.expected_start_ms() / 1000).Field("reserved", x.reserved());
  w.Key("partitions").BeginArray();
  for (const auto& p : x.partitions()) {
    w.BeginObject().Field("name", p.name()).Field("nodes", p.nodes());
    w.Field("needed", p.needed()).Field("fit_now", p.fit_now());
    w.Field("gang_now", p.gang_now()).Field("never", p.never());
    w.Key("groups").BeginArray();
    for (const auto& g : p.groups()) {
      w.BeginObject().Field("verdict", g.verdict()).Field("cause", g.cause());
      w.Field("count", g.count()).Field("nodes", g.nodes()).EndObject();
    }
    w.EndArray().EndObject();
  }
  w.EndArray();
  w.Field("holding_total", x.holding_total()).Key("holding").BeginArray();
  for (const auto& h : x.holding()) {
    w.BeginObject().Field("job_id", h.job_id()).Field("user", h.user());
    w.Field("nodes", h.nodes()).Field("end_time", h.end_ms() / 1000).EndObject();
  }
  w.EndArray();
  w.Field("reservations_ahead_total", x.reservations_ahead_total());
  w.Key("reservations_ahead").BeginArray();
  for (const auto& r : x.reservations_ahead()) {
    w.BeginObject().Field("job_id", r.job_id()).Field("partition", r.partition());
    w.Field("start_time", r.start_ms() / 1000).Field("end_time", r.end_ms() / 1000);
    w.Field("nodes", r.nodes()).EndObject();
  }
  w.EndArray();
  w.Key("limits").BeginArray();
  for (const auto& l : x.limits()) {
    w.BeginObject().Field("reason", l.reason()).Field("what", l.what());
    w.Field("used", l.used()).Field("max", l.max()).Field("need", l.need());
    w.Field("over", l.over()).Key("freeing_jobs").BeginArray();
    for (uint64_t j : l.freeing_jobs()) w.Uint(j);
    w.EndArray().Field("free_at", l.free_at_ms() / 1000).Field("frees", l.frees()).EndObject();
  }
  w.EndArray();
  w.Key("changes").BeginArray();
  for (const auto& c : x.changes()) w.String(c);
  w.EndArray().EndObject();
}

}  // namespace

int CmdExplain(int argc, char** argv) {
  bool json = false;
  std::string id_text;
  // The id comes in order, so a second one is refused before a later --help.
  auto id_word = [&](const std::string& word) -> std::optional<int> {
    if (!id_text.empty()) return Usage("explain", "expected one job id");
    id_text = word;
    return std::nullopt;
  };
  if (std::optional<int> rc = ReadJsonOption(
          "explain", "unknown option", argc, argv,
          "Usage: muster explain JOB [--json]\n"
          "Why a job waits: its priority rank and factors, every node of its partitions judged\n"
          "(counted by cause), the running jobs and reservations ahead of it, when it is\n"
          "expected to start, and what would let it start sooner.\n",
          &json, id_word)) {
    return *rc;
  }
  auto id = ParseUint(id_text);
  if (!id || *id == 0) return Usage("explain", "expected a job id, got '" + id_text + "'");
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("explain", controller.status());
  auto resp = controller->ExplainJob(*id);
  if (!resp.ok()) return Fail("explain", resp.status());
  if (json) {
    JsonWriter w;
    ExplanationJson(w, resp->explanation());
    std::printf("%s\n", w.str().c_str());
    return kExitOk;
  }
  PrintExplanation(resp->explanation(), SystemClock::Get()->NowMs());
  return kExitOk;
}

}  // namespace muster::cli
