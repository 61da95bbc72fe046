#include "muster/keeper/keeper_spec.h"

#include <charconv>
#include <limits>

namespace muster::keeper {
namespace {

constexpr std::string_view kVersion = "muster-keeper-spec-1";

class Writer {
 public:
  void Field(std::string_view s) {
    out_.append(s);
    out_.push_back('\0');
  }
  void Int(int64_t v) { Field(std::to_string(v)); }
  void Optional(const std::optional<std::string>& s) {
    if (s) {
      Field("+" + *s);
    } else {
      Field("-");
    }
  }
  void List(const std::vector<std::string>& v) {
    Int(static_cast<int64_t>(v.size()));
    for (const auto& s : v) Field(s);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool Field(std::string_view* s) {
    const size_t nul = in_.find('\0', pos_);
    if (nul == std::string_view::npos) return false;
    *s = in_.substr(pos_, nul - pos_);
    pos_ = nul + 1;
    return true;
  }
  bool String(std::string* s) {
    std::string_view v;
    if (!Field(&v)) return false;
    s->assign(v);
    return true;
  }
  template <typename T>
  bool Int(T* v, int64_t lo, int64_t hi) {
    std::string_view f;
    if (!Field(&f) || f.empty()) return false;
    int64_t x = 0;
    auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), x);
    if (ec != std::errc() || end != f.data() + f.size() || x < lo || x > hi) return false;
    *v = static_cast<T>(x);
    return true;
  }
  bool Uint64(uint64_t* v) {
    std::string_view f;
    if (!Field(&f) || f.empty()) return false;
    auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), *v);
    return ec == std::errc() && end == f.data() + f.size();
  }
  bool Fd(int* fd) { return Int(fd, -1, std::numeric_limits<int>::max()); }
  bool Optional(std::optional<std::string>* s) {
    std::string_view f;
    if (!Field(&f) || f.empty()) return false;
    if (f == "-") {
      s->reset();
      return true;
    }
    if (f[0] != '+') return false;
    s->emplace(f.substr(1));
    return true;
  }
  // A count no larger than the fields left, so a forged count cannot make us allocate.
  bool Count(size_t* n) {
    int64_t v = 0;
    if (!Int(&v, 0, std::numeric_limits<int32_t>::max())) return false;
    if (static_cast<size_t>(v) > in_.size() - pos_) return false;
    *n = static_cast<size_t>(v);
    return true;
  }
  bool List(std::vector<std::string>* v) {
    size_t n = 0;
    if (!Count(&n)) return false;
    v->resize(n);
    for (auto& s : *v) {
      if (!String(&s)) return false;
    }
    return true;
  }
  bool AtEnd() const { return pos_ == in_.size(); }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

}  // namespace

std::string EncodeKeeperSpec(const KeeperSpec& s) {
  Writer w;
  w.Field(kVersion);
  w.Int(s.report_fd);
  w.Int(s.exit_dir_fd);
  w.Field(s.exit_name);
  w.Field(s.path);
  w.List(s.argv);
  w.List(s.env);
  w.Field(s.cwd);
  w.Int(s.change_user ? 1 : 0);
  w.Int(s.uid);
  w.Int(s.gid);
  w.Int(static_cast<int64_t>(s.groups.size()));
  for (uint32_t g : s.groups) w.Int(g);
  w.Field(s.stdout_path);
  w.Optional(s.stderr_path);
  w.Optional(s.stdin_path);
  w.Optional(s.tty_path);
  w.Int(s.stdin_fd);
  w.Int(s.stdout_fd);
  w.Int(s.stderr_fd);
  w.Int(s.cgroup_procs_fd);
  w.Int(s.output_flags);
  w.Int(static_cast<int64_t>(s.limits.size()));
  for (const ResourceLimitSetting& l : s.limits) {
    w.Int(l.resource);
    w.Field(std::to_string(l.soft));
    w.Field(std::to_string(l.hard));
  }
  w.Int(static_cast<int64_t>(s.cpu_mask.size()));
  for (uint64_t word : s.cpu_mask) w.Field(std::to_string(word));
  return w.Take();
}

bool DecodeKeeperSpec(std::string_view bytes, KeeperSpec* out) {
  Reader r(bytes);
  KeeperSpec s;
  std::string_view version;
  constexpr int64_t kMaxId = std::numeric_limits<uint32_t>::max();
  size_t ngroups = 0;
  if (!r.Field(&version) || version != kVersion || !r.Fd(&s.report_fd) || !r.Fd(&s.exit_dir_fd) ||
      !r.String(&s.exit_name) || !r.String(&s.path) || !r.List(&s.argv) || !r.List(&s.env) ||
      !r.String(&s.cwd) || !r.Int(&s.change_user, 0, 1) || !r.Int(&s.uid, 0, kMaxId) ||
      !r.Int(&s.gid, 0, kMaxId) || !r.Count(&ngroups)) {
    return false;
  }
  s.groups.resize(ngroups);
  for (uint32_t& g : s.groups) {
    if (!r.Int(&g, 0, kMaxId)) return false;
  }
  if (!r.String(&s.stdout_path) || !r.Optional(&s.stderr_path) || !r.Optional(&s.stdin_path) ||
      !r.Optional(&s.tty_path) || !r.Fd(&s.stdin_fd) || !r.Fd(&s.stdout_fd) ||
      !r.Fd(&s.stderr_fd) || !r.Fd(&s.cgroup_procs_fd) ||
      !r.Int(&s.output_flags, 0, std::numeric_limits<int>::max())) {
    return false;
  }
  size_t nlimits = 0;
  if (!r.Count(&nlimits) || nlimits > 64) return false;
  s.limits.resize(nlimits);
  for (ResourceLimitSetting& l : s.limits) {
    if (!r.Int(&l.resource, 0, 64) || !r.Uint64(&l.soft) || !r.Uint64(&l.hard)) return false;
  }
  size_t nwords = 0;  // CPU ids go up to 65535
  if (!r.Count(&nwords) || nwords > 1024) return false;
  s.cpu_mask.resize(nwords);
  for (uint64_t& word : s.cpu_mask) {
    if (!r.Uint64(&word)) return false;
  }
  if (!r.AtEnd()) return false;
  if (s.report_fd < 0 || s.exit_dir_fd < 0 || s.exit_name.empty() || s.path.empty() ||
      s.argv.empty()) {
    return false;
  }
  *out = std::move(s);
  return true;
}

}  // namespace muster::keeper
