#include "muster/common/dependency.h"

#include "muster/common/strings.h"

namespace muster {
namespace {

constexpr size_t kMaxTerms = 1000;

}  // namespace

const char* DependencyKindName(DependencyTerm::Kind kind) {
  switch (kind) {
    case DependencyTerm::Kind::kAfter:
      return "after";
    case DependencyTerm::Kind::kAfterAny:
      return "afterany";
    case DependencyTerm::Kind::kAfterOk:
      return "afterok";
    case DependencyTerm::Kind::kAfterNotOk:
      return "afternotok";
    case DependencyTerm::Kind::kSingleton:
      return "singleton";
    case DependencyTerm::Kind::kAfterCorr:
      return "aftercorr";
  }
  return "?";
}

Result<Dependency> ParseDependency(std::string_view text) {
  Dependency d;
  const bool comma = text.find(',') != std::string_view::npos;
  const bool question = text.find('?') != std::string_view::npos;
  if (comma && question) {
    return InvalidArgument("--dependency: use ',' (all) or '?' (any), not both");
  }
  d.any = question;
  for (const std::string& part : Split(text, question ? '?' : ',')) {
    if (part.empty()) return InvalidArgument("--dependency: an empty term");
    const std::vector<std::string> fields = Split(part, ':');
    const std::string kind = ToLower(fields[0]);
    if (kind == "singleton") {
      if (fields.size() != 1) return InvalidArgument("--dependency: singleton takes no job ids");
      d.terms.push_back({DependencyTerm::Kind::kSingleton, 0, 0});
      continue;
    }
    DependencyTerm::Kind k;
    if (kind == "after") {
      k = DependencyTerm::Kind::kAfter;
    } else if (kind == "afterany") {
      k = DependencyTerm::Kind::kAfterAny;
    } else if (kind == "afterok") {
      k = DependencyTerm::Kind::kAfterOk;
    } else if (kind == "afternotok") {
      k = DependencyTerm::Kind::kAfterNotOk;
    } else if (kind == "aftercorr") {
      k = DependencyTerm::Kind::kAfterCorr;
    } else if (kind == "afterburstbuffer" || kind == "expand") {
      return Unimplemented("--dependency=" + kind + " is not supported yet");
    } else {
      auto id = ParseUint(fields[0]);  // a bare id is afterany (Slurm's shorthand)
      if (!id || *id == 0 || fields.size() != 1) {
        return InvalidArgument("--dependency: unknown kind '" + fields[0].substr(0, 32) + "'");
      }
      d.terms.push_back({DependencyTerm::Kind::kAfterAny, *id, 0});
      continue;
    }
    if (fields.size() < 2) return InvalidArgument("--dependency: " + kind + " needs a job id");
    for (size_t i = 1; i < fields.size(); ++i) {
      std::string id_text = fields[i];
      int64_t delay = 0;
      if (const size_t plus = id_text.find('+'); plus != std::string::npos) {
        if (k != DependencyTerm::Kind::kAfter) {
          return InvalidArgument("--dependency: only after takes +MINUTES");
        }
        auto minutes = ParseUint(id_text.substr(plus + 1));
        if (!minutes || *minutes > 525'600) {
          return InvalidArgument("--dependency: bad +MINUTES in '" + id_text.substr(0, 32) + "'");
        }
        delay = static_cast<int64_t>(*minutes) * 60'000;
        id_text.resize(plus);
      }
      auto id = ParseUint(id_text);
      if (!id || *id == 0) {
        return InvalidArgument("--dependency: bad job id '" + id_text.substr(0, 32) + "'");
      }
      d.terms.push_back({k, *id, delay});
    }
    if (d.terms.size() > kMaxTerms) return InvalidArgument("--dependency: more than 1000 terms");
  }
  if (d.terms.empty()) return InvalidArgument("--dependency: nothing given");
  return d;
}

std::string FormatDependency(const Dependency& d) {
  std::string out;
  for (size_t i = 0; i < d.terms.size(); ++i) {
    const DependencyTerm& t = d.terms[i];
    const bool same_group =
        i > 0 && d.terms[i - 1].kind == t.kind && t.kind != DependencyTerm::Kind::kSingleton;
    if (same_group) {
      out += ":";
    } else {
      if (i > 0) out += d.any ? "?" : ",";
      out += DependencyKindName(t.kind);
      if (t.kind == DependencyTerm::Kind::kSingleton) continue;
      out += ":";
    }
    out += std::to_string(t.job_id);
    if (t.delay_ms > 0) out += "+" + std::to_string(t.delay_ms / 60'000);
  }
  return out;
}

}  // namespace muster
