// A batch script's #SBATCH lines and the sbatch/srun option parser behind them.
#include <string>

#include "fuzz_check.h"
#include "muster/client/submit_options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string script(reinterpret_cast<const char*>(data), size);
  auto directives = muster::client::ParseDirectives(script);
  if (!directives.ok()) return 0;
  muster::client::SubmitOptions opts;
  for (const auto& d : *directives) {
    if (!muster::client::ParseSubmitArgs(d.args, "script line " + std::to_string(d.line), &opts)
             .ok()) {
      break;
    }
  }
  // The same text as one command line's words, for srun's larger option set.
  if (auto words = muster::client::SplitWords(script.substr(0, 4096)); words.ok()) {
    muster::client::SubmitOptions run;
    (void)muster::client::ParseSubmitArgs(*words, "command line", &run,
                                          muster::client::OptionSet::kRun);
  }
  return 0;
}
