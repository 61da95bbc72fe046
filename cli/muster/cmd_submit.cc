// muster submit: sbatch's options, #SBATCH directives, and the job spec sent to the controller.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "cli.h"
#include "muster/client/input_env.h"
#include "muster/client/submit_options.h"
#include "muster/common/duration.h"
#include "muster/common/hostlist.h"
#include "muster/common/job_limits.h"

extern char** environ;

namespace muster::cli {
namespace {

// Reads the whole script, but never more than the controller would accept: a 100 MB file is
// refused here after reading 4 MiB, not sent.
bool ReadScript(std::istream& in, std::string* script) {
  script->clear();
  char buf[64 * 1024];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    script->append(buf, static_cast<size_t>(in.gcount()));
    if (script->size() > kMaxScriptBytes) return false;
  }
  return true;
}

std::string ScriptTooLarge(const std::string& from) {
  return "the script in " + from + " is larger than " + std::to_string(kMaxScriptBytes >> 20) +
         " MiB, the largest a job may have";
}

bool Ended(const v1::JobInfo& j) {
  switch (j.state()) {
    case v1::PENDING:
    case v1::RUNNING:
    case v1::SUSPENDED:
      return false;  // (a requeued job is PENDING again; PREEMPTED is an end)
    default:
      return !j.completing();
  }
}

// sbatch -W: polls until the job (every task of an array) has ended, then exits as sbatch
// does: the highest exit code, or 1 for a job that ended otherwise than by its own exit.
int WaitForJob(client::ControllerClient& controller, uint64_t job_id) {
  int delay_ms = 200;
  for (;;) {
    v1::ListJobsRequest req;
    req.add_job_ids(job_id);  // not brief: a brief row has no exit code
    bool running = false, seen = false;
    int code = 0;
    for (int page = 0; page < 10'000; ++page) {
      auto resp = controller.ListJobs(req);
      if (!resp.ok()) return Fail("submit", resp.status());
      for (const v1::JobInfo& j : resp->jobs()) {
        seen = true;
        if (!Ended(j)) {
          running = true;
          continue;
        }
        int c = j.exit_code();
        if (c == 0 && j.state() != v1::COMPLETED) c = 1;
        code = std::max(code, c);
      }
      if (resp->next_after_id() == 0 || running) break;
      req.set_after_id(resp->next_after_id());
    }
    if (!seen) return Fail("submit", NotFound("job " + std::to_string(job_id) + " is gone"));
    if (!running) return std::min(code, 255);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    delay_ms = std::min(delay_ms * 2, 5'000);
  }
}

}  // namespace

int CmdSubmit(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  client::SubmitOptions cli_opts;
  Status s = client::ParseSubmitArgs(args, "command line", &cli_opts);
  if (!s.ok()) return Usage("submit", s.message());
  if (cli_opts.help) {
    std::fputs(
        (cli_opts.hint_help ? client::HintHelp() : client::SubmitUsage(ProgramName("submit")))
            .c_str(),
        stdout);
    return kExitOk;
  }

  client::SubmitContext ctx;
  if (cli_opts.wrap) {
    if (!cli_opts.positional.empty()) {
      return Usage("submit", "give either a script or --wrap, not both");
    }
    ctx.script =
        "#!/bin/sh\n# This script was created by muster submit --wrap.\n\n" + *cli_opts.wrap + "\n";
  } else if (!cli_opts.positional.empty()) {
    ctx.script_name = cli_opts.positional[0];
    std::ifstream in(ctx.script_name, std::ios::binary);
    if (!in) return Fail("submit", NotFound("cannot read script " + ctx.script_name));
    if (!ReadScript(in, &ctx.script)) return Usage("submit", ScriptTooLarge(ctx.script_name));
  } else {
    if (::isatty(0))
      return Usage("submit", "no script given (a file, --wrap, or a script on stdin)");
    if (!ReadScript(std::cin, &ctx.script)) return Usage("submit", ScriptTooLarge("stdin"));
  }

  // Directives first, then (as sbatch) the SBATCH_* variables, then the command line on top.
  client::SubmitOptions opts;
  if (!cli_opts.wrap) {
    auto directives = client::ParseDirectives(ctx.script);
    if (!directives.ok()) return Usage("submit", directives.status().message());
    for (const auto& d : *directives) {
      s = client::ParseSubmitArgs(d.args, "script line " + std::to_string(d.line), &opts);
      if (!s.ok()) return Usage("submit", s.message());
      if (!opts.positional.empty()) {
        return Usage("submit", "script line " + std::to_string(d.line) + ": unexpected argument '" +
                                   opts.positional[0] + "' in #SBATCH");
      }
    }
  }
  for (char** e = environ; e && *e; ++e) ctx.environment.emplace_back(*e);
  s = client::ApplyInputEnv(FrontEnd(), ctx.environment, &opts);  // sbatch's only
  if (!s.ok()) return Usage("submit", s.message());
  s = client::ParseSubmitArgs(args, "command line", &opts);
  if (!s.ok()) return Usage("submit", s.message());
  if (s = client::CheckRunAs(opts, ::geteuid()); !s.ok()) return Usage("submit", s.message());

  // -m plane without a size: SLURM_DIST_PLANESIZE's.
  if (s = client::ResolveDistribution(ctx.environment, false, &opts); !s.ok()) {
    return Usage("submit", s.message());
  }
  char cwd[4096];
  if (!::getcwd(cwd, sizeof cwd)) return Fail("submit", ErrnoStatus("getcwd", errno));
  ctx.cwd = cwd;
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  ctx.hostname = host;
  ApplyClusterDefaults(&ctx);

  auto spec = client::BuildJobSpec(opts, ctx);
  if (!spec.ok()) return Fail("submit", spec.status());
  auto controller = ConnectController(opts.clusters);
  if (!controller.ok()) return Fail("submit", controller.status());
  v1::SubmitJobRequest req;
  *req.mutable_spec() = std::move(*spec);
  req.set_test_only(opts.test_only);
  if (opts.priority) req.set_priority(*opts.priority);
  auto resp = controller->SubmitJob(req);
  if (!resp.ok()) return Fail("submit", resp.status());
  if (opts.test_only) {
    // As sbatch --test-only, on stderr: "Job N to start at T using C processors on nodes ...".
    const v1::TestOnlyResult& t = resp->test_only();
    const std::string job = "Job " + std::to_string(resp->job_id());
    const std::string prog = ProgramName("submit");
    if (t.start_ms() > 0) {
      std::string where;
      if (t.nodes_size() > 0) {
        where = " on nodes " + CompressHostlist({t.nodes().begin(), t.nodes().end()});
      }
      if (!t.partition().empty()) where += " in partition " + t.partition();
      std::fprintf(stderr, "%s: %s to start at %s using %u processors%s\n", prog.c_str(),
                   job.c_str(), FormatTimestamp(t.start_ms()).c_str(), t.cpus(), where.c_str());
    } else {
      std::fprintf(stderr, "%s: %s would wait (%s) with no start time forecast: %s\n", prog.c_str(),
                   job.c_str(), t.reason().c_str(), t.reason_detail().c_str());
    }
    return kExitOk;
  }
  if (opts.parsable) {
    std::printf("%llu\n", static_cast<unsigned long long>(resp->job_id()));
  } else {
    std::printf("Submitted batch job %llu\n", static_cast<unsigned long long>(resp->job_id()));
  }
  if (opts.wait) {
    std::fflush(stdout);
    return WaitForJob(*controller, resp->job_id());
  }
  return kExitOk;
}

}  // namespace muster::cli
