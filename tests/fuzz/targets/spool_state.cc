// What a restarted agent reads from its spool: a job's state file and the controller epoch, then
// what re-adoption derives from the state (GPU binding, environment, output-pattern variables).
// Any bytes are a job to re-adopt or one moved aside as corrupt, never a crash. The spool lives
// in a private temporary directory made once per process.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_check.h"
#include "job_env.h"
#include "job_spool.h"

namespace {

void RemoveSpool();

// Never destroyed: the exit handler that removes the directory still needs its name.
const std::string& SpoolDir() {
  static const std::string* dir = [] {
    spdlog::set_level(spdlog::level::off);
    google::protobuf::SetLogHandler(nullptr);  // invalid UTF-8 in a string field is expected
    char tmpl[] = "/tmp/muster-fuzz-spool.XXXXXX";
    const char* made = ::mkdtemp(tmpl);
    FUZZ_CHECK(made != nullptr);
    std::atexit(RemoveSpool);
    return new std::string(made);
  }();
  return *dir;
}

void RemoveSpool() {
  std::error_code ec;
  std::filesystem::remove_all(SpoolDir(), ec);
}

google::protobuf::RepeatedPtrField<muster::v1::GpuDevice> Gpus() {
  google::protobuf::RepeatedPtrField<muster::v1::GpuDevice> gpus;
  for (uint32_t i = 0; i < 4; ++i) {
    muster::v1::GpuDevice* g = gpus.Add();
    g->set_index(i);
    g->set_type("a100");
    if (i == 1) {
      g->set_mig_enabled(true);
      muster::v1::MigDevice* m = g->add_mig_devices();
      m->set_profile("1g.10gb");
      m->set_uuid("MIG-fuzz");
    }
  }
  return gpus;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  const std::string& dir = SpoolDir();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) fs::remove_all(e.path(), ec);
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  muster::agent::JobSpool spool(dir);
  FUZZ_CHECK(spool.MakeJobDir(1).ok());
  std::ofstream(spool.JobDir(1) + "/state", std::ios::binary) << bytes;
  std::ofstream(dir + "/controller-epoch", std::ios::binary) << bytes;
  (void)spool.LoadEpoch();
  const auto left = spool.Scan();
  FUZZ_CHECK(left.size() == 1);
  if (!left[0].state) {
    FUZZ_CHECK(fs::exists(spool.JobDir(1) + ".corrupt"));
    return 0;
  }
  const muster::v1::LaunchJob& launch = left[0].state->launch();
  FUZZ_CHECK(launch.job_id() == 1);
  auto visible = muster::agent::VisibleDevices(launch, Gpus());
  (void)muster::agent::GpusTouched(launch, Gpus());
  (void)muster::agent::GpuList(launch);
  (void)muster::agent::PatternVarsOf(launch);
  (void)muster::agent::BuildBatchEnv(launch, "node1", "/etc/muster/muster.toml",
                                     visible.ok() ? *visible : "");
  return 0;
}
