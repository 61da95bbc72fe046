#include "muster/client/input_env.h"

#include <gtest/gtest.h>

#include <csignal>
#include <set>

namespace muster::client {
namespace {

// sbatch's order: #SBATCH lines, then the variables, then the command line.
Result<SubmitOptions> Sbatch(const std::string& script, const std::vector<std::string>& env,
                             const std::vector<std::string>& args) {
  SubmitOptions o;
  MUSTER_ASSIGN_OR_RETURN(std::vector<Directive> lines, ParseDirectives(script));
  for (const Directive& d : lines) {
    MUSTER_RETURN_IF_ERROR(ParseSubmitArgs(d.args, "script line " + std::to_string(d.line), &o));
  }
  MUSTER_RETURN_IF_ERROR(ApplyInputEnv("sbatch", env, &o));
  MUSTER_RETURN_IF_ERROR(ParseSubmitArgs(args, "command line", &o));
  return o;
}

TEST(InputEnvTest, ValueVariablesSetTheirOptions) {
  auto o = Sbatch("#!/bin/sh\n",
                  {"SBATCH_PARTITION=debug", "SBATCH_ACCOUNT=physics", "SBATCH_TIMELIMIT=1:30:00",
                   "SBATCH_QOS=high", "SBATCH_GPUS_PER_NODE=h100:4", "SBATCH_EXPORT=NONE",
                   "SBATCH_MEM_PER_NODE=2G", "SBATCH_JOB_NAME=from env", "PATH=/bin"},
                  {});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(*o->partition, "debug");
  EXPECT_EQ(*o->account, "physics");
  EXPECT_EQ(*o->time_limit_ms, 90 * 60'000LL);
  EXPECT_EQ(*o->qos, "high");
  EXPECT_EQ(*o->gpus_per_node, 4u);
  EXPECT_EQ(*o->gpu_type, "h100");
  EXPECT_EQ(*o->export_vars, "NONE");
  EXPECT_EQ(*o->mem_mb, 2048u);
  EXPECT_EQ(*o->job_name, "from env");  // the value is one word, spaces and all
}

// The manual's rule for flags: empty, "yes" or a non-zero number sets one; anything else nothing.
TEST(InputEnvTest, FlagVariablesFollowTheManualsRule) {
  for (const char* on : {"", "yes", "YES", "1", "7"}) {
    auto o = Sbatch("#!/bin/sh\n", {std::string("SBATCH_NO_KILL=") + on}, {});
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    EXPECT_TRUE(o->no_kill) << "SBATCH_NO_KILL='" << on << "'";
  }
  for (const char* off : {"no", "0", "off", "true"}) {
    auto o = Sbatch("#!/bin/sh\n", {std::string("SBATCH_NO_KILL=") + off}, {});
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    EXPECT_FALSE(o->no_kill) << "SBATCH_NO_KILL='" << off << "'";
  }
  auto words = InputEnvOptions(
      "sbatch", {"SBATCH_OVERCOMMIT=yes", "SBATCH_REQUEUE=no", "SBATCH_EXCLUSIVE=user",
                 "SBATCH_GET_USER_ENV=", "SBATCH_DEBUG=1", "SBATCH_WAIT_ALL_NODES=0"});
  ASSERT_TRUE(words.ok()) << words.status().ToString();
  std::vector<std::string> got;
  for (const EnvOption& e : *words) got.push_back(e.variable + " " + e.words.at(0));
  EXPECT_EQ(got, (std::vector<std::string>{
                     "SBATCH_DEBUG --verbose", "SBATCH_EXCLUSIVE --exclusive=user",
                     "SBATCH_GET_USER_ENV --get-user-env", "SBATCH_OVERCOMMIT --overcommit",
                     "SBATCH_WAIT_ALL_NODES --wait-all-nodes=0"}));
}

TEST(InputEnvTest, CommandLineOverridesVariables) {
  auto o = Sbatch("#!/bin/sh\n", {"SBATCH_PARTITION=fromenv", "SBATCH_TIMELIMIT=10"},
                  {"-p", "fromcli", "script.sh"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(*o->partition, "fromcli");
  EXPECT_EQ(*o->time_limit_ms, 10 * 60'000LL);  // not on the command line: the variable's
}

TEST(InputEnvTest, VariablesOverrideSbatchLines) {
  auto o = Sbatch("#!/bin/sh\n#SBATCH -p fromscript -A scriptacct -J scriptname\n",
                  {"SBATCH_PARTITION=fromenv", "SBATCH_JOB_NAME=envname"}, {"-J", "cliname"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(*o->partition, "fromenv");
  EXPECT_EQ(*o->account, "scriptacct");
  EXPECT_EQ(*o->job_name, "cliname");
}

TEST(InputEnvTest, RefusedOptionIsRefusedNamingTheVariable) {
  auto o = Sbatch("#!/bin/sh\n", {"SBATCH_CONTAINER=/images/x"}, {});
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(
      o.status().message().rfind("SBATCH_CONTAINER: option --container is not supported: ", 0), 0u)
      << o.status().message();
  SubmitOptions a;
  Status s = ApplyInputEnv("salloc", {"SALLOC_BURST_BUFFER=capacity=1G"}, &a);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(s.message().rfind("SALLOC_BURST_BUFFER: option --bb is not supported", 0), 0u)
      << s.message();
}

TEST(InputEnvTest, MalformedValuesNameTheVariable) {
  const std::pair<const char*, const char*> cases[] = {
      {"SBATCH_TIMELIMIT=soon", "SBATCH_TIMELIMIT: --time: "},
      {"SBATCH_GPUS_PER_NODE=lots", "SBATCH_GPUS_PER_NODE: "},
      {"SBATCH_DEBUG=2", "SBATCH_DEBUG=2: expected 0 or 1"},
      {"SBATCH_WAIT_ALL_NODES=yes", "SBATCH_WAIT_ALL_NODES=yes: expected 0 or 1"},
      {"SBATCH_WAIT4SWITCH=later", "SBATCH_WAIT4SWITCH: --switches wait: "},
      {"SBATCH_OPEN_MODE=sideways", "SBATCH_OPEN_MODE: --open-mode=sideways"},
  };
  for (const auto& [var, want] : cases) {
    auto o = Sbatch("#!/bin/sh\n", {var}, {});
    ASSERT_FALSE(o.ok()) << var;
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << var;
    EXPECT_EQ(o.status().message().rfind(want, 0), 0u) << o.status().message();
  }
}

// Only the sbatch and salloc front ends read them: muster submit (FrontEnd() ""), muster alloc
// and srun do not, and salloc does not read sbatch's.
TEST(InputEnvTest, OnlySbatchAndSallocReadThem) {
  const std::vector<std::string> env = {"SBATCH_PARTITION=p1", "SALLOC_PARTITION=p2",
                                        "SBATCH_NO_KILL=1", "SALLOC_QOS=q"};
  for (const char* other : {"", "muster submit", "srun"}) {
    SubmitOptions o;
    ASSERT_TRUE(ApplyInputEnv(other, env, &o).ok());
    EXPECT_FALSE(o.partition) << "'" << other << "'";
    EXPECT_FALSE(o.no_kill);
    EXPECT_FALSE(o.qos);
  }
  SubmitOptions b;
  ASSERT_TRUE(ApplyInputEnv("sbatch", env, &b).ok());
  EXPECT_EQ(*b.partition, "p1");
  EXPECT_FALSE(b.qos);
  SubmitOptions a;
  ASSERT_TRUE(ApplyInputEnv("salloc", env, &a).ok());
  EXPECT_EQ(*a.partition, "p2");
  EXPECT_EQ(*a.qos, "q");
  EXPECT_FALSE(a.no_kill);
}

// salloc: SALLOC_IMMEDIATE and SALLOC_KILL_CMD take optional values; a salloc-only flag.
TEST(InputEnvTest, SallocVariables) {
  SubmitOptions a;
  Status s = ApplyInputEnv("salloc",
                           {"SALLOC_IMMEDIATE=30", "SALLOC_KILL_CMD=USR1", "SALLOC_BELL=yes"}, &a);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(*a.immediate_s, 30u);
  EXPECT_EQ(*a.kill_command, SIGUSR1);
  EXPECT_TRUE(a.bell);
  ASSERT_TRUE(ParseSubmitArgs({"--no-bell"}, "command line", &a, OptionSet::kAlloc).ok());
  EXPECT_FALSE(a.bell);
}

// SLURM_CLUSTERS and SLURM_HINT come after the SBATCH_ ones and win, as in Slurm.
TEST(InputEnvTest, SlurmNamesOverrideSbatchNames) {
  auto o = Sbatch("#!/bin/sh\n", {"SBATCH_HINT=compute_bound", "SLURM_HINT=nomultithread"}, {});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(*o->hint, "nomultithread");
}

// The wait joins the count; alone it is the wait of the script's count.
TEST(InputEnvTest, SwitchWaitJoinsTheCount) {
  auto o = Sbatch("#!/bin/sh\n", {"SBATCH_REQ_SWITCH=2", "SBATCH_WAIT4SWITCH=5"}, {});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(*o->max_switches, 2u);
  EXPECT_EQ(*o->switches_wait_ms, 5 * 60'000LL);
  o = Sbatch("#!/bin/sh\n#SBATCH --switches=3\n", {"SBATCH_WAIT4SWITCH=1:00"}, {});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(*o->max_switches, 3u);
  EXPECT_EQ(*o->switches_wait_ms, 60'000LL);
}

// Every variable of both manual pages (their INPUT ENVIRONMENT VARIABLES sections) has an entry,
// each option one this version names: taken, or refused with its reason.
TEST(InputEnvTest, TableHoldsEveryVariableOfTheManualPages) {
  const std::set<std::string> batch_vars = {"SBATCH_ACCOUNT",       "SBATCH_ACCTG_FREQ",
                                            "SBATCH_ARRAY_INX",     "SBATCH_BATCH",
                                            "SBATCH_CLUSTERS",      "SLURM_CLUSTERS",
                                            "SBATCH_CONSTRAINT",    "SBATCH_CONTAINER",
                                            "SBATCH_CORE_SPEC",     "SBATCH_CPUS_PER_GPU",
                                            "SBATCH_DEBUG",         "SBATCH_DELAY_BOOT",
                                            "SBATCH_DISTRIBUTION",  "SBATCH_ERROR",
                                            "SBATCH_EXCLUSIVE",     "SBATCH_EXPORT",
                                            "SBATCH_GET_USER_ENV",  "SBATCH_GPU_BIND",
                                            "SBATCH_GPU_FREQ",      "SBATCH_GPUS",
                                            "SBATCH_GPUS_PER_NODE", "SBATCH_GPUS_PER_TASK",
                                            "SBATCH_GRES",          "SBATCH_GRES_FLAGS",
                                            "SBATCH_HINT",          "SLURM_HINT",
                                            "SBATCH_IGNORE_PBS",    "SBATCH_INPUT",
                                            "SBATCH_JOB_NAME",      "SBATCH_MEM_BIND",
                                            "SBATCH_MEM_PER_CPU",   "SBATCH_MEM_PER_GPU",
                                            "SBATCH_MEM_PER_NODE",  "SBATCH_NETWORK",
                                            "SBATCH_NO_KILL",       "SBATCH_NO_REQUEUE",
                                            "SBATCH_OPEN_MODE",     "SBATCH_OUTPUT",
                                            "SBATCH_OVERCOMMIT",    "SBATCH_PARTITION",
                                            "SBATCH_POWER",         "SBATCH_PROFILE",
                                            "SBATCH_QOS",           "SBATCH_REQ_SWITCH",
                                            "SBATCH_REQUEUE",       "SBATCH_RESERVATION",
                                            "SBATCH_SIGNAL",        "SBATCH_SPREAD_JOB",
                                            "SBATCH_THREAD_SPEC",   "SBATCH_THREADS_PER_CORE",
                                            "SBATCH_TIMELIMIT",     "SBATCH_USE_MIN_NODES",
                                            "SBATCH_WAIT",          "SBATCH_WAIT_ALL_NODES",
                                            "SBATCH_WAIT4SWITCH",   "SBATCH_WCKEY",
                                            "SLURM_CONF",           "SLURM_DEBUG_FLAGS",
                                            "SLURM_EXIT_ERROR",     "SLURM_STEP_KILLED_MSG_NODE_ID",
                                            "SLURM_UMASK"};
  const std::set<std::string> alloc_vars = {
      "SALLOC_ACCOUNT",      "SALLOC_ACCTG_FREQ",    "SALLOC_BELL",
      "SALLOC_BURST_BUFFER", "SALLOC_CLUSTERS",      "SLURM_CLUSTERS",
      "SALLOC_CONSTRAINT",   "SALLOC_CONTAINER",     "SALLOC_CORE_SPEC",
      "SALLOC_CPUS_PER_GPU", "SALLOC_DEBUG",         "SALLOC_DELAY_BOOT",
      "SALLOC_EXCLUSIVE",    "SALLOC_GPU_BIND",      "SALLOC_GPU_FREQ",
      "SALLOC_GPUS",         "SALLOC_GPUS_PER_NODE", "SALLOC_GPUS_PER_TASK",
      "SALLOC_GRES",         "SALLOC_GRES_FLAGS",    "SALLOC_HINT",
      "SLURM_HINT",          "SALLOC_IMMEDIATE",     "SALLOC_KILL_CMD",
      "SALLOC_MEM_BIND",     "SALLOC_MEM_PER_CPU",   "SALLOC_MEM_PER_GPU",
      "SALLOC_MEM_PER_NODE", "SALLOC_NETWORK",       "SALLOC_NO_BELL",
      "SALLOC_NO_KILL",      "SALLOC_OVERCOMMIT",    "SALLOC_PARTITION",
      "SALLOC_POWER",        "SALLOC_PROFILE",       "SALLOC_QOS",
      "SALLOC_REQ_SWITCH",   "SALLOC_RESERVATION",   "SALLOC_SIGNAL",
      "SALLOC_SPREAD_JOB",   "SALLOC_THREAD_SPEC",   "SALLOC_THREADS_PER_CORE",
      "SALLOC_TIMELIMIT",    "SALLOC_USE_MIN_NODES", "SALLOC_WAIT_ALL_NODES",
      "SALLOC_WAIT4SWITCH",  "SALLOC_WCKEY",         "SLURM_CONF",
      "SLURM_DEBUG_FLAGS",   "SLURM_EXIT_ERROR",     "SLURM_EXIT_IMMEDIATE"};
  for (const auto& [set, want] :
       {std::pair{OptionSet::kBatch, batch_vars}, std::pair{OptionSet::kAlloc, alloc_vars}}) {
    std::set<std::string> got;
    for (const InputEnvVar& v : InputEnvVars(set)) {
      EXPECT_TRUE(got.insert(v.name).second) << v.name << " twice";
      if (v.kind == InputEnvKind::kNotOption) {
        EXPECT_STRNE(v.note, "") << v.name;
        continue;
      }
      // The option is one this command knows: taken (bare or with a value) or refused by name,
      // never an "unknown option".
      const std::string opt = std::string("--") + v.option;
      SubmitOptions o;
      Status bare = ParseSubmitArgs({opt}, v.name, &o, set);
      Status valued = ParseSubmitArgs({opt + "=1"}, v.name, &o, set);
      EXPECT_TRUE(bare.message().find("unknown option") == std::string::npos ||
                  valued.message().find("unknown option") == std::string::npos)
          << v.name << ": " << bare.message() << " / " << valued.message();
    }
    EXPECT_EQ(got, want);
  }
}

}  // namespace
}  // namespace muster::client
