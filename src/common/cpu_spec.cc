#include "muster/common/cpu_spec.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <string>
#include <utility>

namespace muster {
namespace {

// The machine's cores in the order they are set aside, each with its threads, highest first.
std::vector<std::vector<uint32_t>> CoresInSpecOrder(const CpuTopology& topo) {
  // socket -> core -> threads. A core's key (CpuTopology::Cpu::core) is unique within its socket.
  std::map<uint32_t, std::map<uint32_t, std::vector<uint32_t>>> sockets;
  for (const CpuTopology::Cpu& c : topo.cpus) sockets[c.socket][c.core].push_back(c.id);
  std::vector<std::vector<std::vector<uint32_t>>> per_socket;  // highest socket first
  for (auto s = sockets.rbegin(); s != sockets.rend(); ++s) {
    std::vector<std::vector<uint32_t>>& cores = per_socket.emplace_back();
    for (auto c = s->second.rbegin(); c != s->second.rend(); ++c) {
      std::vector<uint32_t> threads = c->second;
      std::sort(threads.rbegin(), threads.rend());
      cores.push_back(std::move(threads));
    }
  }
  // In turns: each socket's highest core not yet taken, highest socket first.
  std::vector<std::vector<uint32_t>> order;
  for (size_t turn = 0;; ++turn) {
    bool any = false;
    for (auto& cores : per_socket) {
      if (turn >= cores.size()) continue;
      order.push_back(std::move(cores[turn]));
      any = true;
    }
    if (!any) break;
  }
  return order;
}

}  // namespace

Result<std::vector<uint32_t>> SpecializedCpus(const CpuTopology& topo, uint32_t core_spec,
                                              uint32_t thread_spec) {
  if (core_spec > 0 && thread_spec > 0) {
    return InvalidArgument("--core-spec and --thread-spec cannot be used together");
  }
  if (core_spec == 0 && thread_spec == 0) return std::vector<uint32_t>{};
  const std::vector<std::vector<uint32_t>> cores = CoresInSpecOrder(topo);
  std::vector<uint32_t> aside;
  if (core_spec > 0) {
    if (core_spec >= cores.size()) {
      return InvalidArgument("--core-spec=" + std::to_string(core_spec) +
                             " leaves no core to the job: this node has " +
                             std::to_string(cores.size()) + " cores");
    }
    for (size_t i = 0; i < core_spec; ++i)
      aside.insert(aside.end(), cores[i].begin(), cores[i].end());
  } else {
    if (thread_spec >= topo.cpus.size()) {
      return InvalidArgument("--thread-spec=" + std::to_string(thread_spec) +
                             " leaves no thread to the job: this node has " +
                             std::to_string(topo.cpus.size()) + " threads");
    }
    for (const std::vector<uint32_t>& core : cores) {
      for (uint32_t t : core) {
        if (aside.size() < thread_spec) aside.push_back(t);
      }
    }
  }
  std::sort(aside.begin(), aside.end());
  return aside;
}

std::vector<uint32_t> CpusOtherThan(const std::vector<uint32_t>& cpus,
                                    const std::vector<uint32_t>& aside) {
  std::vector<uint32_t> a = cpus, b = aside, out;
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  std::sort(b.begin(), b.end());
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

}  // namespace muster
