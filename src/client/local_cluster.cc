#include "muster/client/local_cluster.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <thread>

#include "muster/client/certificates.h"
#include "muster/client/controller_client.h"
#include "muster/common/config.h"
#include "muster/common/own_files.h"
#include "muster/common/procfs.h"
#include "muster/common/strings.h"

namespace muster::client {
namespace fs = std::filesystem;
namespace {

constexpr const char* kMarker = "# Written by `muster local up`.";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string LastLine(const std::string& path) {
  std::string text(Trim(ReadFile(path)));
  size_t nl = text.rfind('\n');
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

// The daemon a pid file names, if that process still runs the expected program.
bool Alive(pid_t pid, const std::string& program) {
  if (!ProcessAlive(pid)) return false;
  const std::string argv0 = ProcessProgram(pid);
  return argv0.size() >= program.size() &&
         argv0.compare(argv0.size() - program.size(), program.size(), program) == 0;
}

pid_t ReadPid(const std::string& path) {
  auto v = ParseUint(std::string(Trim(ReadFile(path))));
  return v ? static_cast<pid_t>(*v) : 0;
}

Result<uint16_t> FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("socket", errno);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus("cannot find a free port", err);
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string FindBinary(const std::string& bin_dir, const std::string& name) {
  std::vector<std::string> candidates;
  if (!bin_dir.empty()) {
    candidates.push_back(bin_dir + "/" + name);
    candidates.push_back(bin_dir + "/../sbin/" + name);
  }
  for (const auto& p : Split(std::getenv("PATH") ? std::getenv("PATH") : "", ':', true)) {
    candidates.push_back(p + "/" + name);
  }
  for (const auto& c : candidates) {
    if (::access(c.c_str(), X_OK) == 0) return fs::weakly_canonical(c).string();
  }
  return "";
}

Result<pid_t> StartDaemon(const std::vector<std::string>& argv, const std::string& log,
                          const std::string& pid_file) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork", errno);
  if (pid == 0) {
    ::setsid();
    int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0640);
    int in = ::open("/dev/null", O_RDONLY);
    if (out >= 0) {
      ::dup2(out, 1);
      ::dup2(out, 2);
    }
    if (in >= 0) ::dup2(in, 0);
    ::execv(args[0], args.data());
    _exit(127);
  }
  std::ofstream(pid_file) << pid << "\n";
  return pid;
}

// A name of this cluster's own, for what lives outside its directory.
std::string DirTag(const std::string& dir) {
  std::ostringstream t;
  t << std::hex << (std::hash<std::string>{}(dir)&0xffffffffu);
  return t.str();
}

constexpr const char* kShmPrefix = "/dev/shm/muster-local-";
constexpr const char* kEtcd = "/usr/bin/etcd";

// The jobs' state on a tmpfs where there is one: a drain of short jobs otherwise spends a third
// of the agents' time in ext4's inode allocation (docs/benchmarks.md). Empty: /dev/shm is not a
// writable tmpfs here; the state stays in the spool. The name is random (kept in the config): on
// the shared /dev/shm, a name another user could work out is one they could make first.
std::string LocalJobStateDir() {
  struct statfs st {};
  if (::statfs("/dev/shm", &st) != 0 || st.f_type != TMPFS_MAGIC ||
      ::access("/dev/shm", W_OK) != 0) {
    return "";
  }
  return kShmPrefix + RandomHex(12);
}

// Stops daemons by pid (SIGTERM, then SIGKILL after 10 s) and removes their pid files.
struct Started {
  pid_t pid;
  std::string program, pid_file;
  bool own_child = false;  // started by this process: its pid cannot have been reused
};
// Whether it still runs (a child of ours is reaped once it has ended).
bool Running(const Started& d) {
  if (!d.own_child) return Alive(d.pid, d.program);
  int status;
  return d.pid > 0 && ::waitpid(d.pid, &status, WNOHANG) == 0;
}
void StopDaemons(const std::vector<Started>& which, FILE* progress) {
  std::vector<Started> running;
  for (const Started& d : which) {
    if (Running(d)) {
      ::kill(d.pid, SIGTERM);
      running.push_back(d);
      if (progress) std::fprintf(progress, "stopping %s (pid %d)\n", d.program.c_str(), d.pid);
    }
    std::error_code ec;
    fs::remove(d.pid_file, ec);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (const Started& d : running) {
    while (Running(d) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (Running(d)) ::kill(d.pid, SIGKILL);
  }
}

// The ports a new cluster's daemons listen on.
struct LocalPorts {
  uint16_t agents = 0;
  uint16_t standby_agents = 0;  // --standby: ctl-b's
  uint16_t etcd_client = 0;     // --standby
  uint16_t etcd_peer = 0;       // --standby: kept in the config as etcd's command line
  uint16_t metrics = 0;         // one controller only: Prometheus' /metrics
  uint16_t web = 0;             // one controller only: the web view (`muster web` logs in)
};

std::string ConfigText(const LocalClusterOptions& o, const std::string& dir,
                       const LocalPorts& ports) {
  std::ostringstream c;
  c << kMarker << " Edit freely; `muster local up` reuses it.\n"
    << "cluster_name = \"local\"\n\n"
    << "[controller]\n"
    << "socket = \"" << dir << "/run/musterctld.sock\"\n"
    << "agent_address = \"127.0.0.1:" << ports.agents << "\"\n"
    << "state_dir = \"" << dir << "/state\"\n";
  if (ports.metrics) {
    c << "# Prometheus' /metrics: a scraper sends `Authorization: Bearer <the token file's line>`\n"
      << "metrics_address = \"127.0.0.1:" << ports.metrics << "\"\n"
      << "metrics_token_file = \"" << dir << "/metrics.token\"\n";
  }
  if (ports.web) {
    c << "# The web view: `muster web` prints an address that logs your browser in\n"
      << "web_address = \"127.0.0.1:" << ports.web << "\"\n";
  }
  if (!o.mail_prog.empty()) {
    c << "# --mail-prog: mails for sbatch --mail-type (Slurm's MailProg)\n"
      << "mail_prog = \"" << o.mail_prog << "\"\n";
  }
  if (o.standby) {
    c << "# A hot standby: ctl-a and ctl-b (below) elect their leader through this etcd.\n"
      << "etcd_endpoints = [\"127.0.0.1:" << ports.etcd_client << "\"]\n"
      << "leader_lease_s = 2\n"
      << "# etcd knows the controllers by this certificate from its own CA (muster certs --etcd)\n"
      << "etcd_ca_file = \"" << dir << "/etcd-tls/ca.crt\"\n"
      << "etcd_cert_file = \"" << dir << "/etcd-tls/client.crt\"\n"
      << "etcd_key_file = \"" << dir << "/etcd-tls/client.key\"\n"
      << "# etcd's peer port for `muster local up`: " << ports.etcd_peer << "\n";
  }
  c << "\n"
    << "[scheduling]\n"
    << "heartbeat_interval_ms = 1000\n"
    << "node_not_responding_ms = 5000\n"
    << "node_down_ms = 15000\n"
    << "kill_grace_ms = 5000\n\n"
    << "[agent]\n"
    << "spool_dir = \"" << dir << "/spool\"\n"
    << "step_address = \"127.0.0.1:0\"\n"
    << "# A throwaway cluster: `muster local down` ends its jobs too. Real nodes keep jobs\n"
    << "# running across a musterd restart (the default, false).\n"
    << "kill_jobs_on_stop = true\n"
    << "# Job cgroups under a name of this cluster's own: another local cluster's node1 is not "
       "ours.\n"
    << "cgroup_root = \"muster-local-" << DirTag(dir) << "\"\n";
  if (const std::string jobs = LocalJobStateDir(); !jobs.empty()) {
    c << "# Each job's state, script and exit record on a tmpfs (as /run on a real node).\n"
      << "job_state_dir = \"" << jobs << "\"\n";
  }
  c << "\n";
  if (o.tls) {
    c << "# Mutual TLS between the controller and the agents, as on a real cluster (made by the\n"
      << "# same code as `muster certs`).\n"
      << "[tls]\n"
      << "ca_file = \"" << dir << "/tls/ca.crt\"\n"
      << "controller_cert_file = \"" << dir << "/tls/controller.crt\"\n"
      << "controller_key_file = \"" << dir << "/tls/controller.key\"\n"
      << "node_cert_file = \"" << dir << "/tls/%n.crt\"\n"
      << "node_key_file = \"" << dir << "/tls/%n.key\"\n\n";
  } else {
    c << "# No TLS (--no-tls, for development): each agent proves its node with its own key\n"
      << "# (made by the same code as `muster certs --node-keys`); traffic is not encrypted.\n"
      << "[node_auth]\n"
      << "key_file = \"" << dir << "/node-keys/%n.key\"\n\n";
  }
  // Two leaf switches under one spine, so gang placement has a topology to respect; each leaf's
  // nodes carry its name as a feature (try --constraint=leaf2) and share an NVLink domain.
  uint32_t half = o.nodes > 1 ? (o.nodes + 1) / 2 : 1;
  auto group = [&](uint32_t lo, uint32_t hi, const char* leaf) {
    c << "[[nodes]]\n"
      << "names = \"node[" << lo << "-" << hi << "]\"\n"
      << "cpus = " << o.cpus_per_node << "\n"
      << "memory_mb = " << o.memory_mb << "\n"
      << "gpus = " << o.gpus_per_node << "\n"
      << "gpu_type = \"h100\"\n"
      << "topology = \"spine1/" << leaf << "\"\n"
      << "features = [\"h100\", \"" << leaf << "\"]\n"
      << "nvlink_domain = \"nvl-" << leaf << "\"\n"
      << "shards_per_gpu = 4\n\n";  // small jobs may share a GPU: --gres=shard:N
  };
  group(1, half, "leaf1");
  if (o.nodes > half) group(half + 1, o.nodes, "leaf2");
  c << "[[partition]]\n"
    << "name = \"gpu\"\n"
    << "nodes = \"node[1-" << o.nodes << "]\"\n"
    << "default = true\n"
    << "max_time = \"UNLIMITED\"\n";
  if (o.standby) {
    for (const auto& [name, port] :
         {std::pair{"ctl-a", ports.agents}, std::pair{"ctl-b", ports.standby_agents}}) {
      c << "\n[[controllers]]\n"
        << "name = \"" << name << "\"\n"
        << "agent_address = \"127.0.0.1:" << port << "\"\n"
        << "socket = \"" << dir << "/run/" << name << ".sock\"\n"
        << "state_dir = \"" << dir << "/state/" << name << "\"\n";
    }
  }
  return c.str();
}

std::string Fixture(const LocalClusterOptions& o) {
  std::ostringstream f;
  f << "# Fake hardware for `muster local`: " << o.gpus_per_node
    << " H100 SXM5 behind NVSwitch (all-to-all NV18), 2 NUMA nodes.\n"
    << "[node]\ncpus = " << o.cpus_per_node << "\nmemory_mb = " << o.memory_mb << "\n\n"
    << "[gpus]\ncount = " << o.gpus_per_node << "\nmodel = \"NVIDIA H100 80GB HBM3\"\n"
    << "type = \"h100\"\nmemory_mb = 81559\nnuma_nodes = 2\ninterconnect = \"nvswitch\"\n";
  return f.str();
}

}  // namespace

std::string DefaultLocalDir() {
  const char* env = std::getenv("MUSTER_LOCAL_DIR");
  if (env && *env) return env;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.muster/local";
}

Result<std::string> LocalUp(const LocalClusterOptions& opts, FILE* progress) {
  LocalClusterOptions o = opts;
  if (o.nodes == 0 || o.nodes > 256) return InvalidArgument("--nodes must be between 1 and 256");
  if (o.gpus_per_node > 64) return InvalidArgument("--gpus-per-node must be at most 64");
  if (!o.mail_prog.empty()) {
    o.mail_prog = fs::absolute(o.mail_prog).lexically_normal().string();
    if (o.mail_prog.find_first_of("\"\\\n") != std::string::npos) {
      return InvalidArgument("--mail-prog: a path without quotes, backslashes or line breaks");
    }
  }
  std::string dir =
      fs::absolute(o.dir.empty() ? DefaultLocalDir() : o.dir).lexically_normal().string();
  if (dir.size() > 80) {
    return InvalidArgument("directory path " + dir +
                           " is too long for a Unix socket; use a shorter --dir");
  }
  std::error_code ec;
  for (const std::string& d : {dir, dir + "/run", dir + "/log", dir + "/state", dir + "/spool"}) {
    if (fs::exists(d, ec)) continue;
    fs::create_directories(d, ec);
    if (ec) return Internal("cannot create " + d + ": " + ec.message());
    // What we create is ours alone, whatever the umask.
    fs::permissions(d, fs::perms(0755), ec);
  }
  // The cluster's daemons run what this directory's config says: it must be ours alone, never
  // one another user created (or could change) beforehand.
  for (const std::string& d : {dir, dir + "/run", dir + "/log", dir + "/state", dir + "/spool"}) {
    if (Status st = CheckOwnDirectory(d); !st.ok()) {
      return st.Prepend("refusing to use " + dir + " for a local cluster");
    }
  }

  const std::string conf = dir + "/muster.toml";
  const std::string ctld_pid = dir + "/run/musterctld.pid";
  bool ctld_alive = Alive(ReadPid(ctld_pid), "musterctld") ||
                    Alive(ReadPid(dir + "/run/musterctld-ctl-a.pid"), "musterctld") ||
                    Alive(ReadPid(dir + "/run/musterctld-ctl-b.pid"), "musterctld");
  if (fs::exists(conf) || fs::is_symlink(conf)) {
    if (Status st = CheckOwnFile(conf); !st.ok()) {
      return st.Prepend("refusing to use " + dir + " for a local cluster");
    }
    auto existing = LoadConfig(conf);
    if (!existing.ok()) return existing.status().Prepend("existing local cluster config");
    if (existing->nodes.size() != o.nodes || existing->controllers.empty() == o.standby ||
        (!o.mail_prog.empty() && existing->controller.mail_prog != o.mail_prog)) {
      if (ctld_alive) {
        return FailedPrecondition("a local cluster of another shape (" +
                                  std::to_string(existing->nodes.size()) + " nodes, " +
                                  (existing->controllers.empty() ? "one controller" : "a standby") +
                                  (existing->controller.mail_prog.empty()
                                       ? ""
                                       : ", mail_prog " + existing->controller.mail_prog) +
                                  ") runs in " + dir + "; run `muster local down` first");
      }
      fs::remove(conf, ec);
    }
  }
  if (!fs::exists(conf)) {
    if (o.standby && ::access(kEtcd, X_OK) != 0) {
      return FailedPrecondition(std::string("--standby needs etcd (") + kEtcd +
                                ", Debian's etcd-server)");
    }
    LocalPorts ports;
    MUSTER_ASSIGN_OR_RETURN(ports.agents, FreePort());
    // Distinct ones (a port just closed may come round again).
    std::set<uint16_t> taken = {ports.agents};
    auto pick = [&](uint16_t* p) -> Status {
      do {
        MUSTER_ASSIGN_OR_RETURN(*p, FreePort());
      } while (!taken.insert(*p).second);
      return Status::Ok();
    };
    if (o.standby) {
      for (uint16_t* p : {&ports.standby_agents, &ports.etcd_client, &ports.etcd_peer}) {
        MUSTER_RETURN_IF_ERROR(pick(p));
      }
    } else {
      // Two controllers would share the one address: metrics with a single controller only.
      MUSTER_RETURN_IF_ERROR(pick(&ports.metrics));
      MUSTER_RETURN_IF_ERROR(pick(&ports.web));
      const std::string token = dir + "/metrics.token";
      fs::remove(token, ec);
      // Private from its first byte.
      const int fd =
          ::open(token.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (fd < 0) return ErrnoStatus("creating " + token, errno);
      const std::string line = RandomHex(32) + "\n";
      const bool written =
          ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
      ::close(fd);
      if (!written) return Internal("cannot write " + token);
    }
    if (o.tls) {
      CertificateOptions certs;
      certs.dir = dir + "/tls";
      certs.cluster_name = "local";
      for (uint32_t i = 1; i <= o.nodes; ++i) certs.nodes.push_back("node" + std::to_string(i));
      MUSTER_RETURN_IF_ERROR(
          MakeCertificates(certs).status().Prepend("local cluster certificates"));
    } else {
      CertificateOptions keys;
      keys.dir = dir + "/node-keys";
      for (uint32_t i = 1; i <= o.nodes; ++i) keys.nodes.push_back("node" + std::to_string(i));
      MUSTER_RETURN_IF_ERROR(MakeNodeKeys(keys).status().Prepend("local cluster node keys"));
    }
    std::ofstream(conf) << ConfigText(o, dir, ports);
    fs::remove_all(dir + "/state", ec);  // a new shape starts with an empty state
    fs::remove_all(dir + "/etcd", ec);   // and a new election
    fs::create_directories(dir + "/state", ec);
  }
  std::ofstream(dir + "/gpus.toml") << Fixture(o);
  MUSTER_ASSIGN_OR_RETURN(muster::Config config, LoadConfig(conf));

  std::string bin_dir = o.bin_dir;
  if (bin_dir.empty()) {
    bin_dir = fs::read_symlink("/proc/self/exe", ec).parent_path().string();
  }
  std::string ctld = FindBinary(bin_dir, "musterctld");
  std::string agentd = FindBinary(bin_dir, "musterd");
  if (ctld.empty() || agentd.empty()) {
    return NotFound("cannot find musterctld and musterd next to this program or on PATH");
  }

  const bool standby = !config.controllers.empty();
  // What this call starts is stopped again if the cluster does not come up: no daemons left
  // behind half-started, holding ports and the directory.
  std::vector<Started> started_now;
  struct StopOnFailure {
    std::vector<Started>& started;
    FILE* progress;
    bool up = false;
    ~StopOnFailure() {
      if (!up && !started.empty()) StopDaemons(started, progress);
    }
  } stop_on_failure{started_now, progress};
  // Our own children are checked with waitpid (they may not have exec'd yet); older ones by pid.
  std::vector<std::pair<pid_t, std::string>> started_controllers;  // (pid, log)
  auto exited = [&](std::vector<std::pair<pid_t, std::string>>& started,
                    const char* program) -> Status {
    for (const auto& [pid, log] : started) {
      int status;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        return FailedPrecondition(std::string(program) + " exited: " + LastLine(log) + " (" + log +
                                  ")");
      }
    }
    return Status::Ok();
  };
  // Waits until a controller serves.
  auto serving = [&]() -> Status {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.wait_s);
    while (true) {
      auto c = standby ? ControllerClient::ConnectTo(config)
                       : ControllerClient::Connect(config.controller.socket_path);
      if (c.ok() && c->ControllerInfo().ok()) return Status::Ok();
      MUSTER_RETURN_IF_ERROR(exited(started_controllers, "musterctld"));
      if (!standby && started_controllers.empty() && !Alive(ReadPid(ctld_pid), "musterctld")) {
        return FailedPrecondition("musterctld exited: " + LastLine(dir + "/log/musterctld.log"));
      }
      if (std::chrono::steady_clock::now() > deadline) {
        return DeadlineExceeded("musterctld did not answer; see " + dir + "/log/");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  };
  if (standby) {
    const std::string etcd_pid = dir + "/run/etcd.pid";
    if (!Alive(ReadPid(etcd_pid), "etcd")) {
      const std::string client = config.controller.etcd_endpoints.front();
      const std::string marker = "# etcd's peer port for `muster local up`: ";
      const std::string text = ReadFile(conf);
      const size_t at = text.find(marker);
      const std::string peer =
          "https://127.0.0.1:" +
          (at == std::string::npos
               ? std::string("2380")
               : text.substr(at + marker.size(), text.find('\n', at) - at - marker.size()));
      if (progress) std::fprintf(progress, "starting etcd (log: %s/log/etcd.log)\n", dir.c_str());
      // Only the controllers' certificate gets in (clients and peers alike).
      MUSTER_RETURN_IF_ERROR(MakeEtcdCertificates(dir + "/etcd-tls", false)
                                 .status()
                                 .Prepend("local cluster etcd certificates"));
      std::vector<std::string> etcd_args = {kEtcd,
                                            "--name=local",
                                            "--data-dir=" + dir + "/etcd",
                                            "--listen-client-urls=https://" + client,
                                            "--advertise-client-urls=https://" + client,
                                            "--listen-peer-urls=" + peer,
                                            "--initial-advertise-peer-urls=" + peer,
                                            "--initial-cluster=local=" + peer};
      for (const std::string& flag : EtcdTlsFlags(dir + "/etcd-tls")) etcd_args.push_back(flag);
      MUSTER_ASSIGN_OR_RETURN(pid_t etcd, StartDaemon(etcd_args, dir + "/log/etcd.log", etcd_pid));
      started_now.push_back({etcd, "etcd", etcd_pid, true});
    }
    // ctl-a first, so that it leads a new cluster; the others then stand by.
    for (const ControllerHostConfig& h : config.controllers) {
      const std::string pid_file = dir + "/run/musterctld-" + h.name + ".pid";
      if (Alive(ReadPid(pid_file), "musterctld")) continue;
      const std::string log = dir + "/log/musterctld-" + h.name + ".log";
      if (progress) {
        std::fprintf(progress, "starting musterctld %s (log: %s)\n", h.name.c_str(), log.c_str());
      }
      MUSTER_ASSIGN_OR_RETURN(
          pid_t pid, StartDaemon({ctld, "--config", conf, "--name", h.name}, log, pid_file));
      started_controllers.emplace_back(pid, log);
      started_now.push_back({pid, "musterctld", pid_file, true});
      if (&h == &config.controllers.front()) MUSTER_RETURN_IF_ERROR(serving());
    }
  } else if (!ctld_alive) {
    if (progress)
      std::fprintf(progress, "starting musterctld (log: %s/log/musterctld.log)\n", dir.c_str());
    const std::string log = dir + "/log/musterctld.log";
    MUSTER_ASSIGN_OR_RETURN(pid_t pid, StartDaemon({ctld, "--config", conf}, log, ctld_pid));
    started_controllers.emplace_back(pid, log);
    started_now.push_back({pid, "musterctld", ctld_pid, true});
  }
  // The controller first: agents would only retry until it answers.
  MUSTER_RETURN_IF_ERROR(serving());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.wait_s);
  std::vector<std::pair<pid_t, std::string>> started_agents;
  for (const auto& n : config.nodes) {
    std::string pid_file = dir + "/run/musterd-" + n.name + ".pid";
    if (Alive(ReadPid(pid_file), "musterd")) continue;
    if (progress) std::fprintf(progress, "starting musterd %s\n", n.name.c_str());
    std::string log = dir + "/log/musterd-" + n.name + ".log";
    MUSTER_ASSIGN_OR_RETURN(
        pid_t pid, StartDaemon({agentd, "--config", conf, "--name", n.name, "--gpu-fixture",
                                dir + "/gpus.toml", "--spool", dir + "/spool/" + n.name},
                               log, pid_file));
    started_agents.emplace_back(pid, log);
    started_now.push_back({pid, "musterd", pid_file, true});
  }
  // Up = every node registered and responding (idle, or busy with jobs from before a restart).
  std::string last;
  while (true) {
    auto c = standby ? ControllerClient::ConnectTo(config)
                     : ControllerClient::Connect(config.controller.socket_path);
    if (c.ok()) {
      auto nodes = c->ListNodes(v1::ListNodesRequest());
      if (nodes.ok()) {
        std::vector<std::string> waiting;
        for (const auto& n : nodes->nodes()) {
          bool up = n.state() == v1::NODE_IDLE || n.state() == v1::NODE_MIXED ||
                    n.state() == v1::NODE_ALLOCATED;
          if (!up) waiting.push_back(n.name());
        }
        if (waiting.empty()) break;
        last = Join(waiting, ",");
      }
    }
    MUSTER_RETURN_IF_ERROR(exited(started_agents, "musterd"));
    if (std::chrono::steady_clock::now() > deadline) {
      return DeadlineExceeded("nodes not up after " + std::to_string(o.wait_s) + " s: " + last +
                              "; see " + dir + "/log/");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  stop_on_failure.up = true;
  return conf;
}

Status LocalDown(const std::string& dir_in, bool purge, FILE* progress) {
  std::string dir =
      fs::absolute(dir_in.empty() ? DefaultLocalDir() : dir_in).lexically_normal().string();
  if (!fs::exists(dir + "/run")) return NotFound("no local cluster in " + dir);
  std::vector<std::pair<std::string, std::string>> agents, ctld, etcd;  // (pid file, program)
  for (const auto& e : fs::directory_iterator(dir + "/run")) {
    std::string name = e.path().filename().string();
    if (StartsWith(name, "musterd-") && e.path().extension() == ".pid") {
      agents.emplace_back(e.path().string(), "musterd");
    } else if (StartsWith(name, "musterctld") && e.path().extension() == ".pid") {
      ctld.emplace_back(e.path().string(), "musterctld");
    } else if (name == "etcd.pid") {
      etcd.emplace_back(e.path().string(), "etcd");
    }
  }
  auto stop = [&](const std::vector<std::pair<std::string, std::string>>& which) {
    std::vector<Started> daemons;
    for (const auto& [file, prog] : which) daemons.push_back({ReadPid(file), prog, file});
    StopDaemons(daemons, progress);
  };
  stop(agents);
  stop(ctld);
  stop(etcd);  // last: a leader that loses etcd stops believing it leads
  if (purge) {
    if (ReadFile(dir + "/muster.toml").rfind(kMarker, 0) != 0) {
      return FailedPrecondition(dir +
                                " does not look like a `muster local` directory; not deleting it");
    }
    std::error_code ec;
    // Ours only if it is where `local up` puts it and nobody else owns or may change it: on the
    // shared /dev/shm another user could have made it, and a recursive delete (as root, maybe)
    // must not walk a tree someone else can rearrange under it.
    if (auto conf = LoadConfig(dir + "/muster.toml");
        conf.ok() && StartsWith(conf->agent.job_state_dir, kShmPrefix) &&
        conf->agent.job_state_dir.find('/', std::string_view(kShmPrefix).size()) ==
            std::string::npos) {
      if (Status own = CheckOwnDirectory(conf->agent.job_state_dir); own.ok()) {
        fs::remove_all(conf->agent.job_state_dir, ec);
      } else if (own.code() != StatusCode::kNotFound && progress) {
        std::fprintf(progress, "not deleting %s: %s\n", conf->agent.job_state_dir.c_str(),
                     own.message().c_str());
      }
    }
    fs::remove_all(dir, ec);
    if (ec) return Internal("cannot delete " + dir + ": " + ec.message());
  }
  return Status::Ok();
}

}  // namespace muster::client
