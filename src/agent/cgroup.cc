#include "cgroup.h"

#include <fcntl.h>
#include <linux/bpf.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "muster/common/procfs.h"
#include "muster/common/strings.h"

namespace muster::agent {
namespace fs = std::filesystem;
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// cgroupfs wants one write(2) per value.
bool WriteValue(const std::string& path, const std::string& value, int* err = nullptr) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  bool ok =
      fd >= 0 && ::write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
  int e = errno;
  if (fd >= 0) ::close(fd);
  if (err) *err = ok ? 0 : e;
  return ok;
}

std::string JoinInts(const std::vector<uint32_t>& v) {
  std::string s;
  for (uint32_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

}  // namespace

JobCgroups JobCgroups::Detect(const std::string& root, const std::string& node) {
  JobCgroups c;
  const std::string reduced = " (reduced isolation: jobs are tracked by process group and keeper)";
  if (root == "none") {
    c.description_ = "none: agent.cgroup_root = \"none\"" + reduced;
    return c;
  }
  std::vector<std::string> chain;  // the directories from where we may act down to the base
  if (root.empty() || root[0] != '/') {
    // Found automatically; a plain name replaces "muster" (so that two test clusters on one
    // machine, both with a node1, never share a directory).
    const std::string sub = root.empty() ? "muster" : root;
    std::string mount = Cgroup2Mount(), own = OwnCgroup2();
    if (mount.empty() || own.empty()) {
      c.description_ = "none: no cgroup v2 hierarchy is mounted" + reduced;
      return c;
    }
    std::string dir = mount + (own == "/" ? "" : own);
    if (own == "/") {
      chain = {dir, dir + "/" + sub, dir + "/" + sub + "/" + node};
    } else {
      // A delegated service cgroup (systemd Delegate=yes): processes may only sit in leaves once
      // controllers are enabled below, so the agent moves into a leaf of its own first.
      std::error_code ec;
      fs::create_directories(dir + "/musterd", ec);
      if (!ec) WriteValue(dir + "/musterd/cgroup.procs", "0");
      chain = {dir, dir + "/" + node};
      if (!root.empty()) chain = {dir, dir + "/" + sub, dir + "/" + sub + "/" + node};
    }
  } else {
    chain = {root, root + "/" + node};
  }
  const std::string base = chain.back();
  std::error_code ec;
  fs::create_directories(base, ec);
  if (!ec && !fs::exists(base + "/cgroup.procs")) {
    c.description_ = "none: " + base + " is not in a cgroup v2 hierarchy" + reduced;
    return c;
  }
  // Can we put processes there? A throwaway child cgroup tells.
  const std::string probe = base + "/probe-" + std::to_string(::getpid());
  if (ec || ::mkdir(probe.c_str(), 0755) != 0) {
    std::string why = ec ? ec.message() : std::strerror(errno);
    c.description_ = "none: cannot create cgroups under " + base + ": " + why + reduced;
    return c;
  }
  // Can we filter devices? Try it on the probe cgroup (containers often refuse BPF).
  Status bpf = LimitGpus(probe, {});
  c.devices_ = bpf.ok();
  ::rmdir(probe.c_str());
  c.base_ = base;
  // Controllers, level by level from the top we may write to; each needs the one above it.
  std::string available = ReadAll(chain.front() + "/cgroup.controllers");
  std::string refused;  // why a controller could not be enabled, for the admin
  auto enable = [&](const std::string& ctl) {
    if (available.find(ctl) == std::string::npos) return false;
    for (const auto& level : chain) {
      int err = 0;
      if (!WriteValue(level + "/cgroup.subtree_control", "+" + ctl, &err)) {
        refused = "cannot enable " + ctl + " in " + level + ": " + std::strerror(err);
        if (err == EBUSY)
          refused +=
              " (other processes share that cgroup; run musterd as a "
              "systemd service with Delegate=yes)";
        return false;
      }
    }
    return true;
  };
  c.cpuset_ = enable("cpuset");
  c.memory_ = enable("memory");
  std::string limits;
  if (c.cpuset_) limits += "cpus (cpuset)";
  if (c.memory_) limits += std::string(limits.empty() ? "" : ", ") + "memory (memory.max)";
  if (limits.empty()) {
    limits = refused.empty() ? "no cpuset or memory controller is delegated here, so CPUs and "
                               "memory are not limited"
                             : "CPUs and memory are not limited: " + refused;
  } else {
    limits = "limits " + limits + (refused.empty() ? "" : " (" + refused + ")");
  }
  c.description_ = "cgroup v2 at " + base + ": every job process tracked; " + limits + "; " +
                   (c.devices_ ? "GPU device files open only to the jobs they are allocated to"
                               : "GPU device access not restricted: " + bpf.message());
  return c;
}

Result<std::string> JobCgroups::Create(uint64_t job_id, const Limits& limits) const {
  if (!enabled()) return FailedPrecondition("job cgroups are not available on this node");
  const std::string dir = base_ + "/job_" + std::to_string(job_id);
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Internal("cannot create the job's cgroup " + dir + ": " + std::strerror(errno));
  }
  int err = 0;
  if (cpuset_ && !limits.cpus.empty()) {
    if (!WriteValue(dir + "/cpuset.cpus", JoinInts(limits.cpus), &err)) {
      return Internal("cannot set " + dir + "/cpuset.cpus to " + JoinInts(limits.cpus) + ": " +
                      std::strerror(err));
    }
    std::vector<uint32_t> mems(limits.mems.begin(), limits.mems.end());
    if (!mems.empty() && !WriteValue(dir + "/cpuset.mems", JoinInts(mems), &err)) {
      return Internal("cannot set " + dir + "/cpuset.mems: " + std::strerror(err));
    }
  }
  if (memory_ && limits.memory_mb > 0) {
    const std::string bytes = std::to_string(limits.memory_mb * 1024 * 1024);
    if (!WriteValue(dir + "/memory.max", bytes, &err)) {
      return Internal("cannot set " + dir + "/memory.max: " + std::strerror(err));
    }
  }
  return dir;
}

std::vector<std::pair<uint64_t, std::string>> JobCgroups::List() const {
  std::vector<std::pair<uint64_t, std::string>> out;
  if (!enabled()) return out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(base_, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("job_", 0) != 0) continue;
    if (auto id = ParseUint(std::string_view(name).substr(4))) {
      out.emplace_back(*id, e.path().string());
    }
  }
  return out;
}

std::vector<pid_t> JobCgroups::Pids(const std::string& dir) {
  std::vector<pid_t> pids;
  std::ifstream in(dir + "/cgroup.procs");
  for (long p; in >> p;) pids.push_back(static_cast<pid_t>(p));
  return pids;
}

bool JobCgroups::Empty(const std::string& dir) {
  std::string events = ReadAll(dir + "/cgroup.events");
  if (!events.empty()) return events.find("populated 0") != std::string::npos;
  return Pids(dir).empty();
}

void JobCgroups::Signal(const std::string& dir, int sig) {
  for (pid_t p : Pids(dir)) ::kill(p, sig);
}

void JobCgroups::Kill(const std::string& dir) {
  if (!WriteValue(dir + "/cgroup.kill", "1")) Signal(dir, SIGKILL);  // before Linux 5.14
}

Status JobCgroups::LimitGpus(const std::string& dir, const std::vector<uint32_t>& minors) {
  constexpr int32_t kNvidiaMajor = 195;
  constexpr int32_t kLastGpuMinor = 253;  // 254 nvidia-modeset, 255 nvidiactl
  // ctx: struct bpf_cgroup_dev_ctx { u32 access_type (type | access << 16); u32 major, minor; }
  std::vector<bpf_insn> p;
  auto op = [&p](uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
    bpf_insn i{};
    i.code = code;
    i.dst_reg = dst & 0xf;
    i.src_reg = src & 0xf;
    i.off = off;
    i.imm = imm;
    p.push_back(i);
    return p.size() - 1;
  };
  std::vector<size_t> to_allow;  // jumps patched once the "allow" exit's place is known
  op(BPF_LDX | BPF_W | BPF_MEM, BPF_REG_2, BPF_REG_1, 0, 0);
  op(BPF_ALU | BPF_AND | BPF_K, BPF_REG_2, 0, 0, 0xffff);
  op(BPF_LDX | BPF_W | BPF_MEM, BPF_REG_3, BPF_REG_1, 4, 0);
  op(BPF_LDX | BPF_W | BPF_MEM, BPF_REG_4, BPF_REG_1, 8, 0);
  to_allow.push_back(op(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_2, 0, 0, BPF_DEVCG_DEV_CHAR));
  to_allow.push_back(op(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_3, 0, 0, kNvidiaMajor));
  to_allow.push_back(op(BPF_JMP | BPF_JGT | BPF_K, BPF_REG_4, 0, 0, kLastGpuMinor));
  for (uint32_t m : minors) {
    to_allow.push_back(op(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_4, 0, 0, static_cast<int32_t>(m)));
  }
  op(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0);  // another job's GPU: denied
  op(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
  const size_t allow = op(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1);
  op(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
  for (size_t j : to_allow) p[j].off = static_cast<int16_t>(allow - j - 1);

  static const char kLicense[] = "GPL";
  union bpf_attr load {};
  load.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  load.insn_cnt = static_cast<uint32_t>(p.size());
  load.insns = reinterpret_cast<uint64_t>(p.data());
  load.license = reinterpret_cast<uint64_t>(kLicense);
  int prog = static_cast<int>(::syscall(SYS_bpf, BPF_PROG_LOAD, &load, sizeof load));
  if (prog < 0)
    return Internal(std::string("cannot load a BPF device program: ") + std::strerror(errno));
  int cg = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cg < 0) {
    int err = errno;
    ::close(prog);
    return Internal("cannot open " + dir + ": " + std::strerror(err));
  }
  union bpf_attr attach {};
  attach.target_fd = static_cast<uint32_t>(cg);
  attach.attach_bpf_fd = static_cast<uint32_t>(prog);
  attach.attach_type = BPF_CGROUP_DEVICE;
  attach.attach_flags = BPF_F_ALLOW_MULTI;  // the parents' device rules still apply
  int rc = static_cast<int>(::syscall(SYS_bpf, BPF_PROG_ATTACH, &attach, sizeof attach));
  int err = errno;
  ::close(cg);
  ::close(prog);  // the attachment holds the program; it goes with the cgroup
  if (rc != 0) {
    return Internal("cannot attach a BPF device program to " + dir + ": " + std::strerror(err));
  }
  return Status::Ok();
}

Status JobCgroups::Remove(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory(ec)) Remove(e.path().string()).IgnoreError();  // step cgroups first
  }
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) {
    return Internal("cannot remove cgroup " + dir + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace muster::agent
