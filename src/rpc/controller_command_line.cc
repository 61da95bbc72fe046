#include <getopt.h>
#include <sys/stat.h>
#include <unistd.h>

#include "muster/common/config.h"
#include "muster/common/strings.h"
#include "muster/rpc/controller_server.h"
#include "muster/store/restored_state.h"
#include "muster/store/state_store.h"

namespace muster::rpc {

std::string ControllerUsage() {
  return std::string("Usage: musterctld [--config FILE] [--log-level LEVEL] [--name NAME]\n") +
         "       --name NAME   which [[controllers]] entry this controller is (default: the\n"
         "                     host's name)\n" +
         "       musterctld --check-state DIR   verify a state directory (read-only) and exit:\n"
         "                                      0 sound, 1 problems found, 2 unreadable\n" +
         "       musterctld --after-restore [--job-id-gap N] [--config FILE]\n"
         "                     the state directory was restored from a backup: move its epoch\n"
         "                     and job ids past what the cluster has seen, then exit (run it\n"
         "                     once, with musterctld stopped, before starting it)\n" +
         "Config: --config, else $MUSTER_CONF, else " + kDefaultConfigPath + "\n";
}

Result<ControllerCommandLine> ParseControllerCommandLine(int argc, char** argv) {
  ControllerCommandLine cl;
  const struct option opts[] = {{"config", required_argument, nullptr, 'c'},
                                {"log-level", required_argument, nullptr, 'l'},
                                {"version", no_argument, nullptr, 'V'},
                                {"help", no_argument, nullptr, 'h'},
                                {"check-state", required_argument, nullptr, 's'},
                                {"name", required_argument, nullptr, 'n'},
                                {"after-restore", no_argument, nullptr, 'R'},
                                {"job-id-gap", required_argument, nullptr, 'G'},
                                {nullptr, 0, nullptr, 0}};
  bool gap_given = false;
  optind = 0;  // getopt's state is global: start over
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":c:l:Vhs:n:RG:", opts, nullptr)) != -1;) {
    switch (c) {
      case 'c':
        cl.config_path = optarg;
        break;
      case 'l':
        cl.log_level = optarg;
        break;
      case 'V':
        cl.version = true;
        break;
      case 'h':
        cl.help = true;
        break;
      case 's':
        cl.check_state = optarg;
        break;
      case 'n':
        cl.name = optarg;
        break;
      case 'R':
        cl.after_restore = true;
        break;
      case 'G': {
        gap_given = true;
        auto gap = ParseUint(optarg);
        if (!gap || *gap > 1'000'000'000'000ULL) {
          return InvalidArgument(std::string("--job-id-gap: expected a number of job ids, got '") +
                                 optarg + "'");
        }
        cl.job_id_gap = *gap;
        break;
      }
      case ':':
        return InvalidArgument(std::string("option ") + argv[optind - 1] + " needs a value");
      default:
        return InvalidArgument(std::string("unknown option ") + argv[optind - 1]);
    }
  }
  if (optind < argc) return InvalidArgument(std::string("unexpected argument ") + argv[optind]);
  if (gap_given && !cl.after_restore)
    return InvalidArgument("--job-id-gap goes with --after-restore");
  return cl;
}

int AfterRestoreCommand(const Config& config, uint64_t job_id_gap, std::FILE* out) {
  const std::string& dir = config.controller.state_dir;
  // The copy as the controller's user put it back: opening would make a missing one, and files
  // made by another user (root) would keep the controller from opening it.
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    std::fprintf(out, "musterctld --after-restore: no state directory at %s\n", dir.c_str());
    return 1;
  }
  if (st.st_uid != ::geteuid()) {
    std::fprintf(out,
                 "musterctld --after-restore: %s belongs to uid %u: run this as its owner, the "
                 "controller's user (sudo -u muster musterctld --after-restore)\n",
                 dir.c_str(), static_cast<unsigned>(st.st_uid));
    return 1;
  }
  // Opening takes the store's lock: a controller running on it refuses this.
  auto store = store::OpenRocksDbStateStore(dir, {});
  if (!store.ok()) {
    std::fprintf(out, "musterctld --after-restore: %s (stop musterctld first)\n",
                 store.status().message().c_str());
    return 1;
  }
  auto r = store::PrepareRestoredState(**store, job_id_gap);
  if (!r.ok()) {
    std::fprintf(out, "musterctld --after-restore: %s: %s\n", dir.c_str(),
                 r.status().message().c_str());
    return 1;
  }
  std::fprintf(
      out,
      "%s: restored state prepared: epoch %llu -> %llu (agents obey it), next job id "
      "%llu -> %llu.\nJobs submitted after the backup was taken are not known to it (those "
      "still running are ended as their nodes register), and jobs it has as running that "
      "ended since are requeued as if their node had failed. Start musterctld now.\n",
      dir.c_str(), static_cast<unsigned long long>(r->epoch_before),
      static_cast<unsigned long long>(r->epoch_after),
      static_cast<unsigned long long>(r->next_job_id_before),
      static_cast<unsigned long long>(r->next_job_id_after));
  return 0;
}

int CheckStateCommand(const std::string& dir, std::FILE* out) {
  auto check = store::CheckStateDir(dir);
  if (!check.ok()) {
    std::fprintf(out, "%s: %s\n", dir.c_str(), check.status().ToString().c_str());
    return 2;
  }
  std::fprintf(out, "state directory %s\n", dir.c_str());
  for (const auto& [family, n] : check->records) {
    std::fprintf(out, "  %-14s %llu record(s)\n", family.c_str(),
                 static_cast<unsigned long long>(n));
  }
  if (check->quarantined > 0) {
    std::fprintf(out, "%llu record(s) quarantined by earlier recoveries (family quarantine)\n",
                 static_cast<unsigned long long>(check->quarantined));
  }
  for (const std::string& p : check->problems) std::fprintf(out, "problem: %s\n", p.c_str());
  std::fprintf(out, "%s\n",
               check->problems.empty()
                   ? "sound"
                   : (std::to_string(check->problems.size()) + " problem(s)").c_str());
  return check->problems.empty() ? 0 : 1;
}

}  // namespace muster::rpc
