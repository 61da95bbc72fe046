#include "usage_window.h"

#include <algorithm>
#include <map>

namespace muster::cli {

Result<std::vector<JobUsage>> UsageInWindow(client::ControllerClient& controller, int64_t start,
                                            int64_t end, const std::vector<std::string>& users,
                                            int64_t now) {
  std::map<std::string, std::string> type_of;
  if (auto n = controller.ListNodes(v1::ListNodesRequest()); n.ok()) {
    for (const auto& node : n->nodes()) type_of[node.name()] = node.gpu_type();
  }
  v1::ListAccountingRequest req;
  req.set_start_ms(start);
  req.set_end_ms(end);
  req.set_without_steps(true);
  for (const auto& u : users) req.add_users(u);
  MUSTER_ASSIGN_OR_RETURN(v1::ListAccountingResponse resp, controller.ListAccounting(req));
  std::vector<JobUsage> out;
  for (const v1::JobInfo& j : resp.jobs()) {
    if (j.start_time_ms() <= 0) continue;  // never ran
    const int64_t ran_to = j.end_time_ms() > 0 ? j.end_time_ms() : now;
    const int64_t from = std::max(j.start_time_ms(), start), to = std::min(ran_to, end);
    if (to <= from) continue;
    const double seconds = static_cast<double>(to - from) / 1000.0;
    JobUsage u;
    u.account = j.account();
    u.user = j.user();
    u.gpu_type = j.gpu_type();
    if (u.gpu_type.empty() && j.nodes_size() > 0) u.gpu_type = type_of[j.nodes(0)];
    if (u.gpu_type.empty()) u.gpu_type = "gpu";
    if (j.gpus_total() == 0) u.gpu_type = "-";
    u.cpu_s = seconds * j.cpus_total();
    u.gpu_s = seconds * j.gpus_total();
    out.push_back(std::move(u));
  }
  return out;
}

}  // namespace muster::cli
