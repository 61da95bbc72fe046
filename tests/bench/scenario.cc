#include "scenario.h"

#include <algorithm>
#include <random>
#include <string>

#include "muster/core/scheduler.h"

namespace muster::bench {
namespace {

// GPUs per job in ../shared/traces/philly_df_schedule.csv (151,816 jobs), as (gpus, jobs).
constexpr std::pair<uint32_t, uint32_t> kPhilly[] = {
    {1, 122287}, {2, 3435}, {4, 11957}, {6, 2},  {7, 3},    {8, 11676}, {12, 17}, {14, 3},
    {16, 1910},  {20, 1},   {24, 119},  {28, 1}, {32, 333}, {48, 3},    {64, 57}, {128, 12}};

constexpr core::TimeMs kHour = 3600 * 1000;
constexpr core::TimeMs kLimits[] = {kHour, 4 * kHour, 12 * kHour, 24 * kHour, 72 * kHour};

}  // namespace

core::JobRequest PhillyRequest(uint64_t random, uint32_t gpus_per_node) {
  uint64_t total = 0;
  for (auto [g, n] : kPhilly) total += n;
  uint64_t pick = random % total;
  uint32_t gpus = 1;
  for (auto [g, n] : kPhilly) {
    if (pick < n) {
      gpus = g;
      break;
    }
    pick -= n;
  }
  core::JobRequest r;
  r.partitions = {"gpu"};
  if (gpus <= gpus_per_node) {
    r.nodes = 1;
    r.gpus_per_node = gpus;
  } else {
    r.nodes = (gpus + gpus_per_node - 1) / gpus_per_node;
    r.gpus_per_node = gpus_per_node;
  }
  r.tasks_per_node.assign(r.nodes, r.gpus_per_node);
  r.cpus_per_task = 8;
  r.mem_per_node_mb = 64'000ULL * r.gpus_per_node;
  r.time_limit_ms = kLimits[(random >> 32) % std::size(kLimits)];
  return r;
}

Scenario MakeScenario(const ScenarioSpec& spec) {
  Scenario s;
  s.now = 1'800'000'000'000;  // a fixed instant: results must not depend on the wall clock
  std::mt19937_64 rng(spec.seed);
  core::PartitionView p;
  p.name = "gpu";
  for (uint32_t i = 0; i < spec.nodes; ++i) {
    uint32_t leaf = i / spec.nodes_per_leaf;
    uint32_t spine = leaf / spec.leaves_per_spine;
    s.view.nodes.push_back(core::NodeView::Empty(
        "gpu" + std::to_string(i + 1), 128, 2'048'000, spec.gpus_per_node, "h100",
        "spine" + std::to_string(spine + 1) + "/leaf" + std::to_string(leaf + 1)));
    p.nodes.push_back(i);
  }
  s.view.partitions.push_back(p);

  // Running work with churn: pack Philly-sized jobs up to 30 points above the busy fraction,
  // then end random ones until it is reached, so free GPUs are scattered as on a live cluster.
  // Each survivor ends at a random point within its time limit.
  const uint64_t total_gpus = static_cast<uint64_t>(spec.nodes) * spec.gpus_per_node;
  const uint64_t target =
      static_cast<uint64_t>(spec.busy_fraction * static_cast<double>(total_gpus));
  if (target > 0) {
    const uint64_t packed =
        std::min(total_gpus, static_cast<uint64_t>(static_cast<double>(target) * 1.5));
    std::vector<core::PendingJob> fill;
    uint64_t planned = 0;
    for (core::JobId id = 1; planned < packed; ++id) {
      core::PendingJob j;
      j.id = id;
      j.submit_time_ms = s.now - 1000;
      j.request = PhillyRequest(rng(), spec.gpus_per_node);
      planned += static_cast<uint64_t>(j.request.nodes) * j.request.gpus_per_node;
      fill.push_back(std::move(j));
    }
    core::SchedulerConfig no_backfill;
    no_backfill.backfill_depth = 0;
    core::SchedulePass pass = core::Schedule(s.view, fill, s.now, no_backfill);
    std::shuffle(pass.starts.begin(), pass.starts.end(), rng);
    uint64_t busy = 0;
    for (const core::JobStart& st : pass.starts) {
      for (const core::NodePlacement& np : st.placement.nodes) busy += np.gpus.size();
    }
    for (const core::JobStart& st : pass.starts) {
      uint64_t gpus = 0;
      for (const core::NodePlacement& np : st.placement.nodes) gpus += np.gpus.size();
      if (busy - gpus >= target) {
        busy -= gpus;  // this one has ended
        continue;
      }
      core::Allocate(st.placement, s.view);
      const core::TimeMs limit = fill[st.job - 1].request.time_limit_ms;
      const core::TimeMs end = s.now + 60'000 + static_cast<core::TimeMs>(rng() % limit);
      for (const core::NodePlacement& np : st.placement.nodes) {
        s.view.running.push_back({st.job, np.node, end, static_cast<uint32_t>(np.cpus.size()),
                                  static_cast<uint32_t>(np.gpus.size()), np.mem_mb});
        s.busy_gpus += np.gpus.size();
      }
    }
  }

  for (uint32_t k = 0; k < spec.pending; ++k) {
    core::PendingJob j;
    j.id = 1'000'000 + k;
    j.submit_time_ms = s.now - static_cast<core::TimeMs>(rng() % (48 * kHour));
    uint64_t random = rng();
    if (static_cast<double>(rng() % 1'000'000) < spec.big_gang_fraction * 1e6) {
      constexpr uint32_t kBig[] = {32, 64, 128};
      j.request = PhillyRequest(random, spec.gpus_per_node);
      j.request.nodes = kBig[random % 3];
      j.request.gpus_per_node = spec.gpus_per_node;
      j.request.tasks_per_node.assign(j.request.nodes, spec.gpus_per_node);
      j.request.mem_per_node_mb = 64'000ULL * spec.gpus_per_node;
    } else {
      j.request = PhillyRequest(random, spec.gpus_per_node);
    }
    s.queue.push_back(std::move(j));
  }
  return s;
}

}  // namespace muster::bench
