#include "muster/common/cpu_bind.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "muster/common/strings.h"

namespace muster {
namespace {

constexpr size_t kMaxListEntries = 4096;  // after *R repetitions
// Ids over the whole list after *R repetitions (16 masks of every id): a list is expanded by srun
// and by the node's step supervisor, which runs as root, so what it may cost is bounded.
constexpr uint64_t kMaxListIds = uint64_t{1} << 20;
constexpr uint32_t kMaxId = 65535;
constexpr size_t kMaxMaskDigits = kMaxId / 4 + 1;

using Kind = CpuBind::Kind;

std::optional<int> HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return std::nullopt;
}

bool HasHexPrefix(std::string_view s) {
  return s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
}

// The ids a hexadecimal mask sets (bit N: id N); nullopt when it is not one.
std::optional<std::vector<uint32_t>> MaskIds(std::string_view s) {
  if (HasHexPrefix(s)) s.remove_prefix(2);
  if (s.empty() || s.size() > kMaxMaskDigits) return std::nullopt;
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < s.size(); ++i) {
    auto d = HexDigit(s[s.size() - 1 - i]);
    if (!d) return std::nullopt;
    for (uint32_t bit = 0; bit < 4; ++bit) {
      if (*d >> bit & 1) ids.push_back(static_cast<uint32_t>(i * 4 + bit));
    }
  }
  return ids;
}

// A map item: decimal, or hexadecimal after 0x.
std::optional<uint32_t> MapId(std::string_view s) {
  std::optional<uint64_t> n;
  if (HasHexPrefix(s)) {
    uint64_t v = 0;
    for (char c : s.substr(2)) {
      auto d = HexDigit(c);
      if (!d || v > kMaxId) return std::nullopt;
      v = v * 16 + static_cast<uint64_t>(*d);
    }
    n = v;
  } else {
    n = ParseUint(s);
  }
  if (!n || *n > kMaxId) return std::nullopt;
  return static_cast<uint32_t>(*n);
}

// What each word names: a verbosity, a type without a list, or a type whose list follows.
struct Word {
  const char* name;
  Kind kind;  // kUnset: a verbosity
  bool verbose;
  bool takes_list;
};
constexpr Word kWords[] = {
    {"q", Kind::kUnset, false, false},         {"quiet", Kind::kUnset, false, false},
    {"v", Kind::kUnset, true, false},          {"verbose", Kind::kUnset, true, false},
    {"no", Kind::kNone, false, false},         {"none", Kind::kNone, false, false},
    {"thread", Kind::kThreads, false, false},  {"threads", Kind::kThreads, false, false},
    {"core", Kind::kCores, false, false},      {"cores", Kind::kCores, false, false},
    {"socket", Kind::kSockets, false, false},  {"sockets", Kind::kSockets, false, false},
    {"ldom", Kind::kLdoms, false, false},      {"ldoms", Kind::kLdoms, false, false},
    {"rank", Kind::kRank, false, false},       {"rank_ldom", Kind::kRankLdom, false, false},
    {"map_cpu", Kind::kMapCpu, false, true},   {"mask_cpu", Kind::kMaskCpu, false, true},
    {"map_ldom", Kind::kMapLdom, false, true}, {"mask_ldom", Kind::kMaskLdom, false, true},
};

const Word* Lookup(std::string_view word) {
  const std::string w = ToLower(word);
  for (const Word& k : kWords) {
    if (w == k.name) return &k;
  }
  return nullptr;
}

bool IsVerbosity(std::string_view word) {
  const Word* w = Lookup(word);
  return w && w->kind == Kind::kUnset;
}

// The long form: the last of a kind's words.
const char* KindName(Kind k) {
  const char* name = "";
  for (const Word& w : kWords) {
    if (w.kind == k && k != Kind::kUnset) name = w.name;
  }
  return name;
}

Status ParseList(const std::string& whole, const std::vector<std::string>& items, CpuBind* b) {
  const bool mask = b->kind == Kind::kMaskCpu || b->kind == Kind::kMaskLdom;
  uint64_t total_ids = 0;
  for (const std::string& item : items) {
    const size_t star = item.find('*');
    const std::string_view value = std::string_view(item).substr(0, star);
    std::vector<uint32_t> ids;
    if (mask) {
      auto m = MaskIds(value);
      if (!m) return InvalidArgument("--cpu-bind=" + whole + ": bad mask '" + item + "'");
      if (m->empty()) return InvalidArgument("--cpu-bind=" + whole + ": a mask names no CPU");
      ids = std::move(*m);
    } else {
      auto id = MapId(value);
      if (!id) return InvalidArgument("--cpu-bind=" + whole + ": bad id '" + item + "'");
      ids.push_back(*id);
    }
    uint64_t times = 1;
    if (star != std::string::npos) {
      auto r = ParseUint(item.substr(star + 1));
      if (!r || *r == 0) return InvalidArgument("--cpu-bind=" + whole + ": bad repetition");
      times = *r;
    }
    if (times > kMaxListEntries || b->list.size() + times > kMaxListEntries) {
      return InvalidArgument("--cpu-bind=" + whole + ": more than 4096 entries");
    }
    // times <= 4096 and ids.size() <= 65536: no overflow.
    total_ids += times * ids.size();
    if (total_ids > kMaxListIds) {
      return InvalidArgument("--cpu-bind=" + whole.substr(0, 64) +
                             (whole.size() > 64 ? "...: " : ": ") + "the list names more than " +
                             std::to_string(kMaxListIds) + " ids in all (repetitions counted)");
    }
    b->list.insert(b->list.end(), times, ids);
  }
  if (b->list.empty()) return InvalidArgument("--cpu-bind=" + whole + ": an empty list");
  return Status::Ok();
}

// The step's CPUs here, each with where it sits.
struct Place {
  uint32_t id, socket, core, ldom;
};

std::string Held(const std::vector<uint32_t>& held) { return FormatCpuList(held); }

// The step's CPUs on one socket, core by core, as they are dealt to tasks.
struct Core {
  std::vector<uint32_t> ids;  // its threads the step holds
  size_t used = 0;            // how many are dealt
};
struct Socket {
  std::vector<Core> cores;
  size_t next = 0;  // the core the next thread comes from (cyclic, fcyclic)
  size_t free = 0;  // threads not dealt
};

// Deals threads to tasks one task at a time: across sockets by the distribution (a task starts
// on the socket after the previous task's with cyclic, on the first with room with block, and
// takes each thread from the next socket with fcyclic), and across a socket's cores the same
// way. With whole_cores a task takes whole cores. Once every thread is dealt it starts again.
struct Dealer {
  std::vector<Socket> sockets;
  CpuDistribution dist;
  bool whole_cores;
  size_t socket = 0;  // where the next task starts (cyclic, fcyclic)

  size_t Free() const {
    size_t n = 0;
    for (const Socket& s : sockets) n += s.free;
    return n;
  }
  void Refill() {
    for (Socket& s : sockets) {
      s.next = 0;
      s.free = 0;
      for (Core& c : s.cores) {
        c.used = 0;
        s.free += c.ids.size();
      }
    }
  }
  // Up to `need` threads from socket `s`, appended to `share`; how many.
  size_t TakeFrom(Socket& s, size_t need, std::vector<uint32_t>* share) {
    size_t taken = 0;
    while (taken < need && s.free > 0) {
      size_t k = s.next % s.cores.size();
      while (s.cores[k].used == s.cores[k].ids.size()) k = (k + 1) % s.cores.size();
      Core& c = s.cores[k];
      bool moved = false;
      while (c.used < c.ids.size() && (taken < need || whole_cores)) {
        share->push_back(c.ids[c.used++]);
        ++taken;
        --s.free;
        if (dist == CpuDistribution::kFcyclic && !whole_cores) {
          moved = true;
          break;
        }
      }
      // Block stays on a core until it is full; cyclic moves on after each task's share there.
      const bool full = c.used == c.ids.size();
      s.next = full || moved || dist != CpuDistribution::kBlock ? k + 1 : k;
    }
    return taken;
  }
  std::vector<uint32_t> Deal(size_t want) {
    std::vector<uint32_t> share;
    size_t got = 0;
    bool first = true;
    size_t at = dist == CpuDistribution::kBlock ? 0 : socket;
    while (got < want) {
      if (Free() == 0) Refill();  // more tasks than threads: they share
      size_t s = at % sockets.size();
      while (sockets[s].free == 0) s = (s + 1) % sockets.size();
      const size_t one = dist == CpuDistribution::kFcyclic ? 1 : want - got;
      got += TakeFrom(sockets[s], one, &share);
      if (first && dist == CpuDistribution::kCyclic) socket = s + 1;
      first = false;
      at = dist == CpuDistribution::kFcyclic ? s + 1 : s;
    }
    if (dist == CpuDistribution::kFcyclic) socket = at;
    return share;
  }
};

}  // namespace

Result<CpuBind> ParseCpuBind(std::string_view value) {
  const std::string whole(value);
  CpuBind b;
  const std::vector<std::string> words = Split(whole, ',', true);
  bool typed = false;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    const size_t colon = word.find(':');
    const Word* w = Lookup(std::string_view(word).substr(0, colon));
    if (!w) {
      return InvalidArgument(
          "--cpu-bind=" + whole + ": '" + word +
          "' is not a binding; expected [quiet|verbose,]none, threads, cores, sockets, ldoms, "
          "rank, rank_ldom, map_cpu:LIST, mask_cpu:LIST, map_ldom:LIST or mask_ldom:LIST");
    }
    if (w->kind == Kind::kUnset) {
      if (colon != std::string::npos) {
        return InvalidArgument("--cpu-bind=" + whole + ": bad word '" + word + "'");
      }
      b.verbose = w->verbose;
      continue;
    }
    if (typed) {
      return InvalidArgument("--cpu-bind=" + whole + ": more than one binding type");
    }
    typed = true;
    b.kind = w->kind;
    if (!w->takes_list) {
      if (colon != std::string::npos) {
        return InvalidArgument("--cpu-bind=" + whole + ": " + w->name + " takes no list");
      }
      continue;
    }
    if (colon == std::string::npos) {
      return InvalidArgument("--cpu-bind=" + whole + ": " + w->name + " needs a list (" + w->name +
                             ":LIST)");
    }
    // The list runs on over the following words up to a verbosity.
    std::vector<std::string> items;
    if (colon + 1 < word.size()) items.push_back(word.substr(colon + 1));
    while (i + 1 < words.size() && !IsVerbosity(words[i + 1])) items.push_back(words[++i]);
    b.list_text = Join(items, ",");
    MUSTER_RETURN_IF_ERROR(ParseList(whole, items, &b));
  }
  return b;
}

Result<CpuDistribution> ParseCpuDistribution(std::string_view value) {
  const std::string v = ToLower(value);
  if (v.empty() || v == "*" || v == "cyclic") return CpuDistribution::kCyclic;
  if (v == "block") return CpuDistribution::kBlock;
  if (v == "fcyclic") return CpuDistribution::kFcyclic;
  return InvalidArgument("'" + std::string(value) +
                         "' is not a distribution of CPUs over sockets (block, cyclic or fcyclic)");
}

Result<std::vector<std::vector<uint32_t>>> LayOutTaskCpus(const CpuBind& bind, CpuDistribution dist,
                                                          const CpuTopology& topo,
                                                          const std::vector<uint32_t>& held_in,
                                                          uint32_t ntasks, uint32_t cpus_per_task) {
  std::vector<std::vector<uint32_t>> out;
  if (bind.kind == Kind::kUnset || bind.kind == Kind::kNone || ntasks == 0) return out;
  std::vector<uint32_t> held = held_in;
  std::sort(held.begin(), held.end());
  held.erase(std::unique(held.begin(), held.end()), held.end());
  const std::set<uint32_t> held_set(held.begin(), held.end());
  // The step's CPUs this machine has, socket by socket, core by core.
  std::vector<Place> here;
  for (uint32_t id : held) {
    if (const CpuTopology::Cpu* c = topo.Find(id))
      here.push_back({id, c->socket, c->core, c->ldom});
  }
  if (here.empty()) {
    return FailedPrecondition(
        "--cpu-bind: " + (held.empty()
                              ? std::string("the CPUs the step holds on this node are not known")
                              : "none of the CPUs the step holds on this node (" + Held(held) +
                                    ") is on this machine"));
  }
  std::stable_sort(here.begin(), here.end(), [](const Place& a, const Place& b) {
    return std::tie(a.socket, a.core, a.id) < std::tie(b.socket, b.core, b.id);
  });
  auto on_ldom = [&](uint32_t ldom) {
    std::vector<uint32_t> ids;
    for (const Place& p : here) {
      if (p.ldom == ldom) ids.push_back(p.id);
    }
    return ids;
  };
  auto sorted = [](std::vector<uint32_t> v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  };
  const std::string kind = std::string("--cpu-bind=") + KindName(bind.kind);
  switch (bind.kind) {
    case Kind::kMapCpu:
    case Kind::kMaskCpu:
      for (uint32_t local = 0; local < ntasks; ++local) {
        const std::vector<uint32_t>& ids = bind.list[local % bind.list.size()];
        for (uint32_t id : ids) {
          if (!held_set.count(id)) {
            return FailedPrecondition(kind + " names CPU " + std::to_string(id) +
                                      ", which the step does not hold on this node (it holds " +
                                      Held(held) + ")");
          }
          if (!topo.Find(id)) {
            return FailedPrecondition(kind + " names CPU " + std::to_string(id) +
                                      ", which this machine does not have online");
          }
        }
        out.push_back(sorted(ids));
      }
      return out;
    case Kind::kMapLdom:
    case Kind::kMaskLdom:
      for (uint32_t local = 0; local < ntasks; ++local) {
        std::vector<uint32_t> ids;
        for (uint32_t ldom : bind.list[local % bind.list.size()]) {
          std::vector<uint32_t> cpus = on_ldom(ldom);
          if (cpus.empty()) {
            return FailedPrecondition(kind + " names NUMA node " + std::to_string(ldom) +
                                      ", where the step holds no CPU on this node (it holds " +
                                      Held(held) + ")");
          }
          ids.insert(ids.end(), cpus.begin(), cpus.end());
        }
        out.push_back(sorted(ids));
      }
      return out;
    case Kind::kRankLdom: {
      std::vector<uint32_t> ldoms;
      for (const Place& p : here) ldoms.push_back(p.ldom);
      ldoms = sorted(ldoms);
      for (uint32_t local = 0; local < ntasks; ++local) {
        out.push_back(on_ldom(ldoms[local % ldoms.size()]));
      }
      return out;
    }
    case Kind::kRank: {
      // By the kernel's numbering, not the topology's: task i gets the i-th share.
      std::vector<uint32_t> ids;
      for (const Place& p : here) ids.push_back(p.id);
      ids = sorted(ids);
      const uint64_t c = std::max<uint32_t>(cpus_per_task, 1);
      for (uint32_t local = 0; local < ntasks; ++local) {
        std::vector<uint32_t> mine;
        for (uint64_t k = 0; k < std::min<uint64_t>(c, ids.size()); ++k) {
          mine.push_back(ids[(local * c + k) % ids.size()]);
        }
        out.push_back(sorted(mine));
      }
      return out;
    }
    default:
      break;
  }
  // threads, cores, sockets, ldoms: each task's share of cpus_per_task threads (whole cores for
  // cores) is dealt over the sockets and their cores, then widened to what the binding names.
  std::vector<Socket> sockets;
  for (size_t i = 0; i < here.size(); ++i) {
    const Place& p = here[i];
    if (i == 0 || here[i - 1].socket != p.socket) sockets.push_back({});
    Socket& s = sockets.back();
    if (s.cores.empty() || here[i - 1].core != p.core) s.cores.push_back({});
    s.cores.back().ids.push_back(p.id);
    ++s.free;
  }
  for (Socket& s : sockets) {
    for (Core& c : s.cores) std::sort(c.ids.begin(), c.ids.end());
  }
  Dealer dealer{std::move(sockets), dist, bind.kind == Kind::kCores};
  const size_t want = std::min<size_t>(std::max<uint32_t>(cpus_per_task, 1), here.size());
  for (uint32_t local = 0; local < ntasks; ++local) {
    std::vector<uint32_t> share = dealer.Deal(want);
    std::vector<uint32_t> widened;
    if (bind.kind == Kind::kSockets || bind.kind == Kind::kLdoms) {
      std::set<uint32_t> touched;
      for (uint32_t id : share) {
        const CpuTopology::Cpu* c = topo.Find(id);
        touched.insert(bind.kind == Kind::kSockets ? c->socket : c->ldom);
      }
      for (const Place& p : here) {
        if (touched.count(bind.kind == Kind::kSockets ? p.socket : p.ldom)) widened.push_back(p.id);
      }
    } else {
      widened = std::move(share);
    }
    out.push_back(sorted(std::move(widened)));
  }
  return out;
}

std::string CpuMaskHex(const std::vector<uint32_t>& ids, size_t width, bool upper) {
  uint32_t top = 0;
  for (uint32_t id : ids) top = std::max(top, id);
  std::string digits(ids.empty() ? 1 : top / 4 + 1, '0');
  std::vector<int> nibble(digits.size(), 0);
  for (uint32_t id : ids) nibble[id / 4] |= 1 << (id % 4);
  const char* hex = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  for (size_t i = 0; i < nibble.size(); ++i) digits[digits.size() - 1 - i] = hex[nibble[i]];
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

std::vector<std::pair<std::string, std::string>> CpuBindEnv(
    const CpuBind& bind, const std::vector<std::vector<uint32_t>>& task_cpus) {
  std::string type, list;
  switch (bind.kind) {
    case Kind::kUnset:
    case Kind::kNone:
      type = "none";
      break;
    case Kind::kRank:
      type = "rank";
      break;
    case Kind::kMapCpu:
    case Kind::kMaskCpu:
      type = bind.kind == Kind::kMapCpu ? "map_cpu:" : "mask_cpu:";
      list = bind.list_text;
      break;
    default: {
      // Worked out here: written as the masks it came to, as Slurm does.
      type = "mask_cpu:";
      uint32_t top = 0;
      for (const auto& cpus : task_cpus) {
        for (uint32_t id : cpus) top = std::max(top, id);
      }
      const size_t width = std::max<size_t>(16, (top / 64 + 1) * 16);
      std::vector<std::string> masks;
      for (const auto& cpus : task_cpus) masks.push_back("0x" + CpuMaskHex(cpus, width, true));
      list = Join(masks, ",");
    }
  }
  const std::string verbosity = bind.verbose ? "verbose" : "quiet";
  return {{"SLURM_CPU_BIND", verbosity + "," + type + list},
          {"SLURM_CPU_BIND_TYPE", type},
          {"SLURM_CPU_BIND_LIST", list},
          {"SLURM_CPU_BIND_VERBOSE", verbosity}};
}

std::string CpuBindReport(const CpuBind& bind, const std::string& node, uint32_t task,
                          uint32_t local, pid_t pid, const std::vector<uint32_t>& cpus) {
  const bool none = bind.kind == Kind::kUnset || bind.kind == Kind::kNone;
  const char* type = none                         ? "NONE"
                     : bind.kind == Kind::kRank   ? "RANK"
                     : bind.kind == Kind::kMapCpu ? "MAP "
                                                  : "MASK";
  char head[128];
  std::snprintf(head, sizeof head, ", task %2u %2u [%d]: mask 0x", task, local,
                static_cast<int>(pid));
  return std::string("cpu-bind=") + type + " - " + node + head + CpuMaskHex(cpus) +
         (none ? "" : " set") + "\n";
}

}  // namespace muster
