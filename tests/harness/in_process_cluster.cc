#include "harness/in_process_cluster.h"

#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness/test_util.h"
#include "muster/client/certificates.h"
#include "muster/common/procfs.h"
#include "muster/common/strings.h"

namespace muster::testing {
namespace fs = std::filesystem;

namespace {
std::atomic<int> g_counter{0};

// The controller must come back on the same port after a restart, so pick one up front.
int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}
}  // namespace

namespace {

// A cgroup v2 directory of this cluster's own, when the hierarchy is mounted and writable.
std::string PrivateCgroupRoot(const std::string& dir) {
  const std::string mount = Cgroup2Mount();
  if (mount.empty()) return "";
  std::string mine = mount + "/muster-itest-" + fs::path(dir).filename().string();
  return ::mkdir(mine.c_str(), 0755) == 0 ? mine : "";
}

// cgroups go leaf first, and only when empty (every test stops its jobs).
void RemoveCgroupTree(const std::string& root) {
  if (root.empty()) return;
  std::error_code ec;
  std::vector<std::string> dirs;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_directory(ec)) dirs.push_back(it->path().string());
  }
  std::sort(dirs.begin(), dirs.end(),
            [](const auto& a, const auto& b) { return a.size() > b.size(); });
  for (const auto& d : dirs) ::rmdir(d.c_str());
  ::rmdir(root.c_str());
}

}  // namespace

Result<std::unique_ptr<InProcessCluster>> InProcessCluster::Start(InProcessClusterOptions o) {
  for (int attempt = 1;; ++attempt) {
    auto c = StartOnce(o);
    if (c.ok() || attempt == 3 || c.status().message().find("in use") == std::string::npos) {
      return c;
    }
  }
}

Result<std::unique_ptr<InProcessCluster>> InProcessCluster::StartOnce(InProcessClusterOptions o) {
  // Quiet unless asked: MUSTER_TEST_LOG=debug|info shows what the daemons do.
  const char* level = std::getenv("MUSTER_TEST_LOG");
  spdlog::set_level(spdlog::level::from_str(level ? level : "warn"));
  auto c = std::unique_ptr<InProcessCluster>(new InProcessCluster());
  c->options_ = o;
  c->dir_ = (fs::temp_directory_path() /
             ("muster-it-" + std::to_string(::getpid()) + "-" + std::to_string(g_counter++)))
                .string();
  fs::remove_all(c->dir_);
  fs::create_directories(c->dir_ + "/jobs");
  if (o.standby) {
    MUSTER_ASSIGN_OR_RETURN(c->etcd_, TestEtcd::Start(c->dir_ + "/etcd"));
  }
  std::ostringstream t;
  t << "cluster_name = \"itest\"\n"
    << "[controller]\nsocket = \"" << c->dir_ << "/ctld.sock\"\n"
    << "agent_address = \"127.0.0.1:" << FreePort() << "\"\n"
    << "state_dir = \"" << c->dir_ << "/state\"\nlog_level = \"warn\"\n"
    << (o.standby ? "etcd_endpoints = [\"" + c->etcd_->endpoint() +
                        "\"]\nleader_lease_s = " + std::to_string(o.leader_lease_s) +
                        "\netcd_ca_file = \"" + c->etcd_->certs() + "/ca.crt\"\n" +
                        "etcd_cert_file = \"" + c->etcd_->certs() + "/client.crt\"\n" +
                        "etcd_key_file = \"" + c->etcd_->certs() + "/client.key\"\n"
                  : "")
    << (o.remote_api ? "api_address = \"127.0.0.1:" + std::to_string(FreePort()) + "\"\n" : "");
  if (o.metrics) {
    c->metrics_token_ = "itest-" + RandomHex(16);
    const std::string token_file = c->dir_ + "/metrics.token";
    { std::ofstream(token_file) << c->metrics_token_ << "\n"; }
    std::filesystem::permissions(
        token_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    t << "metrics_address = \"127.0.0.1:" << FreePort() << "\"\n"
      << "metrics_token_file = \"" << token_file << "\"\n";
  }
  t << "[scheduling]\nsched_min_interval_ms = 2\n"
    << "heartbeat_interval_ms = " << o.heartbeat_interval_ms << "\n"
    << "node_not_responding_ms = " << o.node_not_responding_ms << "\n"
    << "node_down_ms = " << o.node_down_ms << "\n"
    << "kill_grace_ms = " << o.kill_grace_ms << "\n"
    << "[agent]\nspool_dir = \"" << c->dir_ << "/spool\"\nstep_address = \"127.0.0.1:0\"\n"
    << "gpu_health_interval_ms = " << o.gpu_health_interval_ms << "\n";
  if (!o.prolog.empty()) t << "prolog = \"" << o.prolog << "\"\n";
  if (!o.epilog.empty()) t << "epilog = \"" << o.epilog << "\"\n";
  if (!o.reboot_program.empty()) t << "reboot_program = \"" << o.reboot_program << "\"\n";
  if (o.cgroups) c->cgroup_root_ = PrivateCgroupRoot(c->dir_);
  t << "cgroup_root = \"" << (c->cgroup_root_.empty() ? "none" : c->cgroup_root_) << "\"\n";
  if (!o.health_check_program.empty()) {
    t << "health_check_program = \"" << o.health_check_program << "\"\n"
      << "health_check_interval_s = 1\n";
  }
  if (o.tls) {
    client::CertificateOptions certs;
    certs.dir = c->dir_ + "/tls";
    for (int i = 1; i <= o.nodes; ++i) certs.nodes.push_back("node" + std::to_string(i));
    MUSTER_RETURN_IF_ERROR(client::MakeCertificates(certs).status());
    t << "[tls]\nca_file = \"" << certs.dir << "/ca.crt\"\n"
      << "controller_cert_file = \"" << certs.dir << "/controller.crt\"\n"
      << "controller_key_file = \"" << certs.dir << "/controller.key\"\n"
      << "node_cert_file = \"" << certs.dir << "/%n.crt\"\n"
      << "node_key_file = \"" << certs.dir << "/%n.key\"\n";
  } else {
    // Without TLS the agents prove their node with its key.
    client::CertificateOptions keys;
    keys.dir = c->dir_ + "/node-keys";
    for (int i = 1; i <= o.nodes; ++i) keys.nodes.push_back("node" + std::to_string(i));
    MUSTER_RETURN_IF_ERROR(client::MakeNodeKeys(keys).status());
    t << "[node_auth]\nkey_file = \"" << keys.dir << "/%n.key\"\n";
  }
  if (o.remote_api) {
    MUSTER_ASSIGN_OR_RETURN(c->munged_, TestMunged::Start(c->dir_ + "/munge"));
    t << "[munge]\nsocket = \"" << c->munged_->socket() << "\"\n";
  }
  int half = (o.nodes + 1) / 2;
  for (int i = 1; i <= o.nodes; ++i) {
    t << "[[nodes]]\nnames = \"node" << i << "\"\ncpus = 16\nmemory_mb = 64000\n"
      << "gpus = " << o.gpus_per_node << "\ngpu_type = \"h100\"\n"
      << "topology = \"spine1/leaf" << (i <= half ? 1 : 2) << "\"\n";
  }
  t << "[[partition]]\nname = \"gpu\"\nnodes = \"node[1-" << o.nodes << "]\"\ndefault = true\n";
  if (o.standby) {
    for (const char* name : {"ctl-a", "ctl-b"}) {
      t << "[[controllers]]\nname = \"" << name << "\"\n"
        << "agent_address = \"127.0.0.1:" << FreePort() << "\"\n"
        << "socket = \"" << c->dir_ << "/" << name << ".sock\"\n"
        << "state_dir = \"" << c->dir_ << "/state-" << name << "\"\n";
    }
  }
  c->config_path_ = c->dir_ + "/muster.toml";
  std::ofstream(c->config_path_) << t.str();
  std::ofstream(c->dir_ + "/gpus.toml")
      << "[node]\ncpus = 16\nmemory_mb = 64000\n[gpus]\ncount = " << o.gpus_per_node
      << "\nmodel = \"NVIDIA H100 80GB HBM3\"\nmemory_mb = 81559\n";
  MUSTER_ASSIGN_OR_RETURN(c->config_, LoadConfig(c->config_path_));
  MUSTER_RETURN_IF_ERROR(c->StartController());
  c->agents_.resize(static_cast<size_t>(o.nodes));
  for (int i = 0; i < o.nodes; ++i) MUSTER_RETURN_IF_ERROR(c->StartAgent(i));
  MUSTER_RETURN_IF_ERROR(c->WaitForNodesUp(10'000));
  return c;
}

InProcessCluster::~InProcessCluster() {
  for (auto& a : agents_) {
    if (a) a->Shutdown();
  }
  agents_.clear();
  StopController();
  std::error_code ec;
  fs::remove_all(dir_, ec);
  RemoveCgroupTree(cgroup_root_);
}

Status InProcessCluster::StartController() {
  if (options_.standby) {
    MUSTER_RETURN_IF_ERROR(StartCandidate(0));
    if (WaitForLeader(10'000) != 0) return DeadlineExceeded("ctl-a did not take the lead");
    return StartCandidate(1);
  }
  MUSTER_ASSIGN_OR_RETURN(controller_, rpc::ControllerServer::Create({config_}));
  return controller_->Start();
}

void InProcessCluster::StopController() {
  if (controller_) controller_->Shutdown();
  controller_.reset();
  for (auto& candidate : candidates_) {
    if (candidate) candidate->Shutdown();
    candidate.reset();
  }
}

Status InProcessCluster::RestartController() {
  if (options_.standby) return Unimplemented("RestartController with a standby: CrashCandidate");
  StopController();
  return StartController();
}

Status InProcessCluster::StartCandidate(int i) {
  const std::string name = i == 0 ? "ctl-a" : "ctl-b";
  MUSTER_ASSIGN_OR_RETURN(Config mine, ConfigForController(config_, name));
  ha::ControllerCandidateOptions o;
  o.config = std::move(mine);
  o.name = name;
  o.ack_timeout = std::chrono::milliseconds(1000);
  MUSTER_ASSIGN_OR_RETURN(candidates_[i], ha::ControllerCandidate::Create(std::move(o)));
  return candidates_[i]->Start();
}

void InProcessCluster::CrashCandidate(int i) {
  if (candidates_[i]) candidates_[i]->Shutdown(/*resign=*/false);
  candidates_[i].reset();
}

int InProcessCluster::WaitForLeader(int timeout_ms) const {
  int leader = -1;
  WaitFor(
      [&] {
        for (int i = 0; i < 2; ++i) {
          if (candidates_[i] && candidates_[i]->leading()) leader = i;
        }
        return leader >= 0;
      },
      timeout_ms);
  return leader;
}

Status InProcessCluster::StartAgent(int i) {
  agent::AgentOptions a;
  a.config = config_;
  a.config_path = config_path_;
  a.node_name = "node" + std::to_string(i + 1);
  a.gpu_fixture = dir_ + "/gpus.toml";
  a.topology_xml = options_.topology_xml;
  a.spool_dir = dir_ + "/spool/" + a.node_name;
  a.step_supervisor = MUSTER_BIN_DIR "/muster-stepd";  // steps outlive their agent, as on a node
  a.keeper_program = MUSTER_BIN_DIR "/muster-keeper";
  a.boot_id_file = dir_ + "/boot-id." + a.node_name;
  if (!std::filesystem::exists(a.boot_id_file)) {
    std::ofstream(a.boot_id_file) << a.node_name << "-boot-1\n";
  }
  MUSTER_ASSIGN_OR_RETURN(agents_[static_cast<size_t>(i)], agent::Agent::Create(a));
  return agents_[static_cast<size_t>(i)]->Start();
}

Status InProcessCluster::AddAgent(int i) {
  const std::string node = "node" + std::to_string(i + 1);
  if (!options_.tls) {
    client::CertificateOptions keys;
    keys.dir = dir_ + "/node-keys";
    keys.nodes.push_back(node);
    MUSTER_RETURN_IF_ERROR(client::MakeNodeKeys(keys).status());
  }
  MUSTER_ASSIGN_OR_RETURN(config_, LoadConfig(config_path_));
  if (agents_.size() <= static_cast<size_t>(i)) agents_.resize(static_cast<size_t>(i) + 1);
  return StartAgent(i);
}

void InProcessCluster::StopAgent(int i) {
  auto& a = agents_[static_cast<size_t>(i)];
  if (a) a->Shutdown();
  a.reset();
}

void InProcessCluster::DetachAgent(int i) {
  auto& a = agents_[static_cast<size_t>(i)];
  if (a) a->Detach();
  a.reset();
}

void InProcessCluster::SilenceAgent(int i, bool silent) {
  agents_[static_cast<size_t>(i)]->SetSilentForTest(silent);
}

Status InProcessCluster::WaitForNodesUp(int timeout_ms) {
  bool up = WaitFor(
      [&] {
        auto c = Client();
        if (!c.ok()) return false;
        auto n = c->ListNodes(v1::ListNodesRequest());
        if (!n.ok()) return false;
        for (const auto& node : n->nodes()) {
          if (node.state() != v1::NODE_IDLE && node.state() != v1::NODE_MIXED &&
              node.state() != v1::NODE_ALLOCATED) {
            return false;
          }
        }
        return true;
      },
      timeout_ms);
  return up ? Status::Ok() : DeadlineExceeded("nodes did not come up");
}

Result<client::ControllerClient> InProcessCluster::Client() const {
  // With a standby: whichever controller's socket answers (the CLI's way).
  if (options_.standby) return client::ControllerClient::ConnectTo(config_);
  return client::ControllerClient::Connect(config_.controller.socket_path);
}

Result<uint64_t> InProcessCluster::Submit(const std::string& script, v1::JobSpec spec) {
  spec.set_script(script);
  if (spec.work_dir().empty()) spec.set_work_dir(dir_ + "/jobs");
  if (spec.name().empty()) spec.set_name("itest");
  MUSTER_ASSIGN_OR_RETURN(auto c, Client());
  v1::SubmitJobRequest req;
  *req.mutable_spec() = spec;
  MUSTER_ASSIGN_OR_RETURN(auto resp, c.SubmitJob(req));
  return resp.job_id();
}

Result<v1::JobInfo> InProcessCluster::Job(uint64_t id) const {
  MUSTER_ASSIGN_OR_RETURN(auto c, Client());
  MUSTER_ASSIGN_OR_RETURN(auto r, c.GetJob(id));
  return r.job();
}

v1::JobState InProcessCluster::State(uint64_t id) const {
  auto j = Job(id);
  return j.ok() ? j->state() : v1::JOB_STATE_UNSPECIFIED;
}

Result<v1::NodeInfo> InProcessCluster::Node(const std::string& name) const {
  MUSTER_ASSIGN_OR_RETURN(auto c, Client());
  v1::ListNodesRequest r;
  r.add_names(name);
  MUSTER_ASSIGN_OR_RETURN(auto resp, c.ListNodes(r));
  if (resp.nodes_size() != 1) return NotFound("no node " + name);
  return resp.nodes(0);
}

}  // namespace muster::testing
