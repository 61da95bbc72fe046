#include "muster/sim/philly.h"

#include <algorithm>
#include <vector>

#include "table_text.h"

namespace muster::sim {

Result<Trace> ReadPhilly(std::string_view text, const PhillyOptions& options) {
  const int64_t per_node = std::max<uint32_t>(options.gpus_per_node, 1);
  Trace t;
  t.format = "philly";
  table::Skips skips;
  std::optional<table::Header> header;
  Status error;
  std::optional<size_t> c_index, c_run, c_wait, c_submit, c_gpus;
  std::vector<std::string_view> f;
  uint64_t read = 0, gpuless = 0, uneven = 0;
  table::ForEachLine(text, [&](uint64_t number, std::string_view line) {
    if (table::IsBlank(line)) return true;
    if (!header) {
      auto h = table::ReadHeader(line, ',', "the Philly table");
      if (!h.ok()) {
        error = h.status();
        return false;
      }
      header = std::move(*h);
      c_index = header->Find("index");
      if (!c_index && !header->names.empty() && header->names[0].empty()) c_index = 0;
      c_run = header->Find("run_time");
      c_wait = header->Find("wait_time");
      c_submit = header->Find("submit_time");
      c_gpus = header->Find("gpu_num");
      std::string missing;
      for (auto [name, col] : {std::pair{"index (the first, unnamed column)", c_index},
                               {"run_time", c_run},
                               {"submit_time", c_submit},
                               {"gpu_num", c_gpus}}) {
        if (!col) missing += (missing.empty() ? "" : ", ") + std::string(name);
      }
      if (!missing.empty()) {
        error = InvalidArgument(
            "not a Philly job table (,run_time,wait_time,submit_time,gpu_num)"
            ": its header (line " +
            std::to_string(number) + ") has no " + missing);
        return false;
      }
      return true;
    }
    table::SplitFields(line, ',', f);
    if (f.size() != header->columns) {
      skips.Add(number, "malformed: skipped",
                std::to_string(header->columns) + " columns expected, " + std::to_string(f.size()) +
                    " found");
      return true;
    }
    int64_t v[5] = {0, 0, -1, 0, 0};  // index, run, wait, submit, gpus
    const std::optional<size_t> cols[5] = {c_index, c_run, c_wait, c_submit, c_gpus};
    for (size_t k = 0; k < 5; ++k) {
      if (!cols[k]) continue;
      auto n = table::Integer(f[*cols[k]]);
      if (!n) {
        skips.Add(
            number, "malformed: skipped",
            header->names[*cols[k]] + " is not an integer: '" + table::Shown(f[*cols[k]]) + "'");
        return true;
      }
      v[k] = *n;
    }
    ++read;
    const int64_t index = v[0], run = v[1], wait = v[2], submit = v[3], gpus = v[4];
    if (run <= 0) {
      skips.Add(number, "run_time <= 0: dropped", "run_time " + std::to_string(run));
      return true;
    }
    if (gpus < 0) {
      skips.Add(number, "gpu_num < 0: dropped", "gpu_num " + std::to_string(gpus));
      return true;
    }
    // Past these, the node count below and the replay's milliseconds would overflow.
    if (!table::InTimeRange(submit)) {
      skips.Add(number, table::kOutOfRange, table::TimeOutOfRange("submit_time", submit));
      return true;
    }
    if (run > kMaxTraceSeconds) {
      skips.Add(number, table::kOutOfRange, table::TimeOutOfRange("run_time", run));
      return true;
    }
    if (gpus > kMaxTraceGpus) {
      skips.Add(number, table::kOutOfRange, table::CountOutOfRange("gpu_num", gpus, kMaxTraceGpus));
      return true;
    }
    SimJob j;
    j.trace_id = index;
    j.submit_s = submit;
    j.run_s = run;
    j.req_time_s = run;
    j.gpus = static_cast<uint32_t>(gpus);
    j.procs = std::max<uint32_t>(j.gpus, 1);
    j.nodes = static_cast<uint32_t>(std::max<int64_t>((gpus + per_node - 1) / per_node, 1));
    if (gpus == 0) ++gpuless;
    if (gpus > per_node && gpus % per_node != 0) ++uneven;
    j.user = "philly";
    j.traced_wait_s = table::InTimeRange(wait) ? wait : -1;
    t.jobs.push_back(std::move(j));
    return true;
  });
  if (!error.ok()) return error;
  if (!header) return InvalidArgument("the Philly table is empty (no header line)");
  if (read == 0 && skips.total() > 0) {
    return InvalidArgument("not a Philly job table: no line could be read (" + skips.First() + ")");
  }
  t.skipped = skips.total();
  skips.AppendNotes(t.notes);
  t.notes.push_back(
      "the Philly table has no requested times: each job's run time is its time limit (perfect "
      "estimates)");
  t.notes.push_back(
      "the Philly table has no users or virtual clusters: every job is user 'philly', no account");
  if (gpuless > 0) {
    t.notes.push_back(std::to_string(gpuless) + " jobs use no GPU: one CPU each");
  }
  if (uneven > 0) {
    t.notes.push_back(std::to_string(uneven) + " jobs use more GPUs than a node has (" +
                      std::to_string(per_node) +
                      ") but not a multiple: their node count is rounded up, each node giving "
                      "GPUs / nodes rounded up");
  }
  table::SortAndRebase(t);
  return t;
}

}  // namespace muster::sim
