#include "job_cpus.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "muster/common/cpu_spec.h"

namespace muster::agent {

bool SetsCpusAside(const v1::JobSpec& spec) {
  return spec.core_spec() > 0 || spec.thread_spec() > 0;
}

Result<std::vector<uint32_t>> CpusLeftToJob(const v1::JobSpec& spec,
                                            const std::vector<uint32_t>& held,
                                            const CpuTopology& machine) {
  auto aside = SpecializedCpus(machine, spec.core_spec(), spec.thread_spec());
  if (!aside.ok()) return FailedPrecondition(aside.status().message());
  std::vector<uint32_t> here;  // the controller's ids, of which a node's config may name more
  for (uint32_t c : held) {
    if (machine.Find(c)) here.push_back(c);
  }
  std::vector<uint32_t> left = CpusOtherThan(here, *aside);
  if (left.empty()) {
    return FailedPrecondition("none of the CPUs held on this node (" + FormatCpuList(held) +
                              ") is left besides those the job sets aside (" +
                              FormatCpuList(*aside) + ", --core-spec/--thread-spec)");
  }
  return left;
}

Result<std::vector<uint32_t>> CpusLeftToJobHere(const v1::JobSpec& spec,
                                                const std::vector<uint32_t>& held) {
  auto machine = ReadCpuTopology();
  if (!machine.ok()) {
    return FailedPrecondition("cannot tell which CPUs --core-spec/--thread-spec set aside: " +
                              machine.status().message());
  }
  return CpusLeftToJob(spec, held, *machine);
}

bool AllOnline(const std::vector<uint32_t>& cpus, const std::vector<uint32_t>& online) {
  if (cpus.empty()) return false;
  for (uint32_t c : cpus) {
    if (!std::binary_search(online.begin(), online.end(), c)) return false;
  }
  return true;
}

Result<std::vector<uint32_t>> OnlineCpus(const std::string& sysfs) {
  const std::string path = sysfs + "/devices/system/cpu/online";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return NotFound("cannot read " + path + ": which CPUs are online");
  return ParseCpuList(text.str());
}

}  // namespace muster::agent
