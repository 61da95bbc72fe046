#include "sinfo_format.h"

#include <pwd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <optional>

#include "muster/common/duration.h"
#include "muster/common/hostlist.h"
#include "muster/common/strings.h"

namespace muster::cli {
namespace {

// The -o letters of sinfo's manual page, all printed here.
constexpr char kSinfoLetters[] = "aAbBcCdDeEfFgGhHIlLmMnNoOpPrRsStTuUvVwXYZz";

// Fields that only -O names (no -o letter of their own): digits, which -o reads as a width and so
// can never reach as a letter.
constexpr char kAllocMem = '1', kComment = '2', kExtra = '3', kGresUsed = '4', kPort = '5',
               kStateComplete = '6';

bool Busy(const v1::NodeInfo& n) {
  return n.state() == v1::NODE_MIXED || n.state() == v1::NODE_ALLOCATED;
}

std::string ShortStateOf(const v1::NodeInfo& n);

// sinfo's short (%t) state name (SinfoLongState: the long one, %T), with Slurm's reboot marks:
// @ a reboot waits, boot^ it was issued.
std::string ShortState(const v1::NodeInfo& n) {
  if (n.reboot() == "issued") return "boot^";
  if (n.reboot() == "requested") return ShortStateOf(n) + "@";
  return ShortStateOf(n);
}

std::string ShortStateOf(const v1::NodeInfo& n) {
  if (n.drain()) return n.state() == v1::NODE_DOWN ? "down" : Busy(n) ? "drng" : "drain";
  switch (n.state()) {
    case v1::NODE_IDLE:
      // An idle node in an active advance reservation (as Slurm's: busy nodes say so instead).
      if (!n.reservation().empty()) return n.maint() ? "maint" : "resv";
      return "idle";
    case v1::NODE_MIXED:
      return "mix";
    case v1::NODE_ALLOCATED:
      return "alloc";
    case v1::NODE_NOT_RESPONDING:
      return "idle*";
    case v1::NODE_DOWN:
      return "down";
    default:
      return "unk";
  }
}

// -O StateComplete: the base state and every flag, as "idle+drain".
std::string CompleteState(const v1::NodeInfo& n) {
  std::string s;
  switch (n.state()) {
    case v1::NODE_IDLE:
      s = "idle";
      break;
    case v1::NODE_MIXED:
      s = "mixed";
      break;
    case v1::NODE_ALLOCATED:
      s = "allocated";
      break;
    case v1::NODE_NOT_RESPONDING:
      s = "idle+not_responding";
      break;
    case v1::NODE_DOWN:
      s = "down";
      break;
    default:
      s = "unknown";
  }
  if (!n.reservation().empty()) s += n.maint() ? "+maint" : "+reserved";
  if (n.drain()) s += "+drain";
  if (!n.reboot().empty()) s += "+reboot_" + n.reboot();
  return s;
}

std::string Gres(const v1::NodeInfo& n, bool used) {
  std::vector<std::string> parts;
  if (n.gpus()) {
    parts.push_back("gpu:" + (n.gpu_type().empty() ? "" : n.gpu_type() + ":") +
                    std::to_string(used ? n.gpus_allocated() : n.gpus()));
  }
  const std::string& other = used ? n.gres_used() : n.gres();
  if (!other.empty()) parts.push_back(other);
  return parts.empty() ? "(null)" : Join(parts, ",");
}

std::string ReasonUser(const v1::NodeInfo& n) {
  if (!n.reason_user().empty()) return n.reason_user();
  return n.reason().empty() ? "Unknown" : "muster";  // set by Muster itself (lost, health)
}

// "alice(1000)": %U, who set the reason and their uid.
std::string ReasonUserLong(const v1::NodeInfo& n) {
  const std::string user = ReasonUser(n);
  struct passwd pw, *out = nullptr;
  char buf[4096];
  if (getpwnam_r(user.c_str(), &pw, buf, sizeof buf, &out) != 0 || !out) return user;
  return user + "(" + std::to_string(pw.pw_uid) + ")";
}

// A row's value of a per-node number: the smallest, with '+' when its nodes differ (as sinfo
// prints a group of unequal nodes without -e), or "MIN-MAX" for a changing figure (free memory).
std::string Spread(const SinfoRow& r, const std::function<uint64_t(const v1::NodeInfo&)>& of,
                   bool range = false) {
  uint64_t lo = of(*r.nodes.front()), hi = lo;
  for (const auto* n : r.nodes) {
    lo = std::min(lo, of(*n));
    hi = std::max(hi, of(*n));
  }
  if (lo == hi) return std::to_string(lo);
  return std::to_string(lo) + (range ? "-" + std::to_string(hi) : "+");
}

std::string Field(char letter, const SinfoRow& r, const std::string& cluster) {
  const v1::NodeInfo& n = *r.nodes.front();
  const PartitionConfig* p = r.part;
  auto list = [&](const std::function<std::string(const v1::NodeInfo&)>& of) {
    std::vector<std::string> v;
    for (const auto* x : r.nodes) v.push_back(of(*x));
    return CompressHostlist(v);
  };
  switch (letter) {
    case 'P':
      return p ? p->name + (p->is_default ? "*" : "") : "";
    case 'R':
      return p ? p->name : "";
    case 'a':
      return "up";
    case 'l':
      return !p ? "" : p->max_time_ms > 0 ? FormatDuration(p->max_time_ms) : "infinite";
    case 'L':
      return !p ? "" : p->default_time_ms > 0 ? FormatDuration(p->default_time_ms) : "n/a";
    case 'B':
      return "UNLIMITED";  // no MaxCPUsPerNode
    case 'g':
      return !p || p->allowed_uids.empty() ? "all" : Join(p->allowed_uids, ",");
    case 'h':
      return "NO";
    case 'I':
      return "1";
    case 'M':
      return p ? ToUpper(p->preempt_mode) : "";
    case 'p':
      return p ? std::to_string(p->priority_tier) : "";
    case 'r':
      return "no";
    case 's':
      return "1-infinite";
    case 'S':
      return "all";
    case 'V':
      return cluster;
    case 'D':
      return std::to_string(r.nodes.size());
    case 't':
      return ShortState(n);
    case 'T':
      return SinfoLongState(n);
    case kStateComplete:
      return CompleteState(n);
    case 'N':
    case 'n':
      return list([](const v1::NodeInfo& x) { return x.name(); });
    case 'o':
      return list([](const v1::NodeInfo& x) {
        const std::string& a = x.agent_address();
        return a.empty() ? x.name() : a.substr(0, a.rfind(':'));
      });
    case kPort: {
      const std::string& a = n.agent_address();
      return a.find(':') == std::string::npos ? "0" : a.substr(a.rfind(':') + 1);
    }
    case 'c':
      return Spread(r, [](const v1::NodeInfo& x) { return x.cpus(); });
    case 'C': {
      uint32_t alloc = 0, total = 0, other = 0;
      for (const auto* x : r.nodes) {
        alloc += x->cpus_allocated();
        total += x->cpus();
        if (x->drain() || x->state() == v1::NODE_DOWN) other += x->cpus() - x->cpus_allocated();
      }
      return std::to_string(alloc) + "/" + std::to_string(total - alloc - other) + "/" +
             std::to_string(other) + "/" + std::to_string(total);
    }
    case 'X':
      return Spread(r, Sockets);
    case 'Y':
      return Spread(r, CoresPerSocket);
    case 'Z':
      return Spread(r, ThreadsPerCore);
    case 'z': {
      auto stc = [](const v1::NodeInfo& x) {
        return std::to_string(Sockets(x)) + ":" + std::to_string(CoresPerSocket(x)) + ":" +
               std::to_string(ThreadsPerCore(x));
      };
      for (const auto* x : r.nodes) {
        if (stc(*x) != stc(n)) return stc(n) + "+";
      }
      return stc(n);
    }
    case 'G':
      return Gres(n, false);
    case kGresUsed:
      return Gres(n, true);
    case 'm':
      return Spread(r, [](const v1::NodeInfo& x) { return x.memory_mb(); });
    case 'e':
      return Spread(
          r, [](const v1::NodeInfo& x) { return x.memory_mb() - x.memory_allocated_mb(); }, true);
    case kAllocMem:
      return Spread(
          r, [](const v1::NodeInfo& x) { return x.memory_allocated_mb(); }, true);
    case 'd':
      return Spread(r, [](const v1::NodeInfo& x) { return x.tmp_disk_mb(); });  // TmpDisk
    case 'w':  // an older controller sends no weight: every node weighed 1 then
      return Spread(r, [](const v1::NodeInfo& x) { return x.has_features() ? x.weight() : 1u; });
    case 'O':
    case 'v':
      return "N/A";  // no load figures; agents' versions are not recorded
    case 'E':
      return n.reason().empty() ? "none" : n.reason();
    case 'H':
      return n.reason_time_ms() ? FormatTimestamp(n.reason_time_ms()) : "Unknown";
    case 'u':
      return ReasonUser(n);
    case 'U':
      return ReasonUserLong(n);
    case 'f':
    case 'b':
      return r.features.empty() ? "(null)" : r.features;
    case kComment:
    case kExtra:
      return "(null)";
    case 'A':
    case 'F': {
      // Nodes allocated/idle(/other/total), as sinfo -s shows them.
      size_t busy = 0, idle = 0, other = 0;
      for (const auto* x : r.nodes) {
        if (x->drain() || !SinfoNodeResponding(*x)) {
          ++other;
        } else if (Busy(*x)) {
          ++busy;
        } else {
          ++idle;
        }
      }
      if (letter == 'A') return std::to_string(busy) + "/" + std::to_string(idle);
      return std::to_string(busy) + "/" + std::to_string(idle) + "/" + std::to_string(other) + "/" +
             std::to_string(r.nodes.size());
    }
    default:
      return "";
  }
}

const char* Header(char letter) {
  switch (letter) {
    case 'P':
    case 'R':
      return "PARTITION";
    case 'a':
      return "AVAIL";
    case 'A':
      return "NODES(A/I)";
    case 'b':
      return "ACTIVE_FEATURES";
    case 'B':
      return "MAX_CPUS_PER_NODE";
    case 'l':
      return "TIMELIMIT";
    case 'L':
      return "DEFAULTTIME";
    case 'D':
      return "NODES";
    case 'd':
      return "TMP_DISK";
    case 't':
    case 'T':
      return "STATE";
    case kStateComplete:
      return "STATECOMPLETE";
    case 'N':
      return "NODELIST";
    case 'n':
      return "HOSTNAMES";
    case 'o':
      return "NODE_ADDR";
    case kPort:
      return "PORT";
    case 'c':
      return "CPUS";
    case 'C':
      return "CPUS(A/I/O/T)";
    case 'g':
      return "GROUPS";
    case 'G':
      return "GRES";
    case kGresUsed:
      return "GRES_USED";
    case 'h':
      return "OVERSUBSCRIBE";
    case 'H':
      return "TIMESTAMP";
    case 'I':
      return "PRIO_JOB_FACTOR";
    case 'm':
      return "MEMORY";
    case 'M':
      return "PREEMPT_MODE";
    case 'e':
      return "FREE_MEM";
    case kAllocMem:
      return "ALLOCMEM";
    case 'O':
      return "CPU_LOAD";
    case 'p':
      return "PRIO_TIER";
    case 'r':
      return "ROOT";
    case 's':
      return "JOB_SIZE";
    case 'S':
      return "ALLOCNODES";
    case 'E':
      return "REASON";
    case 'u':
    case 'U':
      return "USER";
    case 'v':
      return "VERSION";
    case 'V':
      return "CLUSTER";
    case 'w':
      return "WEIGHT";
    case 'X':
      return "SOCKETS";
    case 'Y':
      return "CORES";
    case 'Z':
      return "THREADS";
    case 'z':
      return "S:C:T";
    case 'f':
      return "AVAIL_FEATURES";
    case 'F':
      return "NODES(A/I/O/T)";
    case kComment:
      return "COMMENT";
    case kExtra:
      return "EXTRA";
    default:
      return "";
  }
}

// Names compared as people read them: digit runs by value ("node2" before "node10").
int NaturalCompare(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      size_t ei = i, ej = j;
      while (ei < a.size() && digit(a[ei])) ++ei;
      while (ej < b.size() && digit(b[ej])) ++ej;
      std::string x = a.substr(i, ei - i), y = b.substr(j, ej - j);
      x.erase(0, std::min(x.find_first_not_of('0'), x.size()));
      y.erase(0, std::min(y.find_first_not_of('0'), y.size()));
      if (x.size() != y.size()) return x.size() < y.size() ? -1 : 1;
      if (int c = x.compare(y)) return c < 0 ? -1 : 1;
      i = ei;
      j = ej;
    } else {
      if (a[i] != b[j]) return a[i] < b[j] ? -1 : 1;
      ++i;
      ++j;
    }
  }
  if (i < a.size()) return 1;
  return j < b.size() ? -1 : 0;
}

// How -S compares two rows by one field: numbers by value, time limits by length ("infinite"
// last), partitions by their place in the configuration under "#P", names naturally.
int CompareBy(char letter, bool config_order, const SinfoRow& a, const SinfoRow& b,
              const Config& config, const std::string& cluster) {
  auto number = [&](const SinfoRow& r) -> std::optional<double> {
    auto min_of = [&](const std::function<uint64_t(const v1::NodeInfo&)>& of) {
      uint64_t lo = of(*r.nodes.front());
      for (const auto* n : r.nodes) lo = std::min(lo, of(*n));
      return static_cast<double>(lo);
    };
    constexpr double kInfinite = 1e300;
    switch (letter) {
      case 'D':
        return static_cast<double>(r.nodes.size());
      case 'c':
        return min_of([](const v1::NodeInfo& n) { return n.cpus(); });
      case 'm':
        return min_of([](const v1::NodeInfo& n) { return n.memory_mb(); });
      case 'e':
        return min_of(
            [](const v1::NodeInfo& n) { return n.memory_mb() - n.memory_allocated_mb(); });
      case kAllocMem:
        return min_of([](const v1::NodeInfo& n) { return n.memory_allocated_mb(); });
      case 'X':
        return min_of(Sockets);
      case 'Y':
        return min_of(CoresPerSocket);
      case 'Z':
        return min_of(ThreadsPerCore);
      case 'p':
        return r.part ? static_cast<double>(r.part->priority_tier) : 0;
      case 'l':
        return !r.part || r.part->max_time_ms <= 0 ? kInfinite
                                                   : static_cast<double>(r.part->max_time_ms);
      case 'L':
        return !r.part || r.part->default_time_ms <= 0
                   ? kInfinite
                   : static_cast<double>(r.part->default_time_ms);
      case 'H':
        return static_cast<double>(r.nodes.front()->reason_time_ms());
      case 'P':
      case 'R':
        if (!config_order) return std::nullopt;
        return r.part ? static_cast<double>(r.part - config.partitions.data()) : 0;
      default:
        return std::nullopt;
    }
  };
  if (auto x = number(a)) {
    const double y = *number(b);
    return *x < y ? -1 : *x > y ? 1 : 0;
  }
  return NaturalCompare(Field(letter, a, cluster), Field(letter, b, cluster));
}

}  // namespace

uint32_t Sockets(const v1::NodeInfo& n) { return std::max<uint32_t>(1, n.packages()); }
uint32_t CoresPerSocket(const v1::NodeInfo& n) {
  return n.packages() && n.cores() ? n.cores() / n.packages() : n.cpus();
}
uint32_t ThreadsPerCore(const v1::NodeInfo& n) {
  return n.cores() && n.threads() ? std::max<uint32_t>(1, n.threads() / n.cores()) : 1;
}

Result<std::vector<FormatItem>> ParseSinfoFormat(std::string format) {
  std::string all;
  for (const char* l = kSinfoLetters; *l; ++l)
    all += std::string(all.empty() ? "" : "|") + "%" + *l;
  for (size_t at; (at = format.find("%all")) != std::string::npos;) format.replace(at, 4, all);
  return ParseFormatSpec(format, kSinfoLetters);
}

Result<std::vector<FormatItem>> ParseSinfoLongFormat(const std::string& format) {
  static const std::map<std::string, char> kNames = {
      {"allocmem", kAllocMem},
      {"allocnodes", 'S'},
      {"available", 'a'},
      {"cluster", 'V'},
      {"comment", kComment},
      {"cores", 'Y'},
      {"cpus", 'c'},
      {"cpusload", 'O'},
      {"cpusstate", 'C'},
      {"defaulttime", 'L'},
      {"disk", 'd'},
      {"extra", kExtra},
      {"features", 'f'},
      {"features_act", 'b'},
      {"freemem", 'e'},
      {"gres", 'G'},
      {"gresused", kGresUsed},
      {"groups", 'g'},
      {"maxcpuspernode", 'B'},
      {"memory", 'm'},
      {"nodeaddr", 'o'},
      {"nodeai", 'A'},
      {"nodeaiot", 'F'},
      {"nodehost", 'n'},
      {"nodelist", 'N'},
      {"nodes", 'D'},
      {"oversubscribe", 'h'},
      {"partition", 'P'},
      {"partitionname", 'R'},
      {"port", kPort},
      {"preemptmode", 'M'},
      {"priorityjobfactor", 'I'},
      {"prioritytier", 'p'},
      {"priority", 'p'},
      {"reason", 'E'},
      {"root", 'r'},
      {"share", 'h'},
      {"size", 's'},
      {"socketcorethread", 'z'},
      {"sockets", 'X'},
      {"statecompact", 't'},
      {"statelong", 'T'},
      {"statecomplete", kStateComplete},
      {"threads", 'Z'},
      {"time", 'l'},
      {"timelimit", 'l'},  // squeue's name for it
      {"timestamp", 'H'},
      {"user", 'u'},
      {"userlong", 'U'},
      {"version", 'v'},
      {"weight", 'w'},
  };
  std::vector<FormatItem> items;
  for (const std::string& part : Split(format, ',', true)) {
    const size_t colon = part.find(':');
    const std::string name = ToLower(part.substr(0, colon));
    if (name == "all") {
      auto all = ParseSinfoFormat("%all");
      if (!all.ok()) return all.status();
      items.insert(items.end(), all->begin(), all->end());
      continue;
    }
    auto it = kNames.find(name);
    if (it == kNames.end()) {
      std::string known = "All";
      for (const auto& [k, v] : kNames) known += " " + k;
      return InvalidArgument("-O/--Format field '" + part.substr(0, colon) +
                             "' is not supported (supported: " + known + ")");
    }
    FormatItem f;
    f.letter = it->second;
    f.width = 20;
    std::string suffix;
    if (colon != std::string::npos) {
      std::string w = part.substr(colon + 1);
      if (!w.empty() && w[0] == '.') {
        f.right = true;
        w.erase(0, 1);
      }
      size_t digits = 0;
      while (digits < w.size() && w[digits] >= '0' && w[digits] <= '9') ++digits;
      if (digits) {
        auto n = ParseUint(w.substr(0, digits));
        if (!n || *n == 0 || *n > 1000) {
          return InvalidArgument("bad width in -O/--Format field '" + part + "'");
        }
        f.width = static_cast<size_t>(*n);
      }
      suffix = w.substr(digits);
    }
    items.push_back(f);
    if (!suffix.empty()) items.push_back({suffix});
  }
  if (items.empty()) return InvalidArgument("-O/--Format lists no fields");
  return items;
}

Result<std::vector<std::string>> ParseSinfoSort(const std::string& spec) {
  std::vector<std::string> keys;
  for (const std::string& item : Split(spec, ',', true)) {
    std::string key = "+";
    size_t i = 0;
    if (i < item.size() && (item[i] == '+' || item[i] == '-')) key[0] = item[i++];
    if (i < item.size() && item[i] == '#') {
      key += '#';
      ++i;
    }
    if (i + 1 != item.size() || !std::strchr(kSinfoLetters, item[i]) ||
        (key.back() == '#' && item[i] != 'P')) {
      std::string known;
      for (const char* l = kSinfoLetters; *l; ++l) known += *l;
      return InvalidArgument("-S/--sort: '" + item + "' is not a field (one of " + known +
                             ", each after + or -; #P for the configuration's order)");
    }
    keys.push_back(key + item[i]);
  }
  if (keys.empty()) return InvalidArgument("-S/--sort names no field");
  return keys;
}

std::string SinfoDefaultFormat(const SinfoView& view) {
  if (view.reasons) return view.long_form ? "%20E %12U %19H %6t %N" : "%20E %9u %19H %N";
  if (view.summarize) return "%#P %.5a %.10l %.16F  %N";
  if (view.node_view) {
    return view.long_form ? "%#N %.6D %.#P %.11T %4c %.8z %.6m %.8d %.6w %.8f %20E"
                          : "%#N %.6D %#P %6t";
  }
  return view.long_form ? "%#P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N"
                        : "%#P %.5a %.10l %.6D %.6t %N";
}

std::string SinfoFitWidths(const std::string& format, const std::vector<SinfoRow>& rows) {
  size_t part_w = 9, node_w = 9;
  for (const SinfoRow& r : rows) {
    part_w = std::max(part_w, Field('P', r, "").size());
    node_w = std::max(node_w, Field('N', r, "").size());
  }
  std::string f = format;
  for (size_t at; (at = f.find("#P")) != std::string::npos;)
    f.replace(at, 1, std::to_string(part_w));
  for (size_t at; (at = f.find("#N")) != std::string::npos;)
    f.replace(at, 1, std::to_string(node_w));
  return f;
}

std::string SinfoLongState(const v1::NodeInfo& n) {
  if (n.drain()) return n.state() == v1::NODE_DOWN ? "down" : Busy(n) ? "draining" : "drained";
  switch (n.state()) {
    case v1::NODE_IDLE:
      if (!n.reservation().empty()) return n.maint() ? "maint" : "reserved";
      return "idle";
    case v1::NODE_MIXED:
      return "mixed";
    case v1::NODE_ALLOCATED:
      return "allocated";
    case v1::NODE_NOT_RESPONDING:
      return "idle*";
    case v1::NODE_DOWN:
      return "down";
    default:
      return "unknown";
  }
}

bool SinfoNodeResponding(const v1::NodeInfo& n) {
  return n.state() != v1::NODE_DOWN && n.state() != v1::NODE_NOT_RESPONDING &&
         n.state() != v1::NODE_UNKNOWN;
}

std::string SinfoGroupKey(const v1::NodeInfo& n, const std::string& features,
                          const std::set<char>& shown, bool exact) {
  std::string key;
  auto add = [&](std::initializer_list<char> letters, const std::string& value) {
    for (char l : letters) {
      if (shown.count(l)) {
        key += value + '\x1f';
        return;
      }
    }
  };
  add({'t', 'T', kStateComplete}, CompleteState(n) + (SinfoNodeResponding(n) ? "" : "*"));
  add({'f', 'b'}, features);
  add({'G'}, Gres(n, false));
  add({kGresUsed}, Gres(n, true));
  add({'E'}, n.reason());
  add({'H'}, std::to_string(n.reason_time_ms()));
  add({'u', 'U'}, n.reason_user());
  if (exact) {
    key += std::to_string(n.cpus()) + "/" + std::to_string(n.memory_mb()) + "/" +
           std::to_string(n.packages()) + "/" + std::to_string(n.cores()) + "/" +
           std::to_string(n.threads());
  }
  return key;
}

std::string SinfoReasonGroupKey(const v1::NodeInfo& n, const std::set<char>& shown) {
  return n.reason() + "\x1f" + n.reason_user() + "\x1f" + std::to_string(n.reason_time_ms()) +
         "\x1f" + (shown.count('t') || shown.count('T') ? ShortState(n) : "");
}

void SortSinfoRows(std::vector<SinfoRow>& rows, const std::vector<std::string>& keys,
                   const Config& config) {
  std::stable_sort(rows.begin(), rows.end(), [&](const SinfoRow& a, const SinfoRow& b) {
    for (const std::string& k : keys) {
      const int c = CompareBy(k.back(), k.size() == 3, a, b, config, config.cluster_name);
      if (c) return k[0] == '-' ? c > 0 : c < 0;
    }
    return false;
  });
}

void RenderSinfo(const std::vector<FormatItem>& items, const std::vector<SinfoRow>& rows,
                 bool header, const std::string& cluster, std::string& out) {
  if (header)
    RenderLine(
        items, [](char l) { return std::string(Header(l)); }, true, out);
  for (const SinfoRow& r : rows) {
    RenderLine(
        items, [&](char l) { return Field(l, r, cluster); }, true, out);
  }
}

}  // namespace muster::cli
