// The cluster's licenses ([licenses] in the config, Slurm's Licenses=): counted resources that a
// job holds, on no node in particular, from its start until it ends (suspended too). A scheduling
// pass gets one counter per license with what running jobs hold; a pending job is charged for
// the licenses it names and waits, with reason Licenses, while too few are free.
//
// Strand-confined.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine_context.h"
#include "muster/common/status.h"
#include "muster/core/types.h"
#include "muster/v1/common.pb.h"

namespace muster::controller {

class JobManager;

// At submission: every license a spec names is one of the cluster's, and no more of it than the
// cluster has. INVALID_ARGUMENT naming it ("Invalid license specification", as Slurm).
Status CheckLicenses(const v1::JobSpec& spec, const Config& config);
// "matlab:2,fluent:1", sorted by name (Slurm's Licenses= form); empty for none.
std::string FormatLicenses(const v1::JobSpec& spec);

class LicenseBook {
 public:
  LicenseBook(const EngineContext& ctx, const JobManager& jobs) : ctx_(ctx), jobs_(jobs) {}

  // What running (and suspended) jobs hold of each configured license now.
  std::map<std::string, uint64_t> InUse() const;
  // A counter per license, added to `counters`, with what running jobs hold; nothing when the
  // cluster has no licenses.
  void BeginPass(std::vector<core::LimitCounter>* counters);
  // A job naming a license the cluster no longer has (or fewer of it than it needs, after a
  // config change) could never start: kLicenses and why; else kNone.
  core::JobReason Admit(const v1::JobSpec& spec, std::string* detail) const;
  // The charges of a job that names licenses (none for one that names none).
  void AddCharges(const v1::JobSpec& spec, std::vector<core::LimitCharge>* out) const;

 private:
  const EngineContext& ctx_;
  const JobManager& jobs_;
  std::map<std::string, uint32_t> index_;  // license -> its counter, this pass
};

}  // namespace muster::controller
