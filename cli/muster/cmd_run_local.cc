// muster run (a step inside a job) and muster local up|down.
#include <getopt.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "cli.h"
#include "muster/client/local_cluster.h"
#include "muster/client/step_client.h"
#include "muster/common/strings.h"

extern char** environ;

namespace muster::cli {

int CmdRun(int argc, char** argv) {
  client::StepOptions o;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "-l" || a == "--label") {
      o.label = true;
    } else if (a == "-h" || a == "--help") {
      std::printf(
          "Usage: muster run [-l|--label] COMMAND [ARGS...]\n"
          "Inside a job: run COMMAND once per task slot on every node of the job.\n");
      return kExitOk;
    } else if (!a.empty() && a[0] == '-') {
      return Usage("run", "unknown option '" + a + "'");
    } else {
      break;
    }
  }
  for (; i < argc; ++i) o.argv.push_back(argv[i]);
  if (o.argv.empty()) return Usage("run", "no command given");
  const char* id = std::getenv("MUSTER_JOB_ID");
  if (!id || !*id) id = std::getenv("SLURM_JOB_ID");
  if (!id || !*id) {
    return Fail("run", Unimplemented("running outside a job allocation is not supported yet; "
                                     "use it inside a batch job (muster submit)"));
  }
  auto job = ParseUint(id);
  if (!job) return Fail("run", InvalidArgument(std::string("bad job id in environment: ") + id));
  o.job_id = *job;
  for (char** e = environ; e && *e; ++e) o.environment.emplace_back(*e);
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd)) o.work_dir = cwd;
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("run", controller.status());
  auto rc = client::RunStep(*controller, o, stdout, stderr);
  if (!rc.ok()) return Fail("run", rc.status());
  return *rc;
}

int CmdLocal(int argc, char** argv) {
  if (argc < 2) return Usage("local", "expected 'up' or 'down'");
  std::string action = argv[1];
  client::LocalClusterOptions o;
  bool purge = false;
  const struct option opts[] = {{"nodes", required_argument, nullptr, 'n'},
                                {"gpus-per-node", required_argument, nullptr, 'g'},
                                {"cpus-per-node", required_argument, nullptr, 'c'},
                                {"dir", required_argument, nullptr, 'd'},
                                {"purge", no_argument, nullptr, 'P'},
                                {"help", no_argument, nullptr, 'h'},
                                {nullptr, 0, nullptr, 0}};
  optind = 0;
  opterr = 0;
  for (int c; (c = getopt_long(argc - 1, argv + 1, ":n:g:c:d:h", opts, nullptr)) != -1;) {
    auto num = [&]() -> std::optional<uint32_t> {
      auto v = ParseUint(optarg);
      if (!v || *v > 100000) return std::nullopt;
      return static_cast<uint32_t>(*v);
    };
    switch (c) {
      case 'n': {
        auto v = num();
        if (!v) return Usage("local", "bad --nodes");
        o.nodes = *v;
        break;
      }
      case 'g': {
        auto v = num();
        if (!v) return Usage("local", "bad --gpus-per-node");
        o.gpus_per_node = *v;
        break;
      }
      case 'c': {
        auto v = num();
        if (!v || *v == 0) return Usage("local", "bad --cpus-per-node");
        o.cpus_per_node = *v;
        break;
      }
      case 'd':
        o.dir = optarg;
        break;
      case 'P':
        purge = true;
        break;
      case 'h':
        std::printf(
            "Usage: muster local up [--nodes N] [--gpus-per-node G] [--cpus-per-node C] [--dir "
            "DIR]\n"
            "       muster local down [--dir DIR] [--purge]\n"
            "DIR defaults to $MUSTER_LOCAL_DIR or ~/.muster/local.\n");
        return kExitOk;
      default:
        return Usage("local", "unknown or incomplete option");
    }
  }
  if (optind + 1 < argc)
    return Usage("local", "unexpected argument '" + std::string(argv[optind + 1]) + "'");
  if (action == "up") {
    auto conf = client::LocalUp(o, stderr);
    if (!conf.ok()) return Fail("local up", conf.status());
    std::fprintf(stderr, "local cluster up: %u nodes x %u GPUs (h100), config %s\n", o.nodes,
                 o.gpus_per_node, conf->c_str());
    std::printf("export MUSTER_CONF=%s\n", conf->c_str());
    return kExitOk;
  }
  if (action == "down") {
    Status s = client::LocalDown(o.dir, purge, stderr);
    if (!s.ok()) return Fail("local down", s);
    return kExitOk;
  }
  return Usage("local", "unknown action '" + action + "' (up or down)");
}

}  // namespace muster::cli
