#include "muster/common/output_pattern.h"

#include <algorithm>
#include <cctype>

#include "muster/common/job_limits.h"
#include "muster/common/text_bounds.h"

namespace muster {

Status CheckOutputPattern(const std::string& pattern, const std::string& what) {
  MUSTER_RETURN_IF_ERROR(CheckText(what, pattern, kMaxPathBytes));
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') continue;
    size_t j = i + 1;
    while (j < pattern.size() && std::isdigit(static_cast<unsigned char>(pattern[j]))) ++j;
    if (j - (i + 1) > 2) {
      return InvalidArgument(what + " '" + pattern.substr(i, std::min<size_t>(j - i + 1, 24)) +
                             "': a padding width is at most " + std::to_string(kMaxPatternWidth));
    }
    if (j > i + 1 && std::stoi(pattern.substr(i + 1, j - i - 1)) > kMaxPatternWidth) {
      return InvalidArgument(what + " '" + pattern.substr(i, j - i + 1) +
                             "': a padding width is at most " + std::to_string(kMaxPatternWidth));
    }
    i = j < pattern.size() && pattern[j] == '%' ? j : i;  // "%%" is a literal percent sign
  }
  return Status::Ok();
}

std::string ExpandOutputPattern(const std::string& pattern, const PatternVars& v,
                                const std::string& work_dir) {
  const std::string& p = pattern.empty() ? std::string("slurm-%j.out") : pattern;
  std::string out;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] != '%' || i + 1 >= p.size()) {
      out += p[i];
      continue;
    }
    // Slurm allows a zero-padding width: %5j.
    size_t j = i + 1;
    int width = 0;
    while (j < p.size() && std::isdigit(static_cast<unsigned char>(p[j]))) {
      width = std::min(width * 10 + (p[j] - '0'), kMaxPatternWidth);
      ++j;
    }
    if (j >= p.size()) {
      out += p.substr(i);
      break;
    }
    auto num = [&](uint64_t n) {
      std::string s = std::to_string(n);
      if (static_cast<int>(s.size()) < width)
        s.insert(0, static_cast<size_t>(width) - s.size(), '0');
      return s;
    };
    char c = p[j];
    switch (c) {
      case '%':
        out += '%';
        break;
      case 'j':
        out += num(v.job_id);
        break;
      case 'A':
        out += num(v.array_job_id ? v.array_job_id : v.job_id);
        break;
      case 'a':
        out += v.array_task_id < 0 ? std::string("4294967294")
                                   : num(static_cast<uint64_t>(v.array_task_id));
        break;
      case 'x':
        out += v.job_name;
        break;
      case 'u':
        out += v.user;
        break;
      case 'N':
        out += v.node;
        break;
      case 'n':
        out += num(v.node_id);
        break;
      case 't':
        out += num(v.task_id);
        break;
      case 's':
        out += v.step;
        break;
      default:
        out += p.substr(i, j - i + 1);
        break;
    }
    i = j;
  }
  if (!out.empty() && out[0] != '/' && !work_dir.empty()) {
    out = work_dir + (work_dir.back() == '/' ? "" : "/") + out;
  }
  return out;
}

PatternVars JobPatternVars(uint64_t job_id, const std::string& job_name, const std::string& user,
                           uint64_t array_job_id, int64_t array_task_id) {
  PatternVars v;
  v.job_id = job_id;
  v.job_name = job_name;
  v.user = user;
  v.array_job_id = array_job_id;
  v.array_task_id = array_task_id;
  return v;
}

}  // namespace muster
