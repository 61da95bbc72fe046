// sprio: pending jobs' priorities and the factors behind them (age, fair-share, job size,
// partition, QoS), weighted as the controller weighs them or normalised (-n), in sprio's own
// columns or its -o format, in -S order.
#include <getopt.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "format_spec.h"
#include "muster/common/config.h"
#include "muster/common/strings.h"
#include "muster/common/version.h"
#include "output.h"
#include "squeue_format.h"

namespace muster::cli {
namespace {

// sprio's -o letters: upper case weighted, lower case normalised.
constexpr char kSprioLetters[] = "aAbBcfFijJNpPqQrStTuyY";

enum : int { kOptHelp = 256, kOptFederation, kOptLocal, kOptSibling };

void PrintSprioHelp() {
  std::printf(
      "Usage: sprio [-l] [-n] [-w] [-h] [-j JOBS] [-u USERS] [-p PARTITIONS] [-o FORMAT]\n"
      "             [-S SORT] [-M CLUSTER] [-v]\n"
      "Pending jobs' priorities and the weighted factors that make them (Slurm's multifactor):\n"
      "  -l, --long        with user, account and nice\n"
      "  -n, --norm        the factors normalised (0..1) instead of weighted\n"
      "  -w, --weights     the weights only\n"
      "  -o, --format=FMT  %%[.][WIDTH]LETTER fields: i r u Y/y (priority) S (site) A/a (age)\n"
      "                    B/b (association) F/f (fair-share) J/j (job size) P/p (partition)\n"
      "                    Q/q (QoS) N (nice) T/t (TRES) c (cluster); upper case weighted\n"
      "  -S, --sort=KEYS   the letters to order by, -KEY descending (default: i)\n"
      "  -h, --noheader    -j, --jobs=LIST  -u, --user=LIST  -p, --partition=LIST\n");
}

std::string Weighted(double factor, uint32_t weight) {
  return std::to_string(std::llround(factor * static_cast<double>(weight)));
}

std::string Header(char letter) {
  switch (letter) {
    case 'i':
      return "JOBID";
    case 'r':
      return "PARTITION";
    case 'u':
      return "USER";
    case 'Y':
    case 'y':
      return "PRIORITY";
    case 'S':
      return "SITE";
    case 'A':
    case 'a':
      return "AGE";
    case 'B':
    case 'b':
      return "ASSOC";
    case 'F':
    case 'f':
      return "FAIRSHARE";
    case 'J':
    case 'j':
      return "JOBSIZE";
    case 'P':
    case 'p':
      return "PARTITION";
    case 'Q':
    case 'q':
      return "QOS";
    case 'N':
      return "NICE";
    case 'T':
    case 't':
      return "TRES";
    case 'c':
      return "CLUSTER";
    default:
      return "";
  }
}

// A factor's normalised value (0..1) and its weight, for the letters that are factors.
struct Weighed {
  double factor = 0;
  uint32_t weight = 0;
};
std::optional<Weighed> FactorOf(char letter, const v1::JobInfo& j, const v1::PriorityWeights& w) {
  const v1::PriorityFactors& f = j.priority_factors();
  switch (letter) {
    case 'A':
    case 'a':
      return Weighed{f.age(), w.age()};
    case 'F':
    case 'f':
      return Weighed{f.fairshare(), w.fairshare()};
    case 'J':
    case 'j':
      return Weighed{f.size(), w.size()};
    case 'P':
    case 'p':
      return Weighed{f.partition(), w.partition()};
    case 'Q':
    case 'q':
      return Weighed{f.qos(), w.qos()};
    case 'S':  // the admin's (site) factor: none here
    case 'B':  // Muster weighs no association factor
    case 'b':
      return Weighed{};
    default:
      return std::nullopt;
  }
}

double NormPriority(const v1::JobInfo& j) {
  return static_cast<double>(j.priority()) / 4294967295.0;
}

std::string Field(char letter, const v1::JobInfo& j, const v1::PriorityWeights& w,
                  const std::string& cluster) {
  if (auto f = FactorOf(letter, j, w)) {
    return std::islower(static_cast<unsigned char>(letter)) ? Factor(f->factor)
                                                            : Weighted(f->factor, f->weight);
  }
  switch (letter) {
    case 'i':
      return std::to_string(j.id());
    case 'r':
      return j.partition();
    case 'u':
      return j.user();
    case 'Y':
      return std::to_string(j.priority());
    case 'y':
      return Factor(NormPriority(j));
    case 'N':
      return std::to_string(j.priority_factors().nice());
    case 'c':
      return cluster;
    default:  // T, t: Muster weighs no TRES
      return "";
  }
}

SortValue SortValueOf(char letter, const v1::JobInfo& j, const v1::PriorityWeights& w) {
  SortValue v;
  if (auto f = FactorOf(letter, j, w)) {
    v.number = std::islower(static_cast<unsigned char>(letter))
                   ? f->factor
                   : static_cast<double>(std::llround(f->factor * f->weight));
    return v;
  }
  switch (letter) {
    case 'i':
      v.number = static_cast<double>(j.id());
      break;
    case 'Y':
    case 'y':
      v.number = static_cast<double>(j.priority());
      break;
    case 'N':
      v.number = static_cast<double>(j.priority_factors().nice());
      break;
    case 'r':
      v.text = j.partition();
      break;
    case 'u':
      v.text = j.user();
      break;
    default:
      break;
  }
  return v;
}

}  // namespace

int CmdSprio(int argc, char** argv) {
  bool longer = false, norm = false, weights_only = false, header = true;
  std::string format, sort = "i", clusters;
  v1::ListJobsRequest req;
  req.add_states(v1::PENDING);
  const struct option opts[] = {{"long", no_argument, nullptr, 'l'},
                                {"norm", no_argument, nullptr, 'n'},
                                {"weights", no_argument, nullptr, 'w'},
                                {"noheader", no_argument, nullptr, 'h'},
                                {"jobs", required_argument, nullptr, 'j'},
                                {"user", required_argument, nullptr, 'u'},
                                {"users", required_argument, nullptr, 'u'},
                                {"partition", required_argument, nullptr, 'p'},
                                {"format", required_argument, nullptr, 'o'},
                                {"sort", required_argument, nullptr, 'S'},
                                {"clusters", required_argument, nullptr, 'M'},
                                {"cluster", required_argument, nullptr, 'M'},
                                {"verbose", no_argument, nullptr, 'v'},
                                {"version", no_argument, nullptr, 'V'},
                                {"federation", no_argument, nullptr, kOptFederation},
                                {"local", no_argument, nullptr, kOptLocal},
                                {"sibling", no_argument, nullptr, kOptSibling},
                                {"help", no_argument, nullptr, kOptHelp},
                                {"usage", no_argument, nullptr, kOptHelp},
                                {nullptr, 0, nullptr, 0}};
  optind = 0;
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":lnwhj:u:p:o:S:M:vV", opts, nullptr)) != -1;) {
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
      case 'o':
        format = optarg;
        break;
      case 'S':
        sort = optarg;
        break;
      case 'M':
        clusters = optarg;
        break;
      case 'v':             // nothing more to tell than the listing
      case kOptFederation:  // no federation: this cluster's jobs are all there are
      case kOptLocal:
      case kOptSibling:
        break;
      case 'V':
        std::printf("slurm %s\nmuster %s\n", kSlurmCompatVersion, kVersion);
        return kExitOk;
      case kOptHelp:
        PrintSprioHelp();
        return kExitOk;
      case ':':
        return Usage("sprio", "option '" + std::string(argv[optind - 1]) + "' needs a value");
      default:
        return Usage("sprio",
                     "unknown or incomplete option '" + std::string(argv[optind - 1]) + "'");
    }
  }
  if (optind < argc)
    return Usage("sprio", "unexpected argument '" + std::string(argv[optind]) + "'");
  std::vector<FormatItem> items;
  if (!format.empty()) {
    auto parsed = ParseFormatSpec(format, kSprioLetters);
    if (!parsed.ok()) return Usage("sprio", parsed.status().message());
    items = std::move(*parsed);
  }
  auto keys = ParseSortKeys(sort, kSprioLetters);
  if (!keys.ok()) return Usage("sprio", keys.status().message());
  auto controller = ConnectController(clusters);
  if (!controller.ok()) return Fail("sprio", controller.status());
  std::string cluster;
  for (const FormatItem& f : items) {
    if (f.letter == 'c' && cluster.empty()) {
      if (auto config = LoadConfig(ResolveConfigPath("")); config.ok()) {
        cluster = config->cluster_name;
      }
    }
  }
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
  std::vector<v1::JobInfo> jobs;
  for (const v1::JobInfo& j : resp->jobs()) {
    if (j.state() == v1::PENDING) jobs.push_back(j);
  }
  SortRows<v1::JobInfo>(
      jobs, *keys, [&](char letter, const v1::JobInfo& j) { return SortValueOf(letter, j, w); });
  if (!items.empty()) {
    std::string out;
    if (header) RenderLine(items, Header, /*trim=*/false, out);
    for (const v1::JobInfo& j : jobs) {
      RenderLine(
          items, [&](char letter) { return Field(letter, j, w, cluster); }, /*trim=*/false, out);
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return kExitOk;
  }
  if (header) std::printf("%s\n", head.c_str());
  for (const v1::JobInfo& j : jobs) {
    const v1::PriorityFactors& f = j.priority_factors();
    auto cell = [&](double factor, uint32_t weight) {
      return Right(norm ? Factor(factor) : Weighted(factor, weight), 10);
    };
    std::string line = Right(std::to_string(j.id()), 15) + " " + Right(j.partition(), 9) + " ";
    if (longer) line += Right(j.user(), 8) + " " + Right(j.account(), 10) + " ";
    line += Right(norm ? Factor(NormPriority(j)) : std::to_string(j.priority()), 10) + " " +
            Right(norm ? Factor(0) : "0", 10) + " " + cell(f.age(), w.age()) + " " +
            cell(f.fairshare(), w.fairshare()) + " " + cell(f.size(), w.size()) + " " +
            cell(f.partition(), w.partition()) + " " + cell(f.qos(), w.qos());
    if (longer) line += " " + Right(std::to_string(f.nice()), 6);
    std::printf("%s\n", line.c_str());
  }
  return kExitOk;
}

}  // namespace muster::cli
