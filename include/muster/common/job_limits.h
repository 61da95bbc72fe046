// How big a job's parts may be. The CLI refuses an oversized job before sending it, the
// controller refuses it before doing any work on it, and the agent channel is sized so that the
// largest job the controller accepts always fits in one launch message.
#pragma once

#include <cstddef>
#include <cstdint>

namespace muster {

inline constexpr size_t kMaxScriptBytes = 4u << 20;       // a batch script
inline constexpr size_t kMaxEnvironmentBytes = 1u << 20;  // all of it, KEY=VALUE entries
inline constexpr size_t kMaxEnvironmentEntries = 16384;
inline constexpr size_t kMaxArgumentBytes = 128u << 10;  // one entry (Linux MAX_ARG_STRLEN)
inline constexpr size_t kMaxScriptArgsBytes = 256u << 10;
inline constexpr size_t kMaxScriptArgs = 4096;
inline constexpr size_t kMaxPathBytes = 4096;        // a directory or an output pattern (PATH_MAX)
inline constexpr size_t kMaxNameBytes = 1024;        // a job name
inline constexpr size_t kMaxShortStringBytes = 256;  // a partition, GPU type, GRES or host name
inline constexpr size_t kMaxExpressionBytes = 4096;  // --constraint, --array
inline constexpr size_t kMaxListEntries = 64;        // partitions, GRES items
inline constexpr int kMaxPatternWidth = 64;          // %NNj: zero-padding in output patterns
inline constexpr size_t kMaxJobIdsPerRequest = 10'000;  // one cancel, hold, release or requeue
inline constexpr uint32_t kMaxArrayTasks = 4'000'001;   // the highest max_array_size there can be

// A request to the controller's API: the largest job fits, nothing much larger is read.
inline constexpr uint32_t kMaxApiRequestBytes = 8u << 20;
static_assert(kMaxScriptBytes + kMaxEnvironmentBytes + kMaxScriptArgsBytes + (1u << 20) <
                  kMaxApiRequestBytes,
              "the largest job must fit in one submission");

// The agent channel's message size limit (both ends): a launch carries the whole job.
inline constexpr size_t kMaxAgentMessageBytes = 16u << 20;
static_assert(kMaxScriptBytes + kMaxEnvironmentBytes + kMaxScriptArgsBytes + (1u << 20) <
                  kMaxAgentMessageBytes,
              "the largest job must fit in one launch message");

// A step's stdin that srun may have sent a node beyond what the tasks there have taken; the
// node stops reading srun's connection only past twice this (a client that ignores the window).
inline constexpr size_t kStepStdinWindow = 2u << 20;

// srun --bcast: the largest program srun copies to a step's nodes (refused above it, before
// anything is allocated), and the most one frame of it (type 5) carries on a step connection.
inline constexpr uint64_t kMaxBcastBytes = uint64_t{1} << 30;
inline constexpr size_t kBcastChunk = 1u << 20;

}  // namespace muster
