// Alibaba PAI's "openb" GPU-sharing trace (cluster-trace-gpu-v2023, Weng et al., ATC'23): the
// pod list (openb_pod_list_default.csv, openb_pod_list_gpuspec33.csv)
//
//   name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
//   deletion_time,scheduled_time
//
// and the node list (openb_node_list_gpu_node.csv, openb_node_list_all_node.csv)
//
//   sn,cpu_milli,memory_mib,gpu,model
//
// Times in seconds from the trace's start. Pure: the caller opens (and decompresses) the files,
// or uses ReadOpenbNodesFile.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/sim/trace.h"

namespace muster::sim {

// The pods as the replay runs them, one job each: trace_id = the number that ends the pod's
// name (openb-pod-0042 -> 42; without one, the pod's row, from 0), submit_s = creation_time
// (from the earliest), run_s = deletion_time - scheduled_time, traced_wait_s = scheduled_time -
// creation_time, procs = ceil(cpu_milli / 1000) (at least 1), mem_mb = memory_mib, gpus =
// num_gpu, nodes = 1, gpu_types = gpu_spec's models ('|'-separated) lowercased (empty: any),
// req_time_s = run_s (the trace has no requested times), user "openb", account = qos (LS, BE,
// Burstable, Guaranteed); sorted by creation (stable).
//
// Left out, counted in Trace::skipped and listed by line in Trace::notes (the first 100): pods
// never scheduled (no scheduled_time: the 'Pending' ones, which waited until deleted), pods with
// no deletion_time, a run <= 0, malformed lines, and lines past trace.h's bounds (a time over
// 100 years, cpu_milli over 10,000,000 CPUs, num_gpu over 1,000,000, memory_mib over 1 PiB). Kept
// and noted: pods sharing a GPU (0 < gpu_milli < 1000), replayed as one whole GPU; pods still
// Running at the trace's end (their deletion_time is the trace's last one), whose run is cut there.
// INVALID_ARGUMENT when the header lacks a needed column (openb_pod_list_multigpu50.csv has no
// times), or no line could be read.
Result<Trace> ReadOpenbPods(std::string_view text);

// What a node of the node list may have (as the config takes): the controller keeps a slot for
// each CPU and GPU. Memory: at most kMaxTraceMemMb (1 PiB).
inline constexpr uint32_t kMaxOpenbNodeCpus = 1'000'000;
inline constexpr uint32_t kMaxOpenbNodeGpus = 1024;

// The node list as a muster.toml: one [[nodes]] entry per node (its name as the trace gives it,
// cpus = cpu_milli / 1000, memory_mb = memory_mib, gpus, gpu_type = model lowercased, none
// without GPUs) and one default partition "sim" of them all. INVALID_ARGUMENT for a header
// without those columns, a malformed line (its number named), a node without a CPU or memory,
// or with more than the bounds above; nodes are renamed node0..nodeN when a name is one the
// config would refuse, or named twice.
Result<std::string> OpenbNodesToToml(std::string_view text);
// The same, parsed as the controller would load it.
Result<Config> ReadOpenbNodes(std::string_view text);
// From a file, plain or gzip-compressed. NOT_FOUND when it does not exist.
Result<Config> ReadOpenbNodesFile(const std::string& path);

}  // namespace muster::sim
