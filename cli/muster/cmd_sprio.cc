// sprio: pending jobs' priorities and the factors behind them (age, fair-share, job size,
// partition, QoS), weighted as the controller weighs them or normalised (-n).
#include <getopt.h>

#include <cmath>
#include <cstdio>

#include "cli.h"
#include "muster/common/strings.h"
#include "output.h"

namespace muster::cli {
namespace {

void PrintSprioHelp() {
  std::printf(
      "Usage: sprio [-l] [-n] [-w] [-h] [-j JOBS] [-u USERS] [-p PARTITIONS]\n"
      "Pending jobs' priorities and the weighted factors that make them (Slurm's multifactor):\n"
      "  -l, --long        with user, account and nice\n"
      "  -n, --norm        the factors normalised (0..1) instead of weighted\n"
      "  -w, --weights     the weights only\n"
      "  -h, --noheader    -j, --jobs=LIST  -u, --user=LIST  -p, --partition=LIST\n");
}

std::string Weighted(double factor, uint32_t weight) {
  return std::to_string(std::llround(factor * static_cast<double>(weight)));
}

}  // namespace

int CmdSprio(int argc, char** argv) {
  bool longer = false, norm = false, weights_only = false, header = true;
  v1::ListJobsRequest req;
  req.add_states(v1::PENDING);
  const struct option opts[] = {{"long", no_argument, nullptr, 'l'},
                                {"norm", no_argument, nullptr, 'n'},
                                {"weights", no_argument, nullptr, 'w'},
                                {"noheader", no_argument, nullptr, 'h'},
                                {"jobs", required_argument, nullptr, 'j'},
                                {"user", required_argument, nullptr, 'u'},
                                {"partition", required_argument, nullptr, 'p'},
                                {"help", no_argument, nullptr, 'H'},
                                {"usage", no_argument, nullptr, 'H'},
                                {nullptr, 0, nullptr, 0}};
  optind = 0;
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":lnwhj:u:p:", opts, nullptr)) != -1;) {
    switch (c) {
      case 'l':
        longer = true;
        break;
      case 'n':
        norm = true;
        break;
      case 'w':
        weights_only = true;
        break;
      case 'h':
        header = false;
        break;
      case 'j':
        for (const auto& id : Split(optarg, ',', true)) {
          auto n = ParseUint(id);
          if (!n) return Usage("sprio", "bad job id '" + id + "'");
          req.add_job_ids(*n);
        }
        break;
      case 'u':
        for (const auto& u : Split(optarg, ',', true)) req.add_users(u);
        break;
      case 'p':
        for (const auto& p : Split(optarg, ',', true)) req.add_partitions(p);
        break;
      case 'H':
        PrintSprioHelp();
        return kExitOk;
      default:
        return Usage("sprio", "unknown or incomplete option");
    }
  }
  if (optind < argc)
    return Usage("sprio", "unexpected argument '" + std::string(argv[optind]) + "'");
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("sprio", controller.status());
  auto info = controller->ControllerInfo();
  if (!info.ok()) return Fail("sprio", info.status());
  const v1::PriorityWeights& w = info->priority_weights();
  std::string head = "          JOBID PARTITION ";
  if (longer) head += "    USER    ACCOUNT ";
  head += "  PRIORITY       SITE        AGE  FAIRSHARE    JOBSIZE  PARTITION        QOS";
  if (longer) head += "   NICE";
  if (weights_only) {
    if (header) std::printf("%s\n", head.c_str());
    std::string line = Right("Weights", 15) + " " + Right("", 9) + " ";
    if (longer) line += Right("", 8) + " " + Right("", 10) + " ";
    line += Right("", 10) + " " + Right("1", 10) + " " + Right(std::to_string(w.age()), 10) + " " +
            Right(std::to_string(w.fairshare()), 10) + " " + Right(std::to_string(w.size()), 10) +
            " " + Right(std::to_string(w.partition()), 10) + " " +
            Right(std::to_string(w.qos()), 10);
    std::printf("%s\n", line.c_str());
    return kExitOk;
  }
  auto resp = controller->ListJobs(req);
  if (!resp.ok()) return Fail("sprio", resp.status());
  if (header) std::printf("%s\n", head.c_str());
  for (const v1::JobInfo& j : resp->jobs()) {
    if (j.state() != v1::PENDING) continue;
    const v1::PriorityFactors& f = j.priority_factors();
    auto cell = [&](double factor, uint32_t weight) {
      return Right(norm ? Factor(factor) : Weighted(factor, weight), 10);
    };
    std::string line = Right(std::to_string(j.id()), 15) + " " + Right(j.partition(), 9) + " ";
    if (longer) line += Right(j.user(), 8) + " " + Right(j.account(), 10) + " ";
    line += Right(norm ? Factor(static_cast<double>(j.priority()) / 4294967295.0)
                       : std::to_string(j.priority()),
                  10) +
            " " + Right(norm ? Factor(0) : "0", 10) + " " + cell(f.age(), w.age()) + " " +
            cell(f.fairshare(), w.fairshare()) + " " + cell(f.size(), w.size()) + " " +
            cell(f.partition(), w.partition()) + " " + cell(f.qos(), w.qos());
    if (longer) line += " " + Right(std::to_string(f.nice()), 6);
    std::printf("%s\n", line.c_str());
  }
  return kExitOk;
}

}  // namespace muster::cli
