// What nodes report and what follows: hwloc layout, GPU faults, the health check, prolog and
// epilog, reboots.
#include "harness/cluster_test.h"

namespace muster::testing {
namespace {

TEST(ClusterHardwareTest, AgentsReportTheHwlocLayoutTheyFound) {
  InProcessClusterOptions o;
  o.nodes = 1;
  o.topology_xml =
      std::string(MUSTER_SOURCE_DIR) + "/tests/data/hwloc/xeon-2socket_1gpu_mlx5-ib_wholeio.v2.xml";
  auto c = InProcessCluster::Start(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto n = (*c)->Node("node1");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->topology_source(), "hwloc-xml:" + o.topology_xml);
  EXPECT_EQ(n->packages(), 2u);
  EXPECT_EQ(n->threads(), 32u);
  ASSERT_EQ(n->numa_nodes_size(), 2);
  EXPECT_EQ(n->numa_nodes(1).cpus_size(), 16);
  ASSERT_EQ(n->hcas_size(), 1);
  EXPECT_EQ(n->hcas(0).name(), "mlx5_0");
  EXPECT_EQ(n->hcas(0).numa_node(), 1);
  EXPECT_EQ(n->pci_gpus_size(), 3);
  // An unreadable topology file stops the agent with the file named.
  o.topology_xml = "/nonexistent/topo.xml";
  auto bad = InProcessCluster::Start(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("/nonexistent/topo.xml"), std::string::npos)
      << bad.status().ToString();
}

TEST_F(ClusterTest, InjectedGpuFaultDrainsTheNodeAndRequeuesItsJob) {
  auto id = cluster_->Submit("#!/bin/sh\nsleep 30\n", Gang(1, 8));
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::RUNNING, 10'000);
  const std::string node = cluster_->Job(*id)->nodes(0);
  const std::string faults = cluster_->dir() + "/spool/" + node + "/gpu-faults";
  std::ofstream(faults) << "5 xid 13\n3 xid 79\n";
  ASSERT_EVENTUALLY(cluster_->Node(node)->drain(), 10'000);
  auto n = cluster_->Node(node);
  EXPECT_EQ(n->reason(), "gpu3: XID 79 (fallen off the bus)");
  EXPECT_EQ(n->drained_by(), "gpu_health");
  EXPECT_EQ(n->gpu_devices(3).health(), "XID 79 (fallen off the bus)");
  EXPECT_EQ(n->gpu_devices(5).health(), "") << "XID 13 is the program's fault";
  // The job lost a GPU: requeued, and it runs again on another node.
  ASSERT_EVENTUALLY(cluster_->Job(*id)->requeue_count() == 1 && cluster_->State(*id) == v1::RUNNING,
                    10'000);
  EXPECT_NE(cluster_->Job(*id)->nodes(0), node);
  // The fault cleared (the GPU was reset): the node takes work again by itself.
  std::filesystem::remove(faults);
  ASSERT_EVENTUALLY(!cluster_->Node(node)->drain(), 10'000);
}

TEST(ClusterHealthTest, HealthCheckProgramDrainsAndResumesItsNode) {
  std::string dir =
      std::filesystem::temp_directory_path() / ("muster-hc-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string check = dir + "/check.sh";
  std::ofstream(check)
      << "#!/bin/sh\n[ -n \"$HOME$SLURM_JOB_ID\" ] && { echo leaked env; exit 1; }\n"
      << "if [ -e " << dir << "/sick.$MUSTER_NODE ]; then\n"
      << "  echo; echo 'ib0 down'; echo more; exit 1\nfi\n";
  std::filesystem::permissions(check, std::filesystem::perms::owner_all);
  InProcessClusterOptions o;
  o.nodes = 2;
  o.health_check_program = check;
  auto c = InProcessCluster::Start(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::ofstream(dir + "/sick.node2") << "";
  ASSERT_EVENTUALLY((*c)->Node("node2")->drain(), 10'000);
  EXPECT_EQ((*c)->Node("node2")->reason(), "ib0 down") << "the first line with text";
  EXPECT_EQ((*c)->Node("node2")->drained_by(), "health_check");
  EXPECT_FALSE((*c)->Node("node1")->drain());
  std::filesystem::remove(dir + "/sick.node2");
  ASSERT_EVENTUALLY(!(*c)->Node("node2")->drain(), 10'000);
  std::filesystem::remove_all(dir);
}

TEST(ClusterRebootTest, ANodeRebootsAfterItsJobAndComesBackFromTheNewBootToWork) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("muster-rb-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  // The stand-in reboot program: says it ran (node2's fails, as a broken IPMI would).
  const std::string program = dir + "/reboot";
  std::ofstream(program) << "#!/bin/sh\n"
                         << "[ \"$MUSTER_NODE\" = node2 ] && { echo 'ipmitool: no BMC'; exit 3; }\n"
                         << "echo \"$MUSTER_REBOOT_REASON\" > " << dir
                         << "/rebooted.$MUSTER_NODE\n";
  std::filesystem::permissions(program, std::filesystem::perms(0755));
  InProcessClusterOptions o;
  o.nodes = 2;
  o.reboot_program = program;
  auto c = InProcessCluster::Start(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  InProcessCluster& cluster = **c;
  v1::JobSpec on1 = Gang(1, 1);
  on1.add_required_nodes("node1");
  auto id = cluster.Submit("#!/bin/sh\nsleep 2\n", on1);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_EVENTUALLY(cluster.State(*id) == v1::RUNNING, 10'000);
  auto client = cluster.Client();
  ASSERT_TRUE(client.ok());
  v1::UpdateNodeRequest reboot;
  reboot.set_nodes("node[1-2]");
  reboot.set_action(v1::UpdateNodeRequest::REBOOT);
  reboot.set_asap(true);
  reboot.set_reason("kernel 6.1");
  ASSERT_TRUE(client->UpdateNode(reboot).ok());
  EXPECT_TRUE(cluster.Node("node1")->drain());
  EXPECT_EQ(cluster.Node("node1")->reboot(), "requested");
  // node2 is idle: its program runs at once, fails, and the node is drained with why.
  ASSERT_EVENTUALLY(cluster.Node("node2")->reboot().empty(), 10'000);
  EXPECT_TRUE(cluster.Node("node2")->drain());
  EXPECT_NE(cluster.Node("node2")->reason().find("reboot failed: ipmitool: no BMC"),
            std::string::npos)
      << cluster.Node("node2")->reason();
  // node1 waits for its job.
  EXPECT_FALSE(std::filesystem::exists(dir + "/rebooted.node1"));
  ASSERT_EVENTUALLY(std::filesystem::exists(dir + "/rebooted.node1"), 15'000);
  EXPECT_EQ(cluster.State(*id), v1::COMPLETED);
  std::ifstream said(dir + "/rebooted.node1");
  std::string reason;
  std::getline(said, reason);
  EXPECT_EQ(reason, "kernel 6.1");
  EXPECT_EQ(cluster.Node("node1")->reboot(), "issued");
  // The host comes back from a new boot, and its agent with it: node1 resumes.
  std::ofstream(cluster.dir() + "/boot-id.node1") << "node1-boot-2\n";
  cluster.DetachAgent(0);
  ASSERT_TRUE(cluster.StartAgent(0).ok());
  ASSERT_EVENTUALLY(cluster.Node("node1")->reboot().empty(), 10'000);
  EXPECT_FALSE(cluster.Node("node1")->drain()) << cluster.Node("node1")->reason();
  auto again = cluster.Submit("#!/bin/sh\ntrue\n", on1);
  ASSERT_TRUE(again.ok());
  ASSERT_EVENTUALLY(cluster.State(*again) == v1::COMPLETED, 10'000);
  std::filesystem::remove_all(dir);
}

TEST(ClusterPrologTest, PrologAndEpilogRunAsTheAdminsAndTheirFailuresDrain) {
  std::string dir =
      std::filesystem::temp_directory_path() / ("muster-pe-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto script = [&](const std::string& name, const std::string& body) {
    std::ofstream(dir + "/" + name) << "#!/bin/sh\n" << body;
    std::filesystem::permissions(dir + "/" + name, std::filesystem::perms::owner_all);
    return dir + "/" + name;
  };
  InProcessClusterOptions o;
  o.nodes = 2;
  o.prolog = script("prolog", "env > " + dir + "/prolog.$SLURMD_NODENAME.$SLURM_JOB_ID\n" +
                                  "[ -e " + dir + "/bad-prolog.$SLURMD_NODENAME ] && " +
                                  "{ echo; echo 'no scratch space'; exit 1; }\nexit 0\n");
  o.epilog = script("epilog", "echo done > " + dir + "/epilog.$SLURMD_NODENAME.$SLURM_JOB_ID\n" +
                                  "[ -e " + dir +
                                  "/bad-epilog ] && { echo 'GPU memory not "
                                  "freed'; exit 2; }\nexit 0\n");
  auto c = InProcessCluster::Start(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  InProcessCluster& cluster = **c;
  // A job on both nodes: the prolog ran on each with the job's variables and none of the user's.
  v1::JobSpec both = Gang(2, 1);
  both.add_environment("SECRET_OF_THE_USER=1");
  // A name made to be run by a careless root shell: it reaches the prolog as data only.
  const std::string hostile =
      "x$(touch " + dir + "/pwned)`touch " + dir + "/pwned`;touch " + dir + "/pwned";
  both.set_name(hostile);
  auto id = cluster.Submit("#!/bin/sh\ntrue\n", both);
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster.State(*id) == v1::COMPLETED, 10'000);
  const std::string tag = "." + std::to_string(*id);
  ASSERT_EVENTUALLY(std::filesystem::exists(dir + "/epilog.node1" + tag) &&
                        std::filesystem::exists(dir + "/epilog.node2" + tag),
                    10'000);
  std::string env = Read(dir + "/prolog.node2" + tag);
  EXPECT_NE(env.find("SLURM_JOB_ID=" + std::to_string(*id) + "\n"), std::string::npos) << env;
  EXPECT_NE(env.find("SLURM_JOB_NODELIST=node[1-2]\n"), std::string::npos) << env;
  EXPECT_EQ(env.find("SECRET_OF_THE_USER"), std::string::npos) << env;
  EXPECT_NE(env.find("SLURM_JOB_NAME=" + hostile + "\n"), std::string::npos) << env;
  EXPECT_FALSE(std::filesystem::exists(dir + "/pwned")) << "the job's name ran as root";
  // Both nodes free again (their epilogs done and reported), so the next job goes to node1.
  ASSERT_EVENTUALLY(!cluster.Job(*id)->completing(), 10'000);
  // A failed prolog drains its node with the script's first line and requeues the job.
  std::ofstream(dir + "/bad-prolog.node1") << "";
  auto requeued = cluster.Submit("#!/bin/sh\ntrue\n", Gang(1, 1));
  ASSERT_TRUE(requeued.ok());
  ASSERT_EVENTUALLY(cluster.State(*requeued) == v1::COMPLETED, 10'000);
  auto n1 = cluster.Node("node1");
  EXPECT_TRUE(n1->drain());
  EXPECT_EQ(n1->reason(), "prolog failed: no scratch space");
  EXPECT_EQ(cluster.Job(*requeued)->requeue_count(), 1u);
  EXPECT_EQ(cluster.Job(*requeued)->nodes(0), "node2");
  // A failed epilog drains its node; the job's result stands.
  ASSERT_EVENTUALLY(!cluster.Job(*requeued)->completing(), 10'000);  // its epilog has run
  std::ofstream(dir + "/bad-epilog") << "";
  auto last = cluster.Submit("#!/bin/sh\nexit 0\n", Gang(1, 1));
  ASSERT_TRUE(last.ok());
  ASSERT_EVENTUALLY(cluster.Node("node2")->drain(), 10'000);
  EXPECT_EQ(cluster.Node("node2")->reason(),
            "epilog failed after job " + std::to_string(*last) + ": GPU memory not freed");
  EXPECT_EQ(cluster.State(*last), v1::COMPLETED);
  std::filesystem::remove_all(dir);
}

// A gang whose batch script ends while another node's prolog still runs: that node gets its
// terminate during the prolog, and still runs the epilog once the prolog is done.
TEST(ClusterPrologTest, ANodeTerminatedDuringItsPrologStillRunsTheEpilog) {
  std::string dir =
      std::filesystem::temp_directory_path() / ("muster-pt-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/prolog")
      << "#!/bin/sh\n[ \"$SLURMD_NODENAME\" = node2 ] && sleep 1\nexit 0\n";
  std::ofstream(dir + "/epilog") << "#!/bin/sh\ntouch " << dir
                                 << "/epilog.$SLURMD_NODENAME\nexit 0\n";
  for (const char* s : {"/prolog", "/epilog"}) {
    std::filesystem::permissions(dir + s, std::filesystem::perms::owner_all);
  }
  InProcessClusterOptions o;
  o.nodes = 2;
  o.prolog = dir + "/prolog";
  o.epilog = dir + "/epilog";
  auto c = InProcessCluster::Start(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  InProcessCluster& cluster = **c;
  auto id = cluster.Submit("#!/bin/sh\ntrue\n", Gang(2, 1));
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster.State(*id) == v1::COMPLETED && !cluster.Job(*id)->completing(), 10'000);
  EXPECT_TRUE(std::filesystem::exists(dir + "/epilog.node1"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/epilog.node2"))
      << "the node whose prolog the job's end interrupted ran no epilog";
  std::filesystem::remove_all(dir);
}

TEST(ClusterPrologTest, JobCancelledWhileItsPrologFailsStillDrainsAndFrees) {
  std::string dir =
      std::filesystem::temp_directory_path() / ("muster-pc-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/prolog") << "#!/bin/sh\nsleep 0.5\nexit 1\n";
  std::filesystem::permissions(dir + "/prolog", std::filesystem::perms::owner_all);
  InProcessClusterOptions o;
  o.nodes = 1;
  o.prolog = dir + "/prolog";
  auto c = InProcessCluster::Start(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  InProcessCluster& cluster = **c;
  auto id = cluster.Submit("#!/bin/sh\ntrue\n", Gang(1, 1));
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster.State(*id) == v1::RUNNING, 10'000);
  auto client = cluster.Client();
  v1::CancelJobRequest r;
  r.add_job_ids(*id);
  ASSERT_TRUE(client->CancelJob(r).ok());
  ASSERT_EVENTUALLY(cluster.State(*id) == v1::CANCELLED && !cluster.Job(*id)->completing(), 10'000);
  ASSERT_EVENTUALLY(cluster.Node("node1")->drain(), 10'000);
  EXPECT_EQ(cluster.Node("node1")->reason(), "prolog exited with code 1");
  EXPECT_EQ(cluster.Node("node1")->cpus_allocated(), 0u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace muster::testing
