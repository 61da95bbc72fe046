// Attacker's suite: srun's PMI server. It once listened on a TCP port that any user could find
// in /proc/net/tcp and connect to; 16 wrong guesses at the step's secret then broke the step.
// Now the tasks reach it only through sockets they inherited, relayed by their nodes over the
// step's authenticated connection: during a two-node MPI-style exchange, srun (this process)
// opens no listening socket at all, and each task speaks for its rank through PMI_FD.
#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <future>
#include <set>
#include <sstream>

#include "harness/cluster_test.h"

namespace muster::testing {
namespace {

// The inodes of the sockets this process has open.
std::set<std::string> OurSocketInodes() {
  std::set<std::string> out;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    char target[256];
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    const std::string t(target, static_cast<size_t>(n));
    if (t.rfind("socket:[", 0) == 0) out.insert(t.substr(8, t.size() - 9));
  }
  ::closedir(d);
  return out;
}

// The inodes of every TCP socket listening on this host (what another user sees too).
std::set<std::string> ListeningInodes() {
  std::set<std::string> out;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, state, queues, timer, retr, uid, timeout, inode;
      f >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (state == "0A") out.insert(inode);
    }
  }
  return out;
}

std::set<std::string> OurListeners() {
  std::set<std::string> mine;
  const std::set<std::string> all = ListeningInodes();
  for (const std::string& i : OurSocketInodes()) {
    if (all.count(i)) mine.insert(i);
  }
  return mine;
}

TEST_F(ClusterTest, AStepsPmiHasNoPortForAnotherUserToFind) {
  auto id = cluster_->Submit("#!/bin/sh\nsleep 60\n", Gang(2, 1));
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::RUNNING, 10'000);
  auto c = cluster_->Client();
  ASSERT_TRUE(c.ok());
  const std::set<std::string> before = OurListeners();  // the in-process cluster's own
  ASSERT_FALSE(before.empty()) << "the probe sees no listener, not even the controller's";
  client::StepOptions o;
  o.shape.set_job_id(*id);
  o.shape.set_ntasks(2);
  // Each rank puts a card, waits in the barrier, and reads the other's, as MPI_Init does;
  // between the barrier's halves the tasks sleep, so srun is looked at mid-step.
  o.argv = {"sh", "-c",
            "r=$PMI_RANK; p() { printf '%s\\n' \"$1\" >&$PMI_FD; read -r a <&$PMI_FD; }; "
            "p 'cmd=init pmi_version=1 pmi_subversion=1'; "
            "p \"cmd=put kvsname=k key=card$r value=v$r\"; sleep 1; "
            "p 'cmd=barrier_in'; p \"cmd=get kvsname=k key=card$((1 - r))\"; "
            "echo \"$r ${PMI_PORT:-noport} $a\""};
  o.environment = {"PATH=/usr/bin:/bin"};
  o.work_dir = "/";
  auto step = std::async(std::launch::async, [&] { return RunCapturing(*c, o); });
  std::set<std::string> during;
  for (int i = 0;
       i < 20 && step.wait_for(std::chrono::milliseconds(50)) == std::future_status::timeout; ++i) {
    for (const std::string& l : OurListeners()) {
      if (!before.count(l)) during.insert(l);
    }
  }
  StepRun run = step.get();
  ASSERT_TRUE(run.rc.ok()) << run.rc.status().ToString() << run.err;
  EXPECT_EQ(*run.rc, 0) << run.out << run.err;
  EXPECT_TRUE(during.empty()) << "srun listened on " << during.size() << " TCP socket(s)";
  std::multiset<std::string> lines;
  std::istringstream ss(run.out);
  for (std::string l; std::getline(ss, l);) lines.insert(l);
  EXPECT_EQ(lines,
            (std::multiset<std::string>{"0 noport cmd=get_result rc=0 msg=success value=v1",
                                        "1 noport cmd=get_result rc=0 msg=success value=v0"}))
      << run.out << run.err;
}

}  // namespace
}  // namespace muster::testing
