#include "resource_limits.h"

#include <sys/resource.h>

#include <algorithm>
#include <charconv>
#include <iterator>

#include "muster/common/resource_limit_names.h"
#include "muster/common/strings.h"

namespace muster::agent {
namespace {

std::string Text(uint64_t v) { return v == UINT64_MAX ? "unlimited" : std::to_string(v); }

std::optional<uint64_t> ParseValue(std::string_view s) {
  if (s == "unlimited" || s == "infinity") return UINT64_MAX;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

constexpr std::string_view kEnvPrefix = "SLURM_RLIMIT_";

}  // namespace

std::optional<int> LimitResource(const std::string& name) {
  const std::optional<size_t> i = ResourceLimitIndex(name);
  if (!i) return std::nullopt;
  return kResourceLimitNames[*i].resource;
}

ClampedLimits ClampLimits(const std::vector<v1::ResourceLimit>& wanted,
                          const NodeHardLimit& node_hard, std::optional<uint64_t> rss_cap_bytes) {
  ClampedLimits out;
  for (const v1::ResourceLimit& w : wanted) {
    const std::string what = "Can't propagate RLIMIT_" + Printable(w.name()) +
                             " of 'soft=" + Text(w.soft()) + " hard=" + Text(w.hard()) + "'";
    const std::optional<int> resource = LimitResource(w.name());
    if (!resource) {
      out.notes.push_back(what + ": no such resource limit; the node's is kept");
      continue;
    }
    if (std::any_of(out.set.begin(), out.set.end(),
                    [&](const SpawnSpec::Limit& l) { return l.resource == *resource; })) {
      continue;  // named twice: the first counts
    }
    std::optional<uint64_t> cap = node_hard(*resource);
    if (!cap) {
      out.notes.push_back(what + ": the node's limit cannot be read; the node's is kept");
      continue;
    }
    if (*resource == RLIMIT_RSS && rss_cap_bytes) cap = std::min(*cap, *rss_cap_bytes);
    // As Slurm: the soft value goes over, the node keeps its hard one (RSS: the job's memory).
    SpawnSpec::Limit l;
    l.resource = *resource;
    l.hard = *cap;
    l.soft = std::min({w.soft(), w.hard(), l.hard});
    if (w.soft() > *cap) {
      out.notes.push_back("RLIMIT_" + w.name() + " of 'soft=" + Text(w.soft()) +
                          "' is above the node's hard limit " + Text(*cap) + ": set to " +
                          Text(l.soft));
    }
    out.set.push_back(l);
  }
  return out;
}

std::optional<uint64_t> JobMemoryBytes(const v1::JobSpec& spec) {
  if (spec.mem_per_node_mb() == 0) return std::nullopt;
  return spec.mem_per_node_mb() << 20;  // at most 2^40 MiB (checked at submission)
}

std::optional<uint64_t> OwnHardLimit(int resource) {
  struct rlimit r {};
  if (::getrlimit(resource, &r) != 0) return std::nullopt;
  return r.rlim_max == RLIM_INFINITY ? UINT64_MAX : uint64_t{r.rlim_max};
}

std::vector<v1::ResourceLimit> TakeRlimitEnv(std::vector<std::string>* env,
                                             std::vector<std::string>* notes) {
  std::vector<v1::ResourceLimit> out;
  std::erase_if(*env, [&](const std::string& kv) {
    if (!StartsWith(kv, kEnvPrefix)) return false;
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) return true;
    const std::string name = kv.substr(kEnvPrefix.size(), eq - kEnvPrefix.size());
    const std::string value = kv.substr(eq + 1);
    const size_t comma = value.find(',');
    std::optional<uint64_t> soft = ParseValue(std::string_view(value).substr(0, comma));
    std::optional<uint64_t> hard =
        comma == std::string::npos ? soft : ParseValue(std::string_view(value).substr(comma + 1));
    if (!soft || !hard) {
      notes->push_back("Can't propagate RLIMIT_" + Printable(name) + " of '" + Printable(value) +
                       "': expected SOFT,HARD; the node's is kept");
      return true;
    }
    v1::ResourceLimit& l = out.emplace_back();
    l.set_name(name);
    l.set_soft(*soft);
    l.set_hard(*hard);
    return true;
  });
  return out;
}

}  // namespace muster::agent
