// Slurm's options beyond sbatch's basics: each answered as Slurm answers it (taken, with what it
// does to the spec) or refused with the reason; the options that read files; srun's own.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "muster/client/submit_options.h"

namespace muster::client {
namespace {

Status ParseAs(OptionSet set, const std::vector<std::string>& args, SubmitOptions* o) {
  return ParseSubmitArgs(args, "command line", o, set);
}

// -k/--no-kill[=off] (every front end) and srun's --accel-bind=g (GPUs near each task's CPUs).
TEST(SlurmOptionsTest, NoKillAndAccelBindAreTaken) {
  for (OptionSet set : {OptionSet::kBatch, OptionSet::kRun, OptionSet::kAlloc}) {
    SubmitOptions k, off;
    ASSERT_TRUE(ParseAs(set, {"-k", "x.sh"}, &k).ok());
    EXPECT_TRUE(k.no_kill);
    EXPECT_EQ(k.positional, std::vector<std::string>{"x.sh"}) << "x.sh is no value of -k";
    ASSERT_TRUE(ParseAs(set, {"-k", "--no-kill=off", "x.sh"}, &off).ok());
    EXPECT_FALSE(off.no_kill);
    SubmitOptions bad;
    EXPECT_EQ(ParseAs(set, {"--no-kill=yes", "x.sh"}, &bad).code(), StatusCode::kInvalidArgument);
  }
  SubmitOptions g, none;
  ASSERT_TRUE(ParseAs(OptionSet::kRun, {"--accel-bind=vg", "true"}, &g).ok());
  EXPECT_TRUE(g.accel_bind_gpus);
  ASSERT_TRUE(ParseAs(OptionSet::kRun, {"--accel-bind=m", "true"}, &none).ok());
  EXPECT_FALSE(none.accel_bind_gpus);
  SubmitOptions o;
  EXPECT_EQ(ParseAs(OptionSet::kRun, {"--accel-bind=x", "true"}, &o).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseAs(OptionSet::kBatch, {"--accel-bind=g", "x.sh"}, &o).code(),
            StatusCode::kInvalidArgument)
      << "srun's alone";
}

// A refusal says why, so that a user knows whether to wait for it or to change the script.
TEST(SlurmOptionsTest, RefusedOptionsSayWhy) {
  SubmitOptions o;
  Status s = ParseAs(OptionSet::kBatch, {"--bb=capacity=1G", "x.sh"}, &o);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("option --bb is not supported: Muster has no burst buffers"),
            std::string::npos)
      << s.message();
  s = ParseAs(OptionSet::kRun, {"-Z", "true"}, &o);
  EXPECT_NE(s.message().find("option -Z is not supported: every step runs in an allocation"),
            std::string::npos)
      << s.message();
  s = ParseAs(OptionSet::kRun, {"--accel-bind=gn", "true"}, &o);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("not bound to network cards"), std::string::npos) << s.message();
  // getopt takes an unambiguous prefix for the whole name: --bcast must not become
  // --bcast-exclude. Its DEST is optional; srun's alone (sbatch and salloc have no --bcast).
  SubmitOptions bcast, bare;
  ASSERT_TRUE(ParseAs(OptionSet::kRun, {"--bcast=/tmp/a.out", "a.out"}, &bcast).ok());
  EXPECT_EQ(bcast.bcast.value_or("unset"), "/tmp/a.out");
  EXPECT_EQ(bcast.positional, std::vector<std::string>{"a.out"});
  ASSERT_TRUE(ParseAs(OptionSet::kRun, {"--bcast", "a.out"}, &bare).ok());
  EXPECT_EQ(bare.bcast.value_or("unset"), "") << "bare: the step's working directory";
  EXPECT_EQ(bare.positional, std::vector<std::string>{"a.out"}) << "a.out is no DEST";
  s = ParseAs(OptionSet::kBatch, {"--bcast=/tmp/a.out", "x.sh"}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("unknown option --bcast"), std::string::npos) << s.message();
  // One letter, two options: salloc's -K is --kill-command, srun's --kill-on-bad-exit.
  SubmitOptions k, kusr1, klong;
  ASSERT_TRUE(ParseAs(OptionSet::kAlloc, {"-K", "bash"}, &k).ok());
  EXPECT_EQ(k.kill_command, 0) << "no signal named: Slurm's default, chosen when it is sent";
  EXPECT_FALSE(k.kill_on_bad_exit);
  EXPECT_EQ(k.positional, std::vector<std::string>{"bash"});
  ASSERT_TRUE(ParseAs(OptionSet::kAlloc, {"-KUSR1", "bash"}, &kusr1).ok());
  EXPECT_EQ(kusr1.kill_command, SIGUSR1);
  ASSERT_TRUE(ParseAs(OptionSet::kAlloc, {"--kill-command=9", "bash"}, &klong).ok());
  EXPECT_EQ(klong.kill_command, 9);
  s = ParseAs(OptionSet::kAlloc, {"-Knosuch", "bash"}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--kill-command=nosuch: expected a signal"), std::string::npos)
      << s.message();
  EXPECT_FALSE(ParseAs(OptionSet::kRun, {"--kill-command", "true"}, &o).ok())
      << "srun has no --kill-command";
  SubmitOptions r;
  ASSERT_TRUE(ParseAs(OptionSet::kRun, {"-K", "true"}, &r).ok());
  EXPECT_TRUE(r.kill_on_bad_exit);
  EXPECT_FALSE(r.kill_command.has_value());
  // --uid/--gid: root's, for srun and salloc too (the controller honours them from root only).
  SubmitOptions su, sa;
  ASSERT_TRUE(ParseAs(OptionSet::kRun, {"--uid=0", "--gid=0", "true"}, &su).ok());
  EXPECT_EQ(su.run_as_uid.value_or(1), 0u);
  EXPECT_EQ(su.run_as_gid.value_or(1), 0u);
  ASSERT_TRUE(ParseAs(OptionSet::kAlloc, {"--uid=root", "bash"}, &sa).ok());
  EXPECT_EQ(sa.run_as_user, "root");
  EXPECT_TRUE(CheckRunAs(sa, 0).ok());
  EXPECT_NE(CheckRunAs(sa, 1000).message().find("for root only"), std::string::npos);
  SubmitOptions gid_alone;
  ASSERT_TRUE(ParseAs(OptionSet::kRun, {"--gid=0", "true"}, &gid_alone).ok());
  EXPECT_NE(CheckRunAs(gid_alone, 0).message().find("--gid applies with --uid"), std::string::npos)
      << "not quietly dropped";
  // srun's long --kill-on-bad-exit is no salloc option (its -K is --kill-command).
  s = ParseAs(OptionSet::kAlloc, {"--kill-on-bad-exit=1", "bash"}, &o);
  EXPECT_NE(s.message().find("unknown option --kill-on-bad-exit"), std::string::npos)
      << s.message();
  // sbatch -W waits and takes no value; srun's -W is another option, with one (seconds).
  SubmitOptions w;
  ASSERT_TRUE(ParseAs(OptionSet::kBatch, {"-W", "x.sh"}, &w).ok());
  EXPECT_TRUE(w.wait);
  EXPECT_EQ(w.positional, std::vector<std::string>{"x.sh"});
  SubmitOptions sw;
  ASSERT_TRUE(ParseAs(OptionSet::kRun, {"-W", "5", "true"}, &sw).ok());
  EXPECT_EQ(sw.step_wait_s, 5u);
  EXPECT_FALSE(sw.wait);
  EXPECT_EQ(sw.positional, std::vector<std::string>{"true"});
}

TEST(SlurmOptionsTest, HarmlessOptionsAreTakenAndChangeNothing) {
  SubmitOptions plain, o;
  ASSERT_TRUE(ParseAs(OptionSet::kBatch, {"x.sh"}, &plain).ok());
  ASSERT_TRUE(
      ParseAs(OptionSet::kBatch,
              {"--cpu-freq=high", "--gpu-freq=medium", "--power=level", "--network=x",
               "--prefer=a100", "--contiguous", "--reboot", "--gres-flags=enforce-binding", "-s",
               "--wait-all-nodes=1", "--mcs-label=g", "--batch=f", "--ignore-pbs", "x.sh"},
              &o)
          .ok());
  SubmitContext ctx;
  ctx.script = "#!/bin/sh\n";
  auto a = BuildJobSpec(plain, ctx), b = BuildJobSpec(o, ctx);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->SerializeAsString(), b->SerializeAsString());
  // srun's and salloc's own.
  SubmitOptions r;
  EXPECT_TRUE(
      ParseAs(OptionSet::kRun, {"-X", "-E", "-T", "4", "--msg-timeout=5", "true"}, &r).ok());
  SubmitOptions a2;
  ASSERT_TRUE(ParseAs(OptionSet::kAlloc, {"--bell", "bash"}, &a2).ok());
  EXPECT_TRUE(a2.bell);
  ASSERT_TRUE(ParseAs(OptionSet::kAlloc, {"--no-bell", "bash"}, &a2).ok());
  EXPECT_FALSE(a2.bell);
  // ...and not each other's: sbatch has no --bell, salloc no -X.
  EXPECT_EQ(ParseAs(OptionSet::kBatch, {"--bell", "x.sh"}, &o).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseAs(OptionSet::kAlloc, {"-X", "bash"}, &o).code(), StatusCode::kInvalidArgument);
}

TEST(SlurmOptionsTest, BindingsAndLayoutsTakeWhatTheyDoAndRefuseTheRest) {
  SubmitOptions o;
  EXPECT_TRUE(ParseAs(OptionSet::kRun, {"--distribution=block:cyclic,Pack", "true"}, &o).ok());
  EXPECT_TRUE(ParseAs(OptionSet::kRun, {"-m", "block", "true"}, &o).ok());
  EXPECT_TRUE(ParseAs(OptionSet::kRun, {"-m", "cyclic", "true"}, &o).ok());
  EXPECT_TRUE(ParseAs(OptionSet::kRun, {"--distribution=plane=4", "true"}, &o).ok());
  EXPECT_TRUE(ParseAs(OptionSet::kBatch, {"-m", "cyclic:cyclic", "x.sh"}, &o).ok());
  EXPECT_TRUE(ParseAs(OptionSet::kAlloc, {"-m", "plane=2", "bash"}, &o).ok());
  Status arbitrary = ParseAs(OptionSet::kRun, {"-m", "arbitrary", "true"}, &o);
  EXPECT_EQ(arbitrary.code(), StatusCode::kUnimplemented);
  EXPECT_NE(arbitrary.message().find("SLURM_HOSTFILE"), std::string::npos) << arbitrary.message();
  EXPECT_EQ(ParseAs(OptionSet::kRun, {"-m", "block,Wrong", "true"}, &o).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(ParseAs(OptionSet::kRun, {"--gpu-bind=verbose,none", "true"}, &o).ok());
  EXPECT_TRUE(ParseAs(OptionSet::kRun, {"--gpu-bind=map_gpu:1,0", "true"}, &o).ok());
  EXPECT_EQ(o.gpu_bind, "map_gpu:1,0");
  EXPECT_EQ(ParseAs(OptionSet::kRun, {"--gpu-bind=nearby", "true"}, &o).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(ParseAs(OptionSet::kRun, {"--gpu-bind=closest", "true"}, &o).ok());
  EXPECT_EQ(o.gpu_bind, "closest");
  EXPECT_TRUE(ParseAs(OptionSet::kBatch, {"--mem-bind=none", "x.sh"}, &o).ok());
  EXPECT_EQ(ParseAs(OptionSet::kBatch, {"--mem-bind=local", "x.sh"}, &o).code(),
            StatusCode::kUnimplemented);
  SubmitOptions e;
  ASSERT_TRUE(ParseAs(OptionSet::kBatch, {"--exclusive=user", "x.sh"}, &e).ok());
  EXPECT_TRUE(e.exclusive) << "a whole node, as for plain --exclusive";
  EXPECT_EQ(ParseAs(OptionSet::kBatch, {"--exclusive=bogus", "x.sh"}, &e).code(),
            StatusCode::kInvalidArgument);
}

TEST(SlurmOptionsTest, UseMinNodesStartsTheRangeAtItsMinimum) {
  SubmitOptions o;
  ASSERT_TRUE(ParseAs(OptionSet::kBatch, {"--use-min-nodes", "-N", "2-4", "x.sh"}, &o).ok());
  SubmitContext ctx;
  ctx.script = "#!/bin/sh\n";
  auto spec = BuildJobSpec(o, ctx);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->nodes(), 2u);
  EXPECT_EQ(spec->min_nodes(), 0u);
  o.use_min_nodes = false;
  spec = BuildJobSpec(o, ctx);
  EXPECT_EQ(spec->nodes(), 4u);
  EXPECT_EQ(spec->min_nodes(), 2u);
}

class OptionFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/option-files." + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  std::string dir_;
};

TEST_F(OptionFileTest, NodeFilesAreReadForNodefileAndForANodelistWithASlash) {
  const std::string f = Write("nodes", "gpu[01-02]\ngpu07, gpu09\n");
  SubmitOptions o;
  ASSERT_TRUE(ParseAs(OptionSet::kBatch, {"-F", f, "x.sh"}, &o).ok());
  EXPECT_EQ(*o.nodelist, (std::vector<std::string>{"gpu01", "gpu02", "gpu07", "gpu09"}));
  SubmitOptions w;
  ASSERT_TRUE(ParseAs(OptionSet::kBatch, {"-w", f, "x.sh"}, &w).ok());
  EXPECT_EQ(w.nodelist->size(), 4u);
  SubmitOptions x;
  Status s = ParseAs(OptionSet::kBatch, {"--nodefile=" + dir_ + "/missing", "x.sh"}, &x);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("missing"), std::string::npos);
  EXPECT_FALSE(ParseAs(OptionSet::kBatch, {"-F", Write("empty", ""), "x.sh"}, &x).ok());
  EXPECT_FALSE(
      ParseAs(OptionSet::kBatch, {"-F", Write("big", std::string(2 << 20, 'a')), "x.sh"}, &x).ok())
      << "a file past 1 MiB is refused, not read whole";
}

TEST_F(OptionFileTest, AnExportFileAddsItsDefinitionsOnTopOfExport) {
  const std::string f = Write("env", std::string("A=from file\0MULTI=line1\nline2\0", 30));
  SubmitOptions o;
  ASSERT_TRUE(ParseAs(OptionSet::kBatch, {"--export=NONE", "--export-file=" + f, "x.sh"}, &o).ok());
  SubmitContext ctx;
  ctx.script = "#!/bin/sh\n";
  ctx.environment = {"A=caller", "B=caller"};
  auto spec = BuildJobSpec(o, ctx);
  ASSERT_TRUE(spec.ok());
  ASSERT_EQ(spec->environment_size(), 2);
  EXPECT_EQ(spec->environment(0), "A=from file");
  EXPECT_EQ(spec->environment(1), "MULTI=line1\nline2");
  SubmitOptions bad;
  Status s = ParseAs(OptionSet::kBatch, {"--export-file=" + Write("bad", "=x"), "x.sh"}, &bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not NAME=value"), std::string::npos) << s.message();
}

TEST(SlurmOptionsTest, MemoryPerCpuMinCpusOpenModeInputAndPriorityReachTheSpec) {
  SubmitOptions o;
  ASSERT_TRUE(ParseSubmitArgs({"--mem=4G", "--mem-per-cpu=2G", "--mincpus=8", "--open-mode=append",
                               "-i", "in-%j.txt", "--priority=TOP", "x.sh"},
                              "command line", &o)
                  .ok());
  EXPECT_FALSE(o.mem_mb) << "the last memory option wins, as in Slurm";
  SubmitContext ctx;
  ctx.script = "#!/bin/sh\n";
  auto spec = BuildJobSpec(o, ctx);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->mem_per_cpu_mb(), 2048u);
  EXPECT_EQ(spec->mem_per_node_mb(), 0u);
  EXPECT_EQ(spec->min_cpus_per_node(), 8u);
  EXPECT_TRUE(spec->open_mode_append());
  EXPECT_EQ(spec->stdin_pattern(), "in-%j.txt");
  EXPECT_EQ(o.priority.value_or(0), 0xFFFFFFFFLL);
  EXPECT_EQ(ParseSubmitArgs({"--open-mode=sometimes", "x.sh"}, "command line", &o).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseSubmitArgs({"--priority=-1", "x.sh"}, "command line", &o).code(),
            StatusCode::kInvalidArgument);
  // srun's --open-mode is for its step's own files; salloc has none.
  SubmitOptions r;
  ASSERT_TRUE(
      ParseSubmitArgs({"--open-mode=append", "true"}, "command line", &r, OptionSet::kRun).ok());
  EXPECT_TRUE(r.open_mode_append.value_or(false));
  EXPECT_EQ(
      ParseSubmitArgs({"--open-mode=append", "sh"}, "command line", &r, OptionSet::kAlloc).code(),
      StatusCode::kInvalidArgument);
  // An allocation's priority, for srun and salloc as for sbatch.
  SubmitOptions ap;
  ASSERT_TRUE(
      ParseSubmitArgs({"--priority=5", "true"}, "command line", &ap, OptionSet::kAlloc).ok());
  EXPECT_EQ(ap.priority.value_or(0), 5);
  ASSERT_TRUE(
      ParseSubmitArgs({"--priority=top", "true"}, "command line", &ap, OptionSet::kRun).ok());
  EXPECT_EQ(ap.priority.value_or(0), 0xFFFFFFFFLL);
  r = SubmitOptions();
  // srun's -i is its tasks' input, not a batch script's.
  ASSERT_TRUE(ParseSubmitArgs({"-i", "all", "true"}, "command line", &r, OptionSet::kRun).ok());
  ctx.interactive = true;
  EXPECT_TRUE(BuildJobSpec(r, ctx)->stdin_pattern().empty());
}

// srun's step options: -W SECONDS, --prolog/--epilog (none: nothing), --quit-on-interrupt,
// --test-only. They are srun's: sbatch and salloc do not know them (but sbatch's --test-only).
TEST(SlurmOptionsTest, SrunsWaitPrologEpilogQuitOnInterruptAndTestOnly) {
  SubmitOptions o;
  ASSERT_TRUE(ParseAs(OptionSet::kRun,
                      {"--wait=30", "--prolog=/usr/local/bin/pre", "--epilog", "/bin/post",
                       "--quit-on-interrupt", "--test-only", "hostname", "-W"},
                      &o)
                  .ok());
  EXPECT_EQ(o.step_wait_s, 30u);
  EXPECT_EQ(o.prolog, "/usr/local/bin/pre");
  EXPECT_EQ(o.epilog, "/bin/post");
  EXPECT_TRUE(o.quit_on_interrupt);
  EXPECT_TRUE(o.test_only);
  EXPECT_EQ(o.positional, (std::vector<std::string>{"hostname", "-W"}));
  ASSERT_TRUE(ParseAs(OptionSet::kRun, {"-W0", "--prolog=none", "--epilog=none", "true"}, &o).ok());
  EXPECT_EQ(o.step_wait_s, 0u) << "0: no limit";
  EXPECT_EQ(o.prolog, "") << "none: no prolog";
  EXPECT_EQ(o.epilog, "");
  EXPECT_EQ(ParseAs(OptionSet::kRun, {"--wait=soon", "true"}, &o).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseAs(OptionSet::kRun, {"-W"}, &o).code(), StatusCode::kInvalidArgument)
      << "srun's -W needs its seconds";
  EXPECT_EQ(ParseAs(OptionSet::kRun, {"--prolog=", "true"}, &o).code(),
            StatusCode::kInvalidArgument);
  for (const char* opt : {"--prolog=/bin/true", "--epilog=/bin/true", "--quit-on-interrupt"}) {
    SubmitOptions b;
    EXPECT_EQ(ParseAs(OptionSet::kBatch, {opt, "x.sh"}, &b).code(), StatusCode::kInvalidArgument)
        << opt;
    EXPECT_EQ(ParseAs(OptionSet::kAlloc, {opt, "sh"}, &b).code(), StatusCode::kInvalidArgument)
        << opt;
  }
  SubmitOptions a;
  EXPECT_EQ(ParseAs(OptionSet::kAlloc, {"--test-only", "sh"}, &a).code(),
            StatusCode::kInvalidArgument)
      << "salloc has no --test-only";
  EXPECT_EQ(ParseAs(OptionSet::kAlloc, {"-W", "5", "sh"}, &a).code(), StatusCode::kInvalidArgument)
      << "nor -W";
  // sbatch's --wait still takes no value: what follows is the script.
  SubmitOptions b;
  ASSERT_TRUE(ParseAs(OptionSet::kBatch, {"--wait", "x.sh"}, &b).ok());
  EXPECT_TRUE(b.wait);
  EXPECT_EQ(b.positional, std::vector<std::string>{"x.sh"});
}

TEST(SlurmOptionsTest, UidAndGidNameTheUserAndGroupTheJobRunsAs) {
  SubmitOptions o;
  ASSERT_TRUE(ParseSubmitArgs({"--uid=root", "x.sh"}, "command line", &o).ok());
  EXPECT_EQ(o.run_as_uid.value_or(1), 0u);
  EXPECT_EQ(o.run_as_user, "root");
  EXPECT_EQ(o.run_as_gid.value_or(1), 0u) << "the user's own group";
  SubmitOptions g;
  ASSERT_TRUE(ParseSubmitArgs({"--gid=65534", "--uid=0", "x.sh"}, "command line", &g).ok());
  EXPECT_EQ(g.run_as_gid.value_or(0), 65534u) << "an explicit --gid wins, in either order";
  SubmitContext ctx;
  ctx.script = "#!/bin/sh\n";
  auto spec = BuildJobSpec(g, ctx);
  EXPECT_EQ(spec->user(), "root");
  EXPECT_EQ(spec->gid(), 65534u);
  EXPECT_EQ(ParseSubmitArgs({"--uid=no-such-user-here", "x.sh"}, "command line", &o).code(),
            StatusCode::kInvalidArgument);
}

v1::JobSpec SpecOf(const std::vector<std::string>& args) {
  SubmitOptions o;
  Status s = ParseSubmitArgs(args, "command line", &o);
  EXPECT_TRUE(s.ok()) << s.ToString();
  SubmitContext ctx;
  ctx.script = "#!/bin/sh\n";
  auto spec = BuildJobSpec(o, ctx);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return spec.ok() ? *spec : v1::JobSpec();
}

Status SpecError(const std::vector<std::string>& args) {
  SubmitOptions o;
  if (Status s = ParseSubmitArgs(args, "command line", &o); !s.ok()) return s;
  SubmitContext ctx;
  ctx.script = "#!/bin/sh\n";
  return BuildJobSpec(o, ctx).status();
}

// Slurm's two ways: the tasks from the GPUs asked for, or the GPUs from the tasks.
TEST(SlurmOptionsTest, NtasksPerGpuGivesTasksForGpusOrGpusForTasks) {
  EXPECT_EQ(SpecOf({"--ntasks-per-gpu=2", "--gpus=3", "x.sh"}).ntasks(), 6u);
  EXPECT_EQ(SpecOf({"--ntasks-per-gpu=2", "-N2", "--gpus-per-node=4", "x.sh"}).ntasks(), 16u);
  const v1::JobSpec from_tasks = SpecOf({"--ntasks-per-gpu=4", "-n", "10", "x.sh"});
  EXPECT_EQ(from_tasks.gpus_total(), 3u) << "10 tasks, 4 to a GPU: 3 GPUs";
  EXPECT_EQ(from_tasks.ntasks(), 10u);
  EXPECT_EQ(SpecError({"--ntasks-per-gpu=2", "x.sh"}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SpecError({"--ntasks-per-gpu=2", "--gpus-per-task=1", "-n2", "x.sh"}).code(),
            StatusCode::kInvalidArgument);
}

TEST(SlurmOptionsTest, CpusPerGpuSizesTasksOrNodesByTheirGpus) {
  const v1::JobSpec per_task = SpecOf({"--cpus-per-gpu=3", "--gpus-per-task=2", "-n4", "x.sh"});
  EXPECT_EQ(per_task.cpus_per_task(), 6u);
  EXPECT_EQ(SpecOf({"--cpus-per-gpu=4", "--gres=gpu:2", "x.sh"}).min_cpus_per_node(), 8u);
  EXPECT_EQ(SpecOf({"--cpus-per-gpu=2", "-N2", "--gpus=8", "x.sh"}).min_cpus_per_node(), 8u);
  EXPECT_EQ(
      SpecOf({"--cpus-per-gpu=2", "--mincpus=20", "--gpus-per-node=2", "x.sh"}).min_cpus_per_node(),
      20u)
      << "--mincpus above it wins";
  EXPECT_EQ(SpecError({"--cpus-per-gpu=2", "x.sh"}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SpecError({"--cpus-per-gpu=2", "-c2", "--gpus-per-node=1", "x.sh"}).code(),
            StatusCode::kInvalidArgument);
}

TEST(SlurmOptionsTest, RelativeIsSrunsOwn) {
  SubmitOptions o;
  ASSERT_TRUE(ParseSubmitArgs({"-r", "0", "true"}, "command line", &o, OptionSet::kRun).ok());
  EXPECT_EQ(o.relative.value_or(9), 0u);
  ASSERT_TRUE(ParseSubmitArgs({"--relative=2", "true"}, "command line", &o, OptionSet::kRun).ok());
  EXPECT_EQ(o.relative.value_or(9), 2u);
  SubmitOptions b;
  EXPECT_EQ(ParseSubmitArgs({"-r", "1", "x.sh"}, "command line", &b).code(),
            StatusCode::kInvalidArgument)
      << "sbatch has no -r";
}

// The CPU shape: -B and its three levels, tasks per core and per socket, --hint; what each puts
// in the spec, and what Slurm refuses.
TEST(SlurmOptionsTest, NodeShapeOptionsReachTheSpec) {
  SubmitContext ctx;
  ctx.script = "#!/bin/sh\n";
  for (OptionSet set : {OptionSet::kBatch, OptionSet::kRun, OptionSet::kAlloc}) {
    SubmitOptions o;
    ASSERT_TRUE(ParseAs(set, {"-B", "2:*:1-2", "--cores-per-socket=8", "x"}, &o).ok());
    auto spec = BuildJobSpec(o, ctx);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    EXPECT_EQ(spec->cpu_shape().sockets_per_node(), 2u);
    EXPECT_EQ(spec->cpu_shape().cores_per_socket(), 8u) << "the later option wins";
    EXPECT_EQ(spec->cpu_shape().threads_per_core(), 1u) << "a range counts by its minimum";
    SubmitOptions t;
    ASSERT_TRUE(ParseAs(set,
                        {"--extra-node-info=4", "--sockets-per-node=2", "--threads-per-core=2",
                         "--ntasks-per-core=1", "--ntasks-per-socket=3", "x"},
                        &t)
                    .ok());
    spec = BuildJobSpec(t, ctx);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    EXPECT_EQ(spec->cpu_shape().sockets_per_node(), 2u);
    EXPECT_EQ(spec->cpu_shape().cores_per_socket(), 0u);
    EXPECT_EQ(spec->cpu_shape().threads_per_core(), 2u);
    EXPECT_EQ(spec->cpu_shape().ntasks_per_core(), 1u);
    EXPECT_EQ(spec->cpu_shape().ntasks_per_socket(), 3u);
    EXPECT_EQ(spec->cpu_shape().hint(), "");
  }
  SubmitOptions plain;
  ASSERT_TRUE(ParseAs(OptionSet::kBatch, {"x.sh"}, &plain).ok());
  EXPECT_FALSE(BuildJobSpec(plain, ctx)->has_cpu_shape()) << "nothing asked, nothing sent";
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"-B", "2:8:2:1"},
                                              {"-B", "x"},
                                              {"-B", "0"},
                                              {"-B", "4-2"},
                                              {"--sockets-per-node=*"},
                                              {"--ntasks-per-core=0"},
                                              {"--threads-per-core=70000"},
                                              {"--hint=fast"}}) {
    SubmitOptions o;
    std::vector<std::string> args = bad;
    args.push_back("x.sh");
    Status s = ParseAs(OptionSet::kBatch, args, &o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad[0] << " " << s.message();
  }
}

// -S/--core-spec, --thread-spec (sbatch, salloc, srun, #SBATCH lines): cores (threads) set
// aside on each node, whole nodes held; bad counts, and both at once, refused saying so.
TEST(SlurmOptionsTest, CoreSpecAndThreadSpecSetCoresAsideOnWholeNodes) {
  SubmitContext ctx;
  ctx.script = "#!/bin/sh\ntrue\n";
  auto directives = ParseDirectives("#!/bin/sh\n#SBATCH -S 2\ntrue\n");
  ASSERT_TRUE(directives.ok());
  SubmitOptions batch;
  ASSERT_TRUE(ParseSubmitArgs((*directives)[0].args, "script line 2", &batch).ok());
  EXPECT_EQ(batch.core_spec.value_or(99), 2u);
  auto spec = BuildJobSpec(batch, ctx);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->core_spec(), 2u);
  EXPECT_EQ(spec->thread_spec(), 0u);
  EXPECT_TRUE(spec->exclusive()) << "as Slurm's: an explicit core count implies --exclusive";

  SubmitOptions zero;  // none set aside, the node still whole
  ASSERT_TRUE(ParseAs(OptionSet::kAlloc, {"--core-spec=0", "bash"}, &zero).ok());
  ctx.interactive = true;
  spec = BuildJobSpec(zero, ctx);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->core_spec(), 0u);
  EXPECT_TRUE(spec->exclusive());

  SubmitOptions threads;
  ASSERT_TRUE(ParseAs(OptionSet::kRun, {"--thread-spec=3", "hostname"}, &threads).ok());
  EXPECT_EQ(threads.thread_spec.value_or(0), 3u);
  EXPECT_EQ(threads.positional, std::vector<std::string>{"hostname"});
  spec = BuildJobSpec(threads, ctx);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->thread_spec(), 3u);
  EXPECT_TRUE(spec->exclusive());
  SubmitOptions none;  // neither: nothing set aside, nodes shared as usual
  spec = BuildJobSpec(none, ctx);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->core_spec() + spec->thread_spec(), 0u);
  EXPECT_FALSE(spec->exclusive());

  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--core-spec=-1"},
                                              {"-S", "two"},
                                              {"--core-spec=65536"},
                                              {"--thread-spec=0"},
                                              {"--thread-spec=-2"},
                                              {"--thread-spec="}}) {
    SubmitOptions o;
    Status s = ParseAs(OptionSet::kBatch, bad, &o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad[0];
    EXPECT_NE(s.message().find("invalid value for --"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("per node"), std::string::npos) << s.message();
  }
  SubmitOptions missing;
  EXPECT_EQ(ParseAs(OptionSet::kBatch, {"-S"}, &missing).code(), StatusCode::kInvalidArgument);

  SubmitOptions both;
  ASSERT_TRUE(ParseAs(OptionSet::kBatch, {"-S", "1", "--thread-spec=2", "x.sh"}, &both).ok());
  auto refused = BuildJobSpec(both, ctx);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(
      refused.status().message().find("--core-spec and --thread-spec cannot be used together"),
      std::string::npos)
      << refused.status().message();
}

TEST(SlurmOptionsTest, HintExcludesTheOptionsItSetsAndHelpListsTheHints) {
  SubmitContext ctx;
  ctx.script = "#!/bin/sh\n";
  SubmitOptions o;
  ASSERT_TRUE(ParseAs(OptionSet::kBatch, {"--hint=NoMultiThread", "x.sh"}, &o).ok());
  auto spec = BuildJobSpec(o, ctx);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->cpu_shape().hint(), "nomultithread");
  EXPECT_EQ(spec->cpu_shape().ntasks_per_core(), 0u) << "the controller turns the hint into one";
  // As Slurm: --hint with -B, --threads-per-core or --ntasks-per-core is an error, whichever
  // comes first; with --sockets-per-node or --ntasks-per-socket it is not.
  for (const char* other : {"-B2", "--threads-per-core=1", "--ntasks-per-core=2"}) {
    for (bool hint_first : {true, false}) {
      SubmitOptions both;
      std::vector<std::string> args = {"--hint=compute_bound", other};
      if (!hint_first) std::swap(args[0], args[1]);
      args.push_back("x.sh");
      ASSERT_TRUE(ParseAs(OptionSet::kBatch, args, &both).ok()) << other;
      auto refused = BuildJobSpec(both, ctx);
      ASSERT_FALSE(refused.ok()) << other;
      EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(refused.status().message().find("--hint cannot be used with"), std::string::npos)
          << refused.status().message();
    }
  }
  SubmitOptions fine;
  ASSERT_TRUE(
      ParseAs(OptionSet::kAlloc,
              {"--hint=memory_bound", "--sockets-per-node=2", "--ntasks-per-socket=1", "sh"}, &fine)
          .ok());
  EXPECT_TRUE(BuildJobSpec(fine, ctx).ok());
  // --hint=help asks for the list, as -h asks for the usage; each front end prints it.
  for (OptionSet set : {OptionSet::kBatch, OptionSet::kRun, OptionSet::kAlloc}) {
    SubmitOptions h;
    ASSERT_TRUE(ParseAs(set, {"--hint=help"}, &h).ok());
    EXPECT_TRUE(h.help && h.hint_help);
  }
  for (const char* hint : {"compute_bound", "memory_bound", "multithread", "nomultithread"}) {
    EXPECT_NE(HintHelp().find(hint), std::string::npos) << hint;
  }
}

}  // namespace
}  // namespace muster::client
