// What an agent checks before it starts a step: the request as it arrives on the step port, its
// credential (opened with the node's key) and what it asks of the job's allocation. Inputs whose
// credential holds a grant are sealed again with the node's real key, so that the checks behind
// the seal are reached too; a request is accepted only as the grant and the allocation allow.
#include <set>
#include <string>

#include "fuzz_check.h"
#include "muster/credentials/step_credential.h"
#include "step_grant.h"

namespace {

const std::string kKey = muster::credentials::NodeStepKey(std::string(32, 'k'), "node1");
constexpr int64_t kNow = 1'700'000'000'000;

muster::v1::LaunchJob Job() {
  muster::v1::LaunchJob l;
  l.set_job_id(7);
  l.set_requeue_count(1);
  l.mutable_spec()->set_uid(1000);
  muster::v1::NodeAllocation* n = l.mutable_allocation()->add_nodes();
  n->set_node("node1");
  for (uint32_t c : {0, 1, 2, 3}) n->add_cpu_ids(c);
  for (uint32_t g : {2, 3}) n->add_gpu_indices(g);
  return l;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const muster::v1::LaunchJob job = [] {
    google::protobuf::SetLogHandler(nullptr);  // invalid UTF-8 in a string field is expected
    return Job();
  }();
  muster::v1::StepLaunchRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return 0;
  (void)muster::agent::CheckStepCredential(req, job, "node1", kKey, kNow, "i1");
  muster::v1::SealedStepGrant sealed;
  muster::v1::StepGrant grant;
  if (!sealed.ParseFromString(req.credential()) || !grant.ParseFromString(sealed.grant())) {
    return 0;
  }
  req.set_credential(muster::credentials::SealStepGrant(kKey, grant));
  auto checked = muster::agent::CheckStepCredential(req, job, "node1", kKey, kNow, "i1");
  if (!checked.ok()) return 0;
  // Accepted: for this node, job, user, run and step, not expired, and asking what it grants.
  FUZZ_CHECK(checked->node() == "node1" && checked->job_id() == 7 && checked->uid() == 1000);
  FUZZ_CHECK(checked->run() == 1 && checked->step_id() == req.step_id());
  FUZZ_CHECK(checked->expires_ms() >= kNow && checked->ntasks() == req.ntasks());
  if (muster::agent::CheckStepWithinGrant(req, job, "node1").ok()) {
    const std::set<uint32_t> cpus{0, 1, 2, 3}, gpus{2, 3};
    for (uint32_t c : req.cpu_ids()) FUZZ_CHECK(cpus.count(c));
    for (uint32_t g : req.gpu_indices()) FUZZ_CHECK(gpus.count(g));
    FUZZ_CHECK(req.ntasks() >= 1 && req.ntasks() <= 4);
  }
  return 0;
}
