// srun --cpu-bind's value and each task's CPUs it comes to, and the kernel's CPU lists. Input:
// the value, then after a NUL the step's CPUs (a CPU list) and, after another, a task count. A
// task is never bound to a CPU the step does not hold or the machine lacks.
#include "muster/common/cpu_bind.h"

#include <set>
#include <string>

#include "fuzz_check.h"
#include "muster/common/strings.h"

namespace {

// Two sockets of four cores of two threads, one NUMA node per socket (a step may hold CPUs
// beyond them, 17 say, which a node configured larger than it is would).
muster::CpuTopology Machine() {
  muster::CpuTopology t;
  for (uint32_t id = 0; id < 16; ++id) {
    const uint32_t first = id % 8;
    t.cpus.push_back({id, first / 4, first % 4, first / 4});
  }
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const muster::CpuTopology machine = Machine();
  const std::string input(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> parts = muster::Split(input, '\0');
  auto bind = muster::ParseCpuBind(parts[0]);
  if (!bind.ok()) return 0;
  std::vector<uint32_t> held = {0, 1, 2, 3, 8, 9, 17};
  if (parts.size() > 1) {
    auto list = muster::ParseCpuList(parts[1]);
    if (!list.ok()) return 0;
    FUZZ_CHECK(muster::ParseCpuList(muster::FormatCpuList(*list)).value() == *list);
    held = *list;
  }
  uint32_t ntasks = 3;
  if (parts.size() > 2)
    ntasks = static_cast<uint32_t>(muster::ParseUint(parts[2]).value_or(3) % 64);
  for (auto dist : {muster::CpuDistribution::kCyclic, muster::CpuDistribution::kBlock,
                    muster::CpuDistribution::kFcyclic}) {
    auto tasks = muster::LayOutTaskCpus(*bind, dist, machine, held, ntasks, ntasks % 5);
    if (!tasks.ok()) continue;
    const std::set<uint32_t> step(held.begin(), held.end());
    FUZZ_CHECK(tasks->empty() || tasks->size() == ntasks);
    for (const auto& cpus : *tasks) {
      FUZZ_CHECK(!cpus.empty());
      for (uint32_t c : cpus) FUZZ_CHECK(step.count(c) && machine.Find(c));
    }
    (void)muster::CpuBindEnv(*bind, *tasks);
  }
  return 0;
}
