#include "job_entry.h"

#include "array_tasks.h"
#include "job_spec.h"
#include "license_book.h"
#include "muster/v1/controller.pb.h"

namespace muster::controller {
namespace {

// squeue's brief row, the part the spec decides: encoded when the job enters memory and again
// when scontrol update changes its spec (--hold, which the row does not show, changes nothing).
// A listing appends the changing part after it, whose fields win (see job_views.h).
std::string BriefSpecFields(const v1::JobRecord& r) {
  const v1::JobSpec& s = r.spec();
  v1::JobInfo info;
  info.set_id(r.id());
  info.set_name(s.name());
  info.set_user(s.user());
  info.set_account(s.account());
  info.set_qos(s.qos());
  info.set_reservation(s.reservation());
  if (s.partitions_size() > 0) info.set_partition(s.partitions(0));  // until it runs somewhere
  info.set_cpus_per_task(s.cpus_per_task());
  info.set_gpus_per_node(s.gpus_per_node());
  info.set_gpu_type(GpuTypeWords(s));
  std::string gres;
  for (const v1::GresSpec& g : s.gres()) {
    if (!gres.empty()) gres += ',';
    gres += g.name() + (g.type().empty() ? "" : ":" + g.type()) + ":" + std::to_string(g.count());
  }
  info.set_gres(gres);
  if (!s.licenses().empty()) info.set_licenses(FormatLicenses(s));
  if (r.has_array()) *info.mutable_array() = r.array();
  return info.SerializeAsString();
}

}  // namespace

JobEntry::JobEntry(v1::JobRecord rec, const core::JobRequest* req,
                   std::shared_ptr<const std::vector<uint32_t>> tasks)
    : rec_(std::move(rec)) {
  request = req ? *req : ToCoreRequest(rec_);
  brief_spec_fields = BriefSpecFields(rec_);
  if (Carries(rec_)) array_tasks = tasks ? std::move(tasks) : ArrayTaskList(rec_);
}

void RefreshSpecFields(JobEntry& e) {
  e.request = ToCoreRequest(e.rec());
  e.brief_spec_fields = BriefSpecFields(e.rec());
}

std::string GpuTypeWords(const v1::JobSpec& spec) {
  if (spec.gpu_types_size() == 0) return spec.gpu_type();
  std::string out;
  for (const std::string& t : spec.gpu_types()) out += (out.empty() ? "" : "|") + t;
  return out;
}

bool IsActive(const v1::JobRecord& rec) {
  return rec.state() == v1::PENDING || rec.state() == v1::RUNNING ||
         rec.completing_nodes_size() > 0;
}

v1::JobState ShownState(const v1::JobRecord& rec) {
  return rec.state() == v1::RUNNING && rec.suspend_time_ms() > 0 ? v1::SUSPENDED : rec.state();
}

TimeMs LimitEnd(const v1::JobRecord& rec) {
  if (rec.time_limit_ms() <= 0 || rec.suspend_time_ms() > 0) return core::kNever;
  return rec.start_time_ms() + rec.time_limit_ms() + rec.suspended_ms();
}

}  // namespace muster::controller
