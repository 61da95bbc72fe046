#include "muster/client/submit_options.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <csignal>

#include "muster/common/clock.h"

namespace muster::client {
namespace {

SubmitOptions Parse(const std::vector<std::string>& args) {
  SubmitOptions o;
  Status s = ParseSubmitArgs(args, "command line", &o);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return o;
}

TEST(SubmitArgsTest, ShortLongAndAttachedForms) {
  SubmitOptions o = Parse({"-N2", "--ntasks=4", "-c", "2", "--mem=4G", "-t", "1-00:30", "-J", "x",
                           "--gpus-per-node=h100:8", "-p", "gpu,debug", "--parsable", "script.sh",
                           "arg1", "--not-an-option"});
  EXPECT_EQ(*o.nodes, 2u);
  EXPECT_EQ(*o.ntasks, 4u);
  EXPECT_EQ(*o.cpus_per_task, 2u);
  EXPECT_EQ(*o.mem_mb, 4096u);
  EXPECT_EQ(*o.time_limit_ms, (24 * 60 + 30) * 60'000LL);
  EXPECT_EQ(*o.job_name, "x");
  EXPECT_EQ(*o.gpus_per_node, 8u);
  EXPECT_EQ(*o.gpu_type, "h100");
  EXPECT_EQ(*o.partition, "gpu,debug");
  EXPECT_TRUE(o.parsable);
  EXPECT_EQ(o.positional, (std::vector<std::string>{"script.sh", "arg1", "--not-an-option"}));
}

// srun --cpu-bind: every form of Slurm's is taken and kept for the step (the nodes bind each
// task); a malformed one is refused before anything runs.
TEST(SubmitArgsTest, CpuBindTakesSlurmsFormsAndRefusesMalformedOnes) {
  for (const char* v : {"q", "quiet", "v", "verbose", "none", "no", "quiet,none", "V", "cores",
                        "verbose,map_cpu:0,1", "mask_cpu:0x3,0xc", "rank", "ldoms"}) {
    SubmitOptions o;
    EXPECT_TRUE(
        ParseSubmitArgs({std::string("--cpu-bind=") + v, "hostname"}, "srun", &o, OptionSet::kRun)
            .ok())
        << v;
    EXPECT_EQ(o.positional, std::vector<std::string>{"hostname"});
    EXPECT_EQ(o.cpu_bind, v);
  }
  SubmitOptions o;
  Status bad = ParseSubmitArgs({"--cpu-bind=cores,sockets", "x"}, "srun", &o, OptionSet::kRun);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("more than one binding type"), std::string::npos) << bad.message();
  EXPECT_EQ(ParseSubmitArgs({"--cpu-bind=map_cpu:x", "x"}, "srun", &o, OptionSet::kRun).code(),
            StatusCode::kInvalidArgument);
  // -m's second level deals the CPUs.
  EXPECT_TRUE(ParseSubmitArgs({"-m", "block:block", "x"}, "srun", &o, OptionSet::kRun).ok());
  EXPECT_EQ(o.cpu_distribution, "block");
  EXPECT_EQ(o.task_distribution, "block");
  // As in Slurm, an srun option: sbatch does not know it.
  EXPECT_EQ(ParseSubmitArgs({"--cpu-bind=q", "x"}, "sbatch", &o, OptionSet::kBatch).code(),
            StatusCode::kInvalidArgument);
}

// -m's first level: which task ids go to which node; SLURM_DISTRIBUTION names it as Slurm does.
TEST(SubmitArgsTest, DistributionLevelsAndHowTheStepAndTheJobSeeThem) {
  struct Case {
    const char* value;
    const char* whole;  // as SLURM_DISTRIBUTION names it
    const char* task;   // CreateStepRequest.task_distribution
    const char* cpu;
  };
  for (const Case& c : {Case{"cyclic", "cyclic", "cyclic", ""},
                        Case{"cyclic:block,NoPack", "cyclic:block,nopack", "cyclic", "block"},
                        Case{"*:fcyclic", "block:fcyclic", "", "fcyclic"},
                        Case{"plane=3", "plane", "plane=3", ""}, Case{"block", "block", "", ""}}) {
    SubmitOptions o;
    ASSERT_TRUE(ParseSubmitArgs({"-m", c.value, "x"}, "srun", &o, OptionSet::kRun).ok()) << c.value;
    EXPECT_EQ(o.distribution, c.whole) << c.value;
    EXPECT_EQ(StepTaskDistribution(o), c.task) << c.value;
    EXPECT_EQ(o.cpu_distribution, c.cpu) << c.value;
    EXPECT_EQ(BuildStepRequest(o, 7, /*in_job=*/true).task_distribution(), c.task);
    EXPECT_EQ(BuildStepRequest(o, 7, /*in_job=*/false).task_distribution(), c.task)
        << "srun's own allocation lays its step out likewise";
  }
  for (const char* bad :
       {"plane=0", "plane=2:block", "cyclic:wide", "diagonal", "a:b:c:d", "cyclic,Wrong"}) {
    SubmitOptions o;
    Status s = ParseSubmitArgs({"-m", bad, "x"}, "srun", &o, OptionSet::kRun);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(std::string("--distribution=") + bad), std::string::npos)
        << s.message();
  }
}

// srun inside a job follows sbatch's or salloc's -m (SLURM_DISTRIBUTION) unless given its own;
// plane's size may come from SLURM_DIST_PLANESIZE, as Slurm's.
TEST(SubmitArgsTest, DistributionFromTheEnvironment) {
  const std::vector<std::string> env = {"SLURM_DISTRIBUTION=plane", "SLURM_DIST_PLANESIZE=4"};
  SubmitOptions o;
  ASSERT_TRUE(ResolveDistribution(env, true, &o).ok());
  EXPECT_EQ(StepTaskDistribution(o), "plane=4");
  SubmitOptions own;
  ASSERT_TRUE(ParseSubmitArgs({"-m", "cyclic", "x"}, "srun", &own, OptionSet::kRun).ok());
  ASSERT_TRUE(ResolveDistribution(env, true, &own).ok());
  EXPECT_EQ(StepTaskDistribution(own), "cyclic") << "-m wins";
  SubmitOptions batch;  // sbatch and salloc do not read SLURM_DISTRIBUTION
  ASSERT_TRUE(ResolveDistribution(env, false, &batch).ok());
  EXPECT_EQ(batch.distribution, "");
  SubmitOptions plane;
  ASSERT_TRUE(ParseSubmitArgs({"-m", "plane", "x"}, "srun", &plane, OptionSet::kRun).ok());
  Status none = ResolveDistribution({}, true, &plane);
  EXPECT_EQ(none.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.message().find("needs a size"), std::string::npos) << none.message();
  ASSERT_TRUE(ResolveDistribution(env, false, &plane).ok());
  EXPECT_EQ(plane.plane_size, 4u);
  SubmitOptions bad;
  Status s = ResolveDistribution({"SLURM_DISTRIBUTION=arbitrary"}, true, &bad);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(s.message().rfind("SLURM_DISTRIBUTION: ", 0), 0u) << s.message();

  // sbatch -m: the batch job's environment carries it to its steps.
  SubmitOptions job;
  ASSERT_TRUE(ParseSubmitArgs({"-m", "plane=2", "x.sh"}, "sbatch", &job).ok());
  SubmitContext ctx;
  ctx.script = "#!/bin/sh\n";
  auto spec = BuildJobSpec(job, ctx);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const std::vector<std::string> got(spec->environment().begin(), spec->environment().end());
  EXPECT_NE(std::find(got.begin(), got.end(), "SLURM_DISTRIBUTION=plane"), got.end());
  EXPECT_NE(std::find(got.begin(), got.end(), "SLURM_DIST_PLANESIZE=2"), got.end());
}

// srun --multi-prog, --task-prolog, --task-epilog: srun's, kept for the step.
TEST(SubmitArgsTest, MultiProgAndTaskPrologsAreSrunOptions) {
  SubmitOptions o;
  ASSERT_TRUE(ParseSubmitArgs(
                  {"--multi-prog", "--task-prolog=/p.sh", "--task-epilog", "e.sh", "silly.conf"},
                  "srun", &o, OptionSet::kRun)
                  .ok());
  EXPECT_TRUE(o.multi_prog);
  EXPECT_EQ(o.task_prolog, "/p.sh");
  EXPECT_EQ(o.task_epilog, "e.sh");
  EXPECT_EQ(o.positional, std::vector<std::string>{"silly.conf"});
  for (const char* opt : {"--multi-prog", "--task-prolog=/p.sh"}) {
    SubmitOptions b;
    EXPECT_EQ(ParseSubmitArgs({opt, "x"}, "sbatch", &b, OptionSet::kBatch).code(),
              StatusCode::kInvalidArgument)
        << opt;
  }
}

// Options whose effect Muster does not have are accepted where nothing a job gets depends on
// them (a batch library's templates and workflow tools pass them), and still checked.
TEST(SubmitArgsTest, HarmlessOptionsAreAcceptedAndChecked) {
  SubmitOptions o;
  Status st = ParseSubmitArgs(
      {"--mail-type=END,FAIL", "--mail-user=a@b", "--comment=x", "--wckey=w", "--acctg-freq=30",
       "--profile=none", "--time-min=10", "--delay-boot=5", "-Q", "-v", "job.sh"},
      "sbatch", &o);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(o.positional, std::vector<std::string>{"job.sh"});
  EXPECT_EQ(ParseSubmitArgs({"--mail-type=SOMETIMES", "x"}, "sbatch", &o).message(),
            "sbatch: invalid --mail-type 'SOMETIMES'");
  EXPECT_EQ(ParseSubmitArgs({"--time-min=soon", "x"}, "sbatch", &o).code(),
            StatusCode::kInvalidArgument);
}

TEST(SubmitArgsTest, GresForms) {
  EXPECT_EQ(*Parse({"--gres=gpu:4"}).gpus_per_node, 4u);
  SubmitOptions o = Parse({"--gres=gpu:a100:2"});
  EXPECT_EQ(*o.gpus_per_node, 2u);
  EXPECT_EQ(*o.gpu_type, "a100");
  EXPECT_EQ(*Parse({"--gres=gpu"}).gpus_per_node, 1u);
  o = Parse({"-G", "16"});
  EXPECT_EQ(*o.gpus, 16u);
  EXPECT_FALSE(o.gpus_per_node);
}

// Counts, sizes and times that would wrap are refused, never silently turned into something
// small (--mem=18014398509481984T once became 0 and reserved nothing; gpu:4294967297 became 1).
TEST(SubmitArgsTest, ValuesThatWouldOverflowAreRefused) {
  for (std::vector<std::string> args : {std::vector<std::string>{"--mem=18014398509481984T"},
                                        {"--mem=99999999999999999999"},
                                        {"--mem-per-gpu=17179869184G"},
                                        {"--gres=gpu:4294967297"},
                                        {"--gres=gpu:h100:4294967297"},
                                        {"--gres=gpu:99999999999999999999999"},
                                        {"--gpus-per-node=4294967297"},
                                        {"-t", "99999999999999999-00:00:00"},
                                        {"-N", "4294967297"}}) {
    SubmitOptions o;
    Status st = ParseSubmitArgs(args, "command line", &o);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << args[0] << " accepted";
  }
  EXPECT_EQ(*Parse({"--mem=2T"}).mem_mb, 2u << 20);
  EXPECT_EQ(*Parse({"-t", "99999-00:00:00"}).time_limit_ms, 99999LL * 86'400'000);
}

TEST(SubmitArgsTest, AccountGoesIntoTheSpec) {
  SubmitOptions o;
  ASSERT_TRUE(ParseSubmitArgs({"-A", "physics", "x.sh"}, "command line", &o).ok());
  EXPECT_EQ(o.account.value_or(""), "physics");
  SubmitOptions l;
  ASSERT_TRUE(ParseSubmitArgs({"--account=chem"}, "script line 2", &l).ok());
  SubmitContext ctx;
  ctx.cwd = "/home/u";
  ctx.script = "#!/bin/sh\ntrue\n";
  auto spec = BuildJobSpec(l, ctx);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->account(), "chem");
}

TEST(SubmitArgsTest, QosAndSignal) {
  SubmitOptions o;
  ASSERT_TRUE(ParseSubmitArgs({"-q", "high", "--signal=B:USR1@90"}, "command line", &o).ok());
  EXPECT_EQ(o.qos, "high");
  EXPECT_EQ(o.signal, SIGUSR1);
  EXPECT_EQ(o.signal_time_s, 90u);
  EXPECT_TRUE(o.signal_batch_only);
  SubmitOptions p;
  ASSERT_TRUE(ParseSubmitArgs({"--signal=TERM"}, "command line", &p).ok());
  EXPECT_EQ(p.signal, SIGTERM);
  EXPECT_EQ(p.signal_time_s, 60u);
  EXPECT_FALSE(p.signal_batch_only);
  EXPECT_FALSE(ParseSubmitArgs({"--signal=NOPE"}, "command line", &p).ok());
  EXPECT_FALSE(ParseSubmitArgs({"--signal=USR1@soon"}, "command line", &p).ok());
}

TEST(SubmitArgsTest, SeveralGpuTypesInOrder) {
  SubmitOptions o;
  ASSERT_TRUE(ParseSubmitArgs({"--gpus-per-node=h100:8|a100:8"}, "command line", &o).ok());
  EXPECT_EQ(o.gpu_types, (std::vector<std::string>{"h100", "a100"}));
  EXPECT_FALSE(o.gpu_type.has_value());
  EXPECT_EQ(o.gpus_per_node.value_or(0), 8u);
  SubmitContext ctx;
  ctx.cwd = "/home/u";
  ctx.script = "#!/bin/sh\ntrue\n";
  auto spec = BuildJobSpec(o, ctx);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_EQ(spec->gpu_types_size(), 2);
  EXPECT_EQ(spec->gpu_types(1), "a100");
  EXPECT_EQ(spec->gpu_type(), "");
  // A later single type (the command line over #SBATCH) replaces the list.
  ASSERT_TRUE(ParseSubmitArgs({"--gres=gpu:h100:4"}, "command line", &o).ok());
  EXPECT_TRUE(o.gpu_types.empty());
  EXPECT_EQ(o.gpu_type.value_or(""), "h100");
  // Unequal counts, a type without a count, a repeated type: refused with the reason.
  Status s = ParseSubmitArgs({"--gpus-per-node=h100:8|a100:4"}, "command line", &o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("same count"), std::string::npos) << s.message();
  EXPECT_FALSE(ParseSubmitArgs({"--gpus-per-node=h100|a100:8"}, "command line", &o).ok());
  s = ParseSubmitArgs({"--gpus-per-node=h100:8|h100:8"}, "command line", &o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("named twice"), std::string::npos) << s.message();
}

// --gpus-per-socket=[type:]N goes into the spec beside --sockets-per-node, which it needs (as in
// Slurm); the controller checks it against the other GPU counts.
TEST(SubmitArgsTest, GpusPerSocketNeedsSocketsPerNode) {
  SubmitContext ctx;
  ctx.cwd = "/home/u";
  ctx.script = "#!/bin/sh\ntrue\n";
  SubmitOptions o = Parse({"--gpus-per-socket=h100:2", "--sockets-per-node=2"});
  EXPECT_EQ(o.gpus_per_socket.value_or(0), 2u);
  EXPECT_EQ(o.gpu_type.value_or(""), "h100");
  auto spec = BuildJobSpec(o, ctx);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->gpus_per_socket(), 2u);
  EXPECT_EQ(spec->cpu_shape().sockets_per_node(), 2u);
  EXPECT_EQ(spec->gpu_type(), "h100");
  EXPECT_EQ(spec->gpus_per_node(), 0u) << "the controller makes it 2 x 2";
  // --cpus-per-gpu counts the node's GPUs from it: 2 on each of 2 sockets.
  o.cpus_per_gpu = 3;
  spec = BuildJobSpec(o, ctx);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->min_cpus_per_node(), 12u);
  // -B's first level is the sockets too.
  spec = BuildJobSpec(Parse({"--gpus-per-socket=1", "-B", "2:4"}), ctx);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->cpu_shape().sockets_per_node(), 2u);
  // Without --sockets-per-node (or with -B's '*'): Slurm's words.
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--gpus-per-socket=2"}, {"--gpus-per-socket=2", "-B", "*:4"}}) {
    spec = BuildJobSpec(Parse(args), ctx);
    ASSERT_FALSE(spec.ok()) << args.back();
    EXPECT_EQ(spec.status().message(),
              "--gpus-per-socket option requires --sockets-per-node specification");
  }
  spec = BuildJobSpec(Parse({"--gpus-per-socket=2", "--sockets-per-node=2", "--ntasks-per-gpu=1"}),
                      ctx);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("--ntasks-per-gpu and --gpus-per-socket"),
            std::string::npos)
      << spec.status().message();
  // A count it is; salloc and srun take it too.
  EXPECT_FALSE(ParseSubmitArgs({"--gpus-per-socket=two"}, "command line", &o).ok());
  EXPECT_FALSE(ParseSubmitArgs({"--gpus-per-socket=0"}, "command line", &o).ok());
  for (OptionSet set : {OptionSet::kRun, OptionSet::kAlloc}) {
    SubmitOptions r;
    EXPECT_TRUE(ParseSubmitArgs({"--gpus-per-socket=1", "sh"}, "command line", &r, set).ok());
    EXPECT_EQ(r.gpus_per_socket.value_or(0), 1u);
  }
}

TEST(SubmitArgsTest, NiceAndBegin) {
  SubmitOptions o;
  ASSERT_TRUE(ParseSubmitArgs({"--nice"}, "command line", &o).ok());
  EXPECT_EQ(*o.nice, 100) << "--nice alone is 100, as in Slurm";
  ASSERT_TRUE(ParseSubmitArgs({"--nice=-20"}, "command line", &o).ok());
  EXPECT_EQ(*o.nice, -20);
  EXPECT_FALSE(ParseSubmitArgs({"--nice=lots"}, "command line", &o).ok());
  EXPECT_FALSE(ParseSubmitArgs({"--nice=3000000000"}, "command line", &o).ok());
  const int64_t before = SystemClock::Get()->NowMs();
  ASSERT_TRUE(ParseSubmitArgs({"--begin=now+1hour"}, "command line", &o).ok());
  EXPECT_GE(*o.begin_time_ms, before + 3'600'000);
  EXPECT_LE(*o.begin_time_ms, SystemClock::Get()->NowMs() + 3'600'000);
  ASSERT_TRUE(ParseSubmitArgs({"-b", "now+90"}, "command line", &o).ok());
  EXPECT_GE(*o.begin_time_ms, before + 90'000) << "seconds without a unit";
  ASSERT_TRUE(ParseSubmitArgs({"--begin=23:59"}, "command line", &o).ok());
  EXPECT_GT(*o.begin_time_ms, before) << "the next 23:59";
  EXPECT_LE(*o.begin_time_ms, before + 86'400'000);
  ASSERT_TRUE(ParseSubmitArgs({"--deadline=now+2hours"}, "command line", &o).ok());
  EXPECT_GE(*o.deadline_ms, before + 7'200'000);
  Status s = ParseSubmitArgs({"--begin=someday"}, "script line 2", &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("script line 2: --begin: bad time 'someday'"), std::string::npos)
      << s.message();
}

TEST(SubmitArgsTest, UnknownAndUnsupportedOptionsAreRefusedByName) {
  SubmitOptions o;
  Status s = ParseSubmitArgs({"--frobnicate", "x"}, "command line", &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--frobnicate"), std::string::npos);
  s = ParseSubmitArgs({"--container=img"}, "script line 3", &o);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("script line 3: option --container is not supported"),
            std::string::npos)
      << s.message();
  // -L: name[:count], summed per name; a choice (a|b) and remote licenses are refused.
  SubmitOptions lic;
  ASSERT_TRUE(ParseSubmitArgs({"-L", "matlab:2,fluent,matlab"}, "command line", &lic).ok());
  EXPECT_EQ(lic.licenses, (std::map<std::string, uint32_t>{{"fluent", 1}, {"matlab", 3}}));
  EXPECT_FALSE(ParseSubmitArgs({"--licenses=a|b"}, "command line", &lic).ok());
  EXPECT_FALSE(ParseSubmitArgs({"--licenses=db@server"}, "command line", &lic).ok());
  EXPECT_FALSE(ParseSubmitArgs({"--licenses=matlab:0"}, "command line", &lic).ok());
  ASSERT_TRUE(ParseSubmitArgs({"--spread-job"}, "command line", &lic).ok());
  EXPECT_TRUE(lic.spread_job);
  // --tmp: megabytes unless a unit says otherwise, as --mem.
  SubmitOptions t;
  ASSERT_TRUE(ParseSubmitArgs({"--tmp=2G", "x"}, "command line", &t).ok());
  EXPECT_EQ(t.tmp_mb.value_or(0), 2048u);
  EXPECT_FALSE(ParseSubmitArgs({"--tmp=lots", "x"}, "command line", &t).ok());
  s = ParseSubmitArgs({"--gres=nvme:fast:x:2"}, "command line", &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseSubmitArgs({"-N", "zero"}, "command line", &o).ok());
  EXPECT_FALSE(ParseSubmitArgs({"-t", "soon"}, "command line", &o).ok());
  EXPECT_FALSE(ParseSubmitArgs({"-N"}, "command line", &o).ok());
  EXPECT_EQ(ParseSubmitArgs({"-N4-2"}, "command line", &o).code(), StatusCode::kInvalidArgument);
  SubmitOptions range;
  ASSERT_TRUE(ParseSubmitArgs({"-N2-4"}, "command line", &range).ok());
  EXPECT_EQ(*range.nodes, 4u);
  EXPECT_EQ(*range.min_nodes, 2u);
  ASSERT_TRUE(ParseSubmitArgs({"--nodes=3-3"}, "command line", &range).ok());
  EXPECT_EQ(*range.nodes, 3u);
  EXPECT_FALSE(range.min_nodes);
}

TEST(SubmitArgsTest, GresBesidesGpus) {
  SubmitOptions o;
  ASSERT_TRUE(
      ParseSubmitArgs({"--gres=shard:2,nvme:fast:1,gpu:1g.10gb:3,fpga"}, "command line", &o).ok());
  ASSERT_EQ(o.gres.size(), 3u);
  EXPECT_EQ(o.gres[0].name, "shard");
  EXPECT_EQ(o.gres[0].count, 2u);
  EXPECT_EQ(o.gres[1].type, "fast");
  EXPECT_EQ(o.gres[2].name, "fpga");
  EXPECT_EQ(o.gres[2].count, 1u);
  EXPECT_EQ(*o.gpu_type, "1g.10gb");
  EXPECT_EQ(*o.gpus_per_node, 3u);
  SubmitContext ctx{"#!/bin/sh\n", "job.sh", {}, "/home/u", "login1"};
  auto spec = BuildJobSpec(o, ctx);
  ASSERT_TRUE(spec.ok());
  ASSERT_EQ(spec->gres_size(), 3);
  EXPECT_EQ(spec->gres(1).name(), "nvme");
  EXPECT_EQ(spec->gres(1).type(), "fast");
  // A later --gres replaces the earlier list, as the command line replaces #SBATCH.
  ASSERT_TRUE(ParseSubmitArgs({"--gres=nvme:2"}, "command line", &o).ok());
  ASSERT_EQ(o.gres.size(), 1u);
  EXPECT_EQ(o.gres[0].count, 2u);
}

TEST(SubmitArgsTest, NodeConstraintsAndTopology) {
  SubmitOptions o;
  ASSERT_TRUE(ParseSubmitArgs({"-C", "ib&a100|h100", "-w", "gpu[01-02],cpu7", "--exclude=gpu09",
                               "--switches=2@1:00:00", "--topology=leaf", "--mem-per-gpu=8G",
                               "--gpus-per-task=h100:1"},
                              "command line", &o)
                  .ok());
  EXPECT_EQ(*o.constraint, "ib&a100|h100");
  EXPECT_EQ(*o.nodelist, (std::vector<std::string>{"gpu01", "gpu02", "cpu7"}));
  EXPECT_EQ(*o.exclude, (std::vector<std::string>{"gpu09"}));
  EXPECT_EQ(*o.max_switches, 2u);
  EXPECT_EQ(*o.switches_wait_ms, 3'600'000);
  EXPECT_EQ(*o.topology, "leaf");
  EXPECT_EQ(*o.mem_per_gpu_mb, 8192u);
  EXPECT_EQ(*o.gpus_per_task, 1u);
  EXPECT_EQ(*o.gpu_type, "h100");
  SubmitContext ctx{"#!/bin/sh\n", "job.sh", {}, "/home/u", "login1"};
  auto spec = BuildJobSpec(o, ctx);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->constraint(), "ib&a100|h100");
  EXPECT_EQ(spec->required_nodes_size(), 3);
  EXPECT_EQ(spec->excluded_nodes(0), "gpu09");
  EXPECT_EQ(spec->max_switches(), 2u);
  EXPECT_EQ(spec->switches_wait_ms(), 3'600'000);
  EXPECT_EQ(spec->topology(), "leaf");
  EXPECT_EQ(spec->mem_per_gpu_mb(), 8192u);
  EXPECT_EQ(spec->gpus_per_task(), 1u);
  // The last memory and GPU forms win, so the command line overrides #SBATCH lines.
  ASSERT_TRUE(ParseSubmitArgs({"--mem=1G", "--gpus-per-node=2"}, "command line", &o).ok());
  EXPECT_FALSE(o.mem_per_gpu_mb);
  EXPECT_FALSE(o.gpus_per_task);
  // Malformed values are refused with the option named.
  SubmitOptions bad;
  Status st = ParseSubmitArgs({"--topology=rack"}, "command line", &bad);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--topology"), std::string::npos);
  EXPECT_EQ(ParseSubmitArgs({"--switches=x"}, "command line", &bad).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseSubmitArgs({"--switches=1@soon"}, "command line", &bad).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseSubmitArgs({"-w", "gpu[01-"}, "command line", &bad).code(),
            StatusCode::kInvalidArgument);
  // A value with a '/' is a file of names (OptionFileTest).
  EXPECT_EQ(ParseSubmitArgs({"-w", "/no/such/file"}, "command line", &bad).code(),
            StatusCode::kInvalidArgument);
}

TEST(DirectivesTest, ReadsSbatchLinesUntilTheFirstCommand) {
  auto d = ParseDirectives(R"(#!/bin/bash
# a comment
#SBATCH -N 2
#SBATCH --job-name="my job"   # trailing comment
#SBATCHX not a directive

#SBATCH --gres=gpu:8
echo hello
#SBATCH -N 9
)");
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->size(), 3u);
  EXPECT_EQ((*d)[0].line, 3);
  EXPECT_EQ((*d)[0].args, (std::vector<std::string>{"-N", "2"}));
  EXPECT_EQ((*d)[1].args, (std::vector<std::string>{"--job-name=my job"}));
  EXPECT_EQ((*d)[2].line, 7);
}

TEST(DirectivesTest, CommandLineOverridesDirectives) {
  SubmitOptions o;
  auto d = ParseDirectives("#!/bin/sh\n#SBATCH -N 2 -J fromscript -t 10\n");
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(ParseSubmitArgs((*d)[0].args, "script", &o).ok());
  ASSERT_TRUE(ParseSubmitArgs({"-J", "fromcli", "x.sh"}, "cli", &o).ok());
  EXPECT_EQ(*o.nodes, 2u);
  EXPECT_EQ(*o.job_name, "fromcli");
  EXPECT_EQ(*o.time_limit_ms, 600'000);
}

TEST(SplitWordsTest, Quotes) {
  EXPECT_EQ(*SplitWords(R"(a "b c" 'd e' f\ g)"),
            (std::vector<std::string>{"a", "b c", "d e", "f g"}));
  EXPECT_FALSE(SplitWords("\"open").ok());
}

TEST(BuildJobSpecTest, ScriptWithoutShebangIsRefused) {
  SubmitContext ctx;
  ctx.script = "echo hi\n";
  auto s = BuildJobSpec(SubmitOptions(), ctx);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("#!"), std::string::npos);
}

TEST(BuildJobSpecTest, FillsNameDirsAndExport) {
  SubmitContext ctx;
  ctx.script = "#!/bin/sh\n";
  ctx.script_name = "/home/a/train.sh";
  ctx.cwd = "/home/a";
  ctx.environment = {"A=1", "B=2", "PATH=/bin"};
  SubmitOptions o;
  o.chdir = "work";
  o.positional = {"/home/a/train.sh", "x", "y"};
  auto s = BuildJobSpec(o, ctx);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->name(), "train.sh");
  EXPECT_EQ(s->work_dir(), "/home/a/work");
  EXPECT_EQ(s->submit_dir(), "/home/a");
  EXPECT_EQ(s->script_args_size(), 2);
  EXPECT_EQ(s->environment_size(), 3);
  o.export_vars = "NONE";
  EXPECT_EQ(BuildJobSpec(o, ctx)->environment_size(), 0);
  o.export_vars = "A,C=3";
  auto e = BuildJobSpec(o, ctx);
  ASSERT_EQ(e->environment_size(), 2);
  EXPECT_EQ(e->environment(0), "A=1");
  EXPECT_EQ(e->environment(1), "C=3");
  o.export_vars = "ALL,B=9";
  e = BuildJobSpec(o, ctx);
  EXPECT_EQ(e->environment(1), "B=9");
}

// --export is split as Slurm's sbatch splits it: not at commas inside quotes; an item wholly in
// quotes loses them, quotes inside an item stay (Toil sends --export=ALL,NAME='a b').
TEST(BuildJobSpecTest, ExportListKeepsQuotedCommas) {
  SubmitContext ctx;
  ctx.script = "#!/bin/sh\n";
  ctx.environment = {"A=1"};
  SubmitOptions o;
  o.export_vars = "all,C='p,q',D=\"x,y\",'E=1,2',F='a b'";
  auto e = BuildJobSpec(o, ctx);
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_EQ(e->environment_size(), 5);
  EXPECT_EQ(e->environment(0), "A=1") << "all is ALL, in any case";
  EXPECT_EQ(e->environment(1), "C='p,q'");
  EXPECT_EQ(e->environment(2), "D=\"x,y\"");
  EXPECT_EQ(e->environment(3), "E=1,2");
  EXPECT_EQ(e->environment(4), "F='a b'");
  o.export_vars = "None";
  EXPECT_EQ(BuildJobSpec(o, ctx)->environment_size(), 0);
  o.export_vars = "ALL,G='open";
  auto bad = BuildJobSpec(o, ctx);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("G='open"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace muster::client

namespace muster::client {
namespace {

TEST(RunOptionsTest, EachCommandTakesItsOwnOptions) {
  SubmitOptions o;
  ASSERT_TRUE(
      ParseSubmitArgs({"-N2", "-l", "-K", "--exact", "--mpi=none", "-n", "4", "hostname", "-f"},
                      "command line", &o, OptionSet::kRun)
          .ok());
  EXPECT_TRUE(o.label);
  EXPECT_TRUE(o.kill_on_bad_exit);
  EXPECT_TRUE(o.exact);
  EXPECT_EQ(o.mpi.value_or(""), "none");
  EXPECT_EQ(*o.ntasks, 4u);
  EXPECT_EQ(o.positional, (std::vector<std::string>{"hostname", "-f"}))
      << "options after the command are the command's";
  // sbatch has no -l; salloc has no -o; --mpi=pmix is named as unsupported.
  SubmitOptions b;
  EXPECT_EQ(ParseSubmitArgs({"-l", "x.sh"}, "command line", &b).code(),
            StatusCode::kInvalidArgument);
  SubmitOptions a;
  EXPECT_EQ(ParseSubmitArgs({"-o", "out"}, "command line", &a, OptionSet::kAlloc).code(),
            StatusCode::kInvalidArgument);
  SubmitOptions m;
  Status s = ParseSubmitArgs({"--mpi=pmix", "x"}, "command line", &m, OptionSet::kRun);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("--mpi=pmix"), std::string::npos);
  for (const char* type : {"pmi2", "pmi1", "pmi", "list"}) {
    SubmitOptions t;
    ASSERT_TRUE(
        ParseSubmitArgs({std::string("--mpi=") + type, "x"}, "command line", &t, OptionSet::kRun)
            .ok())
        << type;
    EXPECT_EQ(t.mpi.value_or(""), type);
  }
  EXPECT_EQ(MpiTypeList(), "MPI plugin types are...\n\tnone\n\tpmi1\n\tpmi2\n");
  SubmitOptions i;
  ASSERT_TRUE(ParseSubmitArgs({"-I5", "x"}, "command line", &i, OptionSet::kAlloc).ok());
  EXPECT_EQ(i.immediate_s.value_or(0), 5u);
}

TEST(RunOptionsTest, JobIdNamesTheJobToRunAStepIn) {
  SubmitOptions o;
  ASSERT_TRUE(
      ParseSubmitArgs({"--jobid=42", "--overlap", "hostname"}, "command line", &o, OptionSet::kRun)
          .ok());
  EXPECT_EQ(o.jobid.value_or(0), 42u);
  SubmitOptions bad;
  EXPECT_EQ(ParseSubmitArgs({"--jobid=x", "true"}, "command line", &bad, OptionSet::kRun).code(),
            StatusCode::kInvalidArgument);
  SubmitOptions batch;
  EXPECT_EQ(ParseSubmitArgs({"--jobid=42", "x.sh"}, "command line", &batch).code(),
            StatusCode::kInvalidArgument)
      << "sbatch has no --jobid";
}

TEST(RunOptionsTest, AnAllocationSpecCarriesNoScript) {
  SubmitOptions o;
  ASSERT_TRUE(ParseSubmitArgs({"-N2", "sleep", "5"}, "command line", &o, OptionSet::kRun).ok());
  SubmitContext ctx;
  ctx.interactive = true;
  ctx.cwd = "/home/u";
  auto spec = BuildJobSpec(o, ctx);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_TRUE(spec->interactive());
  EXPECT_TRUE(spec->script().empty());
  EXPECT_EQ(spec->script_args_size(), 0) << "the command is the step's, not a script's";
  EXPECT_EQ(spec->nodes(), 2u);
}

TEST(SubmitArgsTest, StepRequestFromTheSameOptions) {
  SubmitOptions o;
  ASSERT_TRUE(ParseSubmitArgs({"-N2", "-n8", "-c2", "--gpus-per-task=1", "-w", "node[1-2]",
                               "--exclusive", "/usr/bin/python3", "train.py"},
                              "command line", &o, OptionSet::kRun)
                  .ok());
  // Inside a job: the step's own counts and nodes; its --exclusive is --exact.
  v1::CreateStepRequest in = BuildStepRequest(o, 42, /*in_job=*/true);
  EXPECT_EQ(in.job_id(), 42u);
  EXPECT_EQ(in.name(), "python3");
  EXPECT_EQ(in.nodes(), 2u);
  EXPECT_EQ(in.ntasks(), 8u);
  EXPECT_EQ(in.cpus_per_task(), 2u);
  EXPECT_EQ(in.gpus_per_task(), 1u);
  EXPECT_TRUE(in.exact());
  ASSERT_EQ(in.nodelist_size(), 2);
  EXPECT_EQ(in.nodelist(1), "node2");
  // In an allocation made from the same options: the allocation already has the shape.
  v1::CreateStepRequest own = BuildStepRequest(o, 43, /*in_job=*/false);
  EXPECT_EQ(own.nodes(), 0u);
  EXPECT_EQ(own.ntasks(), 0u);
  EXPECT_FALSE(own.exact()) << "--exclusive asked for whole nodes for the allocation";
  EXPECT_EQ(own.nodelist_size(), 0);
  o.job_name = "named";
  EXPECT_EQ(BuildStepRequest(o, 42, true).name(), "named");
}

}  // namespace
}  // namespace muster::client

namespace muster::client {
namespace {

TEST(SubmitArgsTest, PropagateGetUserEnvAndOvercommit) {
  SubmitOptions o = Parse({"-O", "--propagate=nofile,rlimit_stack", "--get-user-env=10L"});
  EXPECT_TRUE(o.overcommit);
  EXPECT_EQ(*o.propagate, "NOFILE,RLIMIT_STACK");
  EXPECT_TRUE(o.get_user_env);
  EXPECT_EQ(o.get_user_env_timeout_s, 10u);
  EXPECT_EQ(o.get_user_env_mode, "L");
  o = Parse({"--get-user-env", "--propagate"});
  EXPECT_EQ(o.get_user_env_timeout_s, 0u);
  EXPECT_EQ(*o.propagate, "ALL");
  SubmitOptions bad;
  EXPECT_FALSE(ParseSubmitArgs({"--propagate=FOO"}, "command line", &bad).ok());
  EXPECT_FALSE(ParseSubmitArgs({"--get-user-env=10X"}, "command line", &bad).ok());
  // Each where Slurm has it: srun has no --get-user-env, salloc no --propagate.
  EXPECT_FALSE(ParseSubmitArgs({"--get-user-env"}, "command line", &bad, OptionSet::kRun).ok());
  EXPECT_FALSE(ParseSubmitArgs({"--propagate"}, "command line", &bad, OptionSet::kAlloc).ok());
  EXPECT_TRUE(ParseSubmitArgs({"-O"}, "command line", &bad, OptionSet::kAlloc).ok());
  EXPECT_EQ(*ParsePropagateList("all,none,as"), std::vector<std::string>{"AS"});
}

TEST(SubmitArgsTest, PropagatedLimitsAreTheShellsLessTheClustersExceptions) {
  SubmitContext ctx;
  ctx.script = "#!/bin/sh\n";
  ctx.propagate_except = "CORE,NPROC";
  auto spec = BuildJobSpec(Parse({}), ctx);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  std::vector<std::string> names;
  for (const auto& l : spec->propagated_limits()) names.push_back(l.name());
  EXPECT_EQ(names, (std::vector<std::string>{"CPU", "FSIZE", "DATA", "STACK", "RSS", "NOFILE",
                                             "MEMLOCK", "AS"}));
  struct rlimit r {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &r), 0);
  EXPECT_EQ(spec->propagated_limits(5).soft(), r.rlim_cur);
  spec = BuildJobSpec(Parse({"--propagate=NONE", "-O", "--get-user-env=S"}), ctx);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->propagated_limits_size(), 0);
  EXPECT_TRUE(spec->overcommit());
  EXPECT_EQ(spec->get_user_env().mode(), "S");
  spec = BuildJobSpec(Parse({"--propagate=CORE"}), ctx);  // explicit: the exceptions do not apply
  ASSERT_TRUE(spec.ok());
  ASSERT_EQ(spec->propagated_limits_size(), 1);
  EXPECT_EQ(spec->propagated_limits(0).name(), "CORE");
}

}  // namespace
}  // namespace muster::client

namespace muster::client {
namespace {

// --mail-type's names become MailType bits (ALL as Slurm's, NONE clears, a later option wins)
// and --mail-user travels as given (the controller checks it); both reach the spec, also from
// #SBATCH lines.
TEST(SubmitArgsTest, MailTypesAndUserReachTheSpec) {
  SubmitOptions o = Parse({"--mail-type=BEGIN,end,Time_Limit_50", "--mail-user=a@b.org"});
  EXPECT_EQ(o.mail_types.value_or(0),
            uint32_t{v1::MAIL_BEGIN | v1::MAIL_END | v1::MAIL_TIME_LIMIT_50});
  EXPECT_EQ(o.mail_user.value_or(""), "a@b.org");
  EXPECT_EQ(Parse({"--mail-type=ALL,ARRAY_TASKS"}).mail_types.value_or(0),
            uint32_t{v1::MAIL_BEGIN | v1::MAIL_END | v1::MAIL_FAIL | v1::MAIL_REQUEUE |
                     v1::MAIL_INVALID_DEPEND | v1::MAIL_ARRAY_TASKS});
  EXPECT_EQ(Parse({"--mail-type=END,NONE,FAIL"}).mail_types.value_or(99), uint32_t{v1::MAIL_FAIL});
  EXPECT_EQ(Parse({"--mail-type=STAGE_OUT"}).mail_types.value_or(99), 0u);
  SubmitOptions bad;
  EXPECT_EQ(ParseSubmitArgs({"--mail-type=SOMETIMES"}, "command line", &bad).code(),
            StatusCode::kInvalidArgument);

  auto directives = ParseDirectives("#!/bin/sh\n#SBATCH --mail-type=FAIL --mail-user=ops\ntrue\n");
  ASSERT_TRUE(directives.ok());
  SubmitOptions d;
  for (const Directive& line : *directives) {
    ASSERT_TRUE(ParseSubmitArgs(line.args, "script", &d).ok());
  }
  ASSERT_TRUE(ParseSubmitArgs({"--mail-type=END"}, "command line", &d).ok());  // wins
  SubmitContext ctx;
  ctx.cwd = "/home/u";
  ctx.script = "#!/bin/sh\ntrue\n";
  auto spec = BuildJobSpec(d, ctx);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->mail_types(), uint32_t{v1::MAIL_END});
  EXPECT_EQ(spec->mail_user(), "ops");
}

}  // namespace
}  // namespace muster::client
