// Workload traces as muster-sim reads them: a file a site or a stranger hands to the tool. The
// same bytes go through every reader (SWF, Philly's table, openb's pods and node list, the
// documented CSV and sacct -P output). Each either refuses the text with a message or gives
// jobs the replay can turn into submissions without overflow: times and counts within the
// bounds trace.h names, in submit order; a node list gives a cluster within them.
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "muster/sim/csv.h"
#include "muster/sim/openb.h"
#include "muster/sim/philly.h"
#include "muster/sim/swf.h"
#include "muster/sim/trace.h"

namespace {

using muster::sim::kMaxTraceGpus;
using muster::sim::kMaxTraceMemMb;
using muster::sim::kMaxTraceNodes;
using muster::sim::kMaxTraceProcs;
using muster::sim::kMaxTraceSeconds;

void CheckJobs(const muster::sim::Trace& t) {
  int64_t last = 0;
  for (const muster::sim::SimJob& j : t.jobs) {
    FUZZ_CHECK(j.submit_s >= last && j.submit_s <= kMaxTraceSeconds);
    last = j.submit_s;
    FUZZ_CHECK(j.run_s > 0 && j.run_s <= kMaxTraceSeconds);
    FUZZ_CHECK(j.req_time_s >= 0 && j.req_time_s <= kMaxTraceSeconds);
    FUZZ_CHECK(j.traced_wait_s >= -1 && j.traced_wait_s <= kMaxTraceSeconds);
    FUZZ_CHECK(j.procs >= 1 && j.procs <= kMaxTraceProcs);
    FUZZ_CHECK(j.gpus <= kMaxTraceGpus);
    FUZZ_CHECK(j.nodes <= kMaxTraceNodes);
    FUZZ_CHECK(j.mem_mb <= kMaxTraceMemMb);
  }
  // A trace lists at most the first 100 lines it skipped (and sacct's first 100 ids that are not
  // numbers), then counts: never a note per line of a long file.
  FUZZ_CHECK(t.notes.size() <= 2 * 100 + 32);
}

template <typename R>
void Check(const R& r) {
  if (r.ok())
    CheckJobs(*r);
  else
    FUZZ_CHECK(!r.status().message().empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  {
    std::istringstream in(text);
    const muster::sim::SwfTrace swf = muster::sim::ReadSwf(in);
    FUZZ_CHECK(swf.skipped.size() <= muster::sim::kMaxSkippedKept);
    FUZZ_CHECK(swf.skipped_count >= swf.skipped.size());
    if (swf.max_procs) FUZZ_CHECK(*swf.max_procs >= 0 && *swf.max_procs <= kMaxTraceNodes);
    if (swf.max_nodes) FUZZ_CHECK(*swf.max_nodes >= 0 && *swf.max_nodes <= kMaxTraceNodes);
    CheckJobs(muster::sim::SwfToTrace(swf));
  }
  Check(muster::sim::ReadPhilly(text));
  Check(muster::sim::ReadPhilly(text, {1}));
  Check(muster::sim::ReadOpenbPods(text));
  Check(muster::sim::ReadCsvTrace(text));
  Check(muster::sim::ReadSacct(text));
  auto cluster = muster::sim::ReadOpenbNodes(text);
  if (cluster.ok()) {
    FUZZ_CHECK(!cluster->nodes.empty());
    for (const muster::NodeConfig& n : cluster->nodes) {
      FUZZ_CHECK(n.cpus >= 1 && n.cpus <= muster::sim::kMaxOpenbNodeCpus);
      FUZZ_CHECK(n.gpus <= muster::sim::kMaxOpenbNodeGpus);
      FUZZ_CHECK(n.memory_mb >= 1 && n.memory_mb <= kMaxTraceMemMb);
    }
  } else {
    FUZZ_CHECK(!cluster.status().message().empty());
  }
  return 0;
}
