// The CLI's shared vocabulary: job references, states, signals; and how commands read their
// options (getopt_long, words in order).
#include "output.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <optional>
#include <utility>

#include "cli.h"
#include "muster/common/strings.h"
#include "options.h"
#include "sacct_time.h"
#include "slurm_config.h"

namespace muster::cli {
namespace {

TEST(OutputTest, JobReferencesAsUsersWriteThem) {
  auto refs = ParseJobRefs("7_[1-3,5],9,12_4");
  ASSERT_TRUE(refs.ok()) << refs.status().ToString();
  ASSERT_EQ(refs->size(), 3u);
  EXPECT_EQ((*refs)[0].id, 7u);
  EXPECT_EQ((*refs)[0].tasks, (std::vector<uint32_t>{1, 2, 3, 5}));
  EXPECT_TRUE((*refs)[1].tasks.empty());
  EXPECT_EQ((*refs)[2].tasks, std::vector<uint32_t>{4});
  EXPECT_FALSE(ParseJobRefs("7_[").ok());
  EXPECT_FALSE(ParseJobRefs("abc").ok());

  v1::JobInfo task;
  task.set_id(10);
  task.mutable_array()->set_array_job_id(7);
  task.mutable_array()->set_task_id(3);
  EXPECT_TRUE(RefsMatch(*refs, task));
  task.mutable_array()->set_task_id(4);
  EXPECT_FALSE(RefsMatch(*refs, task));
  EXPECT_TRUE(RefsMatch(*ParseJobRefs("7"), task)) << "an array's id names all its tasks";
}

TEST(OutputTest, SignalsByNameOrNumber) {
  EXPECT_EQ(ParseSignalName("USR1"), SIGUSR1);
  EXPECT_EQ(ParseSignalName("sigterm"), SIGTERM);
  EXPECT_EQ(ParseSignalName("9"), 9);
  EXPECT_EQ(ParseSignalName("65"), 0);
  EXPECT_EQ(ParseSignalName("0"), 0);
  EXPECT_EQ(ParseSignalName("BOGUS"), 0);
}

TEST(OutputTest, StatesRoundTripThroughTheirCodes) {
  for (v1::JobState s : {v1::PENDING, v1::RUNNING, v1::COMPLETED, v1::FAILED, v1::CANCELLED,
                         v1::TIMEOUT, v1::NODE_FAIL}) {
    v1::JobState parsed;
    ASSERT_TRUE(ParseJobState(JobStateCode(s, false), &parsed)) << JobStateCode(s, false);
    EXPECT_EQ(parsed, s);
    ASSERT_TRUE(ParseJobState(JobStateName(s, false), &parsed));
    EXPECT_EQ(parsed, s);
  }
  EXPECT_EQ(JobStateCode(v1::CANCELLED, true), "CG") << "still cleaning up: COMPLETING";
  v1::JobState ignored;
  EXPECT_FALSE(ParseJobState("sleeping", &ignored));
}

// Every state squeue(1) lists under JOB STATE CODES, short and long, in any case.
TEST(OutputTest, StateListsTakeEveryStateSlurmHas) {
  const char* const kSlurm[][2] = {
      {"BF", "BOOT_FAIL"},     {"CA", "CANCELLED"},    {"CD", "COMPLETED"},
      {"CF", "CONFIGURING"},   {"CG", "COMPLETING"},   {"DL", "DEADLINE"},
      {"F", "FAILED"},         {"NF", "NODE_FAIL"},    {"OOM", "OUT_OF_MEMORY"},
      {"PD", "PENDING"},       {"PR", "PREEMPTED"},    {"R", "RUNNING"},
      {"RD", "RESV_DEL_HOLD"}, {"RF", "REQUEUE_FED"},  {"RH", "REQUEUE_HOLD"},
      {"RQ", "REQUEUED"},      {"RS", "RESIZING"},     {"RV", "REVOKED"},
      {"SI", "SIGNALING"},     {"SE", "SPECIAL_EXIT"}, {"SO", "STAGE_OUT"},
      {"ST", "STOPPED"},       {"S", "SUSPENDED"},     {"TO", "TIMEOUT"}};
  for (const auto& [code, name] : kSlurm) {
    EXPECT_TRUE(ParseStateFilter(code).ok()) << code;
    EXPECT_TRUE(ParseStateFilter(name).ok()) << name;
    EXPECT_TRUE(ParseStateFilter(ToLower(name)).ok()) << name;
  }
  EXPECT_EQ(ParseStateFilter("R,sleeping").status().message(), "unknown job state 'sleeping'");

  v1::JobInfo running, cleaning, done;
  running.set_state(v1::RUNNING);
  cleaning.set_state(v1::CANCELLED);
  cleaning.set_completing(true);
  done.set_state(v1::COMPLETED);
  // A workflow library's "active" list: the controller cannot filter COMPLETING, the CLI does.
  auto active = *ParseStateFilter("R,S,CG,RS,SI,SO,ST");
  EXPECT_FALSE(active.ServerSide());
  EXPECT_TRUE(active.Matches(running));
  EXPECT_TRUE(active.Matches(cleaning));
  EXPECT_FALSE(active.Matches(done));
  // As Slurm, a job cleaning up is also in the state it ended in.
  EXPECT_TRUE(ParseStateFilter("CA")->Matches(cleaning));
  EXPECT_TRUE(ParseStateFilter("CD,R")->ServerSide());
  // States no Muster job is ever in match nothing, and are not the default either.
  auto never = *ParseStateFilter("CF,RF,RH,RQ,SE");
  EXPECT_TRUE(never.NeverOnly());
  EXPECT_FALSE(never.Matches(running));
  EXPECT_FALSE(never.Matches(done));
  EXPECT_TRUE(ParseStateFilter("all")->Matches(done));
  // squeue without -t (with -j too, as Slurm's): pending, running, suspended, completing only.
  v1::JobInfo pending, suspended;
  pending.set_state(v1::PENDING);
  suspended.set_state(v1::SUSPENDED);
  EXPECT_TRUE(InSqueueDefaultStates(pending));
  EXPECT_TRUE(InSqueueDefaultStates(running));
  EXPECT_TRUE(InSqueueDefaultStates(suspended));
  EXPECT_TRUE(InSqueueDefaultStates(cleaning));
  EXPECT_FALSE(InSqueueDefaultStates(done));
}

TEST(OutputTest, ElapsedTime) {
  v1::JobInfo j;
  j.set_state(v1::PENDING);
  EXPECT_EQ(ElapsedMs(j, 5000), 0);
  j.set_state(v1::COMPLETED);
  j.set_start_time_ms(1000);
  j.set_end_time_ms(4000);
  EXPECT_EQ(ElapsedMs(j, 99'000), 3000) << "a finished job's run ends at its end";
  j.set_state(v1::RUNNING);
  EXPECT_EQ(ElapsedMs(j, 9000), 8000);
}

struct Ran {
  int rc;
  std::string out, err;
};

// A command as `muster ARGS...` runs it (argv from the command's name on). MUSTER_CONF names no
// file, so a command that gets past its options fails to connect: exit 1.
Ran RunCmd(int (*cmd)(int, char**), std::vector<std::string> args) {
  ::setenv("MUSTER_CONF", "/nonexistent/muster.toml", 1);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const int rc = cmd(static_cast<int>(args.size()), argv.data());
  std::string out = testing::internal::GetCapturedStdout();
  return {rc, out, testing::internal::GetCapturedStderr()};
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CommandOptionsTest, UnknownOptionsNamedWhole) {
  Ran r = RunCmd(CmdExplain, {"explain", "5", "-x"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_TRUE(Has(r.err, "muster explain: unknown option '-x'")) << r.err;
  r = RunCmd(CmdExplain, {"explain", "-xj", "5"});
  EXPECT_TRUE(Has(r.err, "unknown option '-xj'")) << "the whole word, not the letter: " << r.err;
  r = RunCmd(CmdExplain, {"explain", "--json=yes", "5"});
  EXPECT_TRUE(Has(r.err, "unknown option '--json=yes'")) << r.err;
  r = RunCmd(CmdExplain, {"explain", "--", "5"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_TRUE(Has(r.err, "unknown option '--'")) << "-- was never an end of options: " << r.err;
  r = RunCmd(CmdExplain, {"explain", "-"});
  EXPECT_TRUE(Has(r.err, "unknown option '-'")) << r.err;
  r = RunCmd(CmdJob, {"job", "show", "5", "-z"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_TRUE(Has(r.err, "muster job: unknown option '-z'")) << r.err;
  r = RunCmd(CmdNode, {"node", "drain", "n1", "--why=fans"});
  EXPECT_TRUE(Has(r.err, "unknown option '--why=fans'")) << r.err;
  r = RunCmd(CmdSreport, {"sreport", "-q", "cluster", "AccountUtilizationByUser"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_TRUE(Has(r.err, "unknown option '-q'")) << r.err;
  r = RunCmd(CmdSacctmgr, {"sacctmgr", "show", "account", "--bogus"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_TRUE(Has(r.err, "unknown option --bogus")) << r.err;
  // quota and nodes take no words at all.
  r = RunCmd(CmdQuota, {"quota", "foo", "--help"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_TRUE(Has(r.err, "unknown argument 'foo'")) << "the first bad word wins: " << r.err;
  r = RunCmd(CmdNodes, {"nodes", "--json", "--all"});
  EXPECT_TRUE(Has(r.err, "unknown argument '--all'")) << r.err;
}

TEST(CommandOptionsTest, MissingValuesAreUnknownOptions) {
  Ran r = RunCmd(CmdNode, {"node", "drain", "n1", "--reason"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_TRUE(Has(r.err, "unknown option '--reason'")) << r.err;
  r = RunCmd(CmdSreport, {"sreport", "cluster", "AccountUtilizationByUser", "-t"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_TRUE(Has(r.err, "unknown option '-t'")) << r.err;
  r = RunCmd(CmdSreport, {"sreport", "--tres"});
  EXPECT_TRUE(Has(r.err, "unknown option '--tres'")) << r.err;
}

TEST(CommandOptionsTest, ValuesGluedOrSeparate) {
  // A reason either way gets node drain past its checks (to the missing controller).
  EXPECT_EQ(RunCmd(CmdNode, {"node", "drain", "n1", "--reason=fans"}).rc, kExitFailed);
  EXPECT_EQ(RunCmd(CmdNode, {"node", "drain", "n1", "--reason", "fans"}).rc, kExitFailed);
  EXPECT_EQ(RunCmd(CmdNode, {"node", "drain", "--reason", "-fans-", "n1"}).rc, kExitFailed)
      << "the word after --reason is its text, dash or not";
  Ran r = RunCmd(CmdNode, {"node", "drain", "n1", "--reason="});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_TRUE(Has(r.err, "a reason is required")) << r.err;
  // node reboot: its options past their checks (to the missing controller), and only its own.
  EXPECT_EQ(RunCmd(CmdNode,
                   {"node", "reboot", "n1", "--asap", "--next-state=RESUME", "--reason", "kernel"})
                .rc,
            kExitFailed);
  r = RunCmd(CmdNode, {"node", "reboot", "n1", "--next-state", "sideways"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_TRUE(Has(r.err, "--next-state takes resume or down")) << r.err;
  r = RunCmd(CmdNode, {"node", "drain", "n1", "--asap", "--reason=x"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_TRUE(Has(r.err, "unknown option '--asap'")) << r.err;
  r = RunCmd(CmdNode, {"node", "cancel-reboot"});
  EXPECT_EQ(r.rc, kExitUsage);
  // sreport -t: read either way, then refused for want of a report.
  for (std::vector<std::string> args : {std::vector<std::string>{"sreport", "-t", "hours"},
                                        {"sreport", "--time-format", "hours"},
                                        {"sreport", "--time-format=hours"}}) {
    r = RunCmd(CmdSreport, args);
    EXPECT_EQ(r.rc, kExitFailed) << args.back();
    EXPECT_TRUE(Has(r.err, "expected a report")) << r.err;
  }
  r = RunCmd(CmdSreport, {"sreport", "--time-format=weeks"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_TRUE(Has(r.err, "-t weeks is not supported")) << r.err;
  r = RunCmd(CmdSreport, {"sreport", "--tres=gres/gpu,mem"});
  EXPECT_TRUE(Has(r.err, "TRES mem is not supported")) << r.err;
  r = RunCmd(CmdSreport, {"sreport", "-T", ""});
  EXPECT_TRUE(Has(r.err, "-T needs cpu or gres/gpu")) << r.err;
}

TEST(CommandOptionsTest, WordsInOrderOptionsAnywhere) {
  Ran r = RunCmd(CmdExplain, {"explain", "5", "6", "--help"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_TRUE(Has(r.err, "expected one job id")) << "a second id is refused before --help";
  r = RunCmd(CmdExplain, {"explain", "5", "--help"});
  EXPECT_EQ(r.rc, kExitOk);
  EXPECT_TRUE(Has(r.out, "Usage: muster explain JOB [--json]")) << r.out;
  EXPECT_EQ(RunCmd(CmdJob, {"job", "show", "5", "--json"}).rc, kExitFailed);
  EXPECT_EQ(RunCmd(CmdJob, {"job", "show", "--json", "5"}).rc, kExitFailed);
  r = RunCmd(CmdSacctmgr, {"sacctmgr", "show", "-n", "bogus", "-P"});
  EXPECT_EQ(r.rc, kExitFailed);
  EXPECT_TRUE(Has(r.err, "show bogus is not supported")) << r.err;
  r = RunCmd(CmdSacctmgr, {"sacctmgr", "-i"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_TRUE(Has(r.err, "expected a command and an entity")) << r.err;
}

// scontrol's and qos's words: their few options anywhere; any other dash word stays a word.
TEST(CommandOptionsTest, WordGrammarsKeepOtherDashWords) {
  Ran r = RunCmd(CmdControl, {"control", "-d", "show", "hostlist", "-o", "b,a"});
  EXPECT_EQ(r.rc, kExitOk) << r.err;
  EXPECT_EQ(r.out, "b,a\n");
  r = RunCmd(CmdControl, {"control", "--details", "show", "hostnames", "n[1-2]", "--oneliner"});
  EXPECT_EQ(r.out, "n1\nn2\n");
  r = RunCmd(CmdControl, {"control", "-v", "show"});  // scontrol's -v: taken, the command runs
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_TRUE(Has(r.err, "show what?")) << r.err;
  r = RunCmd(CmdControl, {"control", "--bogus", "show"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_TRUE(Has(r.err, "unknown option --bogus")) << r.err;
  r = RunCmd(CmdControl, {"control", "-o", "--help"});
  EXPECT_EQ(r.rc, kExitOk) << "--help in the command's place";
  EXPECT_TRUE(Has(r.out, "Usage: muster control COMMAND")) << r.out;
  r = RunCmd(CmdControl, {"control", "show", "--help"});
  EXPECT_EQ(r.rc, kExitFailed) << "... and only there";
  r = RunCmd(CmdQos, {"qos", "add", "x", "-z"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_TRUE(Has(r.err, "expected one QoS name")) << "-z is a second name: " << r.err;
  r = RunCmd(CmdQos, {"qos", "add", "x", "--mode=fast", "-P"});
  EXPECT_EQ(r.rc, kExitFailed);
  EXPECT_TRUE(Has(r.err, "'--mode' is not supported for a QoS")) << r.err;
  r = RunCmd(CmdQos, {"qos", "list", "--parsable", "x=1"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_TRUE(Has(r.err, "list takes QoS names only")) << r.err;
}

// argv for `args`, as main gets it: the pointers into args, then nullptr.
std::vector<char*> Argv(std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return argv;
}

using Reads = std::vector<std::pair<int, std::string>>;

// What an OptionReader over `args` (args[0] the command) gives back, with the word of each.
Reads ReadAll(std::vector<std::string> args, const char* shorts, const struct option* longs) {
  std::vector<char*> argv = Argv(args);
  OptionReader in(static_cast<int>(args.size()), argv.data(), shorts, longs);
  Reads got;
  for (int c; (c = in.Next()) != -1;) got.emplace_back(c, in.Word());
  return got;
}

constexpr struct option kLongs[] = {{"all", no_argument, nullptr, 'a'},
                                    {"name", required_argument, nullptr, 'n'},
                                    {nullptr, 0, nullptr, 0}};
constexpr int kWord = OptionReader::kWord;

TEST(OptionReaderTest, WordsComeInOrderAndEachReadNamesItsWholeWord) {
  EXPECT_EQ(ReadAll({"cmd", "x", "-a", "y", "--name=z", "-n", "v", "--al", "w"}, "an:", kLongs),
            (Reads{{kWord, "x"},
                   {'a', "-a"},
                   {kWord, "y"},
                   {'n', "--name=z"},
                   {'n', "-n"},
                   {'a', "--al"},
                   {kWord, "w"}}));
  EXPECT_TRUE(ReadAll({"cmd"}, "a", kLongs).empty());
  // A cluster comes back once per letter, each time as the whole word.
  EXPECT_EQ(ReadAll({"cmd", "-ax", "-na"}, "an:", kLongs),
            (Reads{{'a', "-ax"}, {'?', "-ax"}, {'n', "-na"}}));
  EXPECT_EQ(ReadAll({"cmd", "--all=1", "--bogus", "x", "--name"}, "an:", kLongs),
            (Reads{{'?', "--all=1"}, {'?', "--bogus"}, {kWord, "x"}, {':', "--name"}}));
  EXPECT_EQ(ReadAll({"cmd", "-n"}, "an:", kLongs), (Reads{{':', "-n"}}));
}

TEST(OptionReaderTest, DashWordsThatAreNoOptionAndWhatFollowsTwoDashes) {
  EXPECT_EQ(ReadAll({"cmd", "-", "x"}, "a", kLongs), (Reads{{'?', "-"}, {kWord, "x"}}));
  // getopt stops at "--": it and the words after it come back one by one, as they look.
  EXPECT_EQ(ReadAll({"cmd", "-a", "--", "-a", "x", "--"}, "a", kLongs),
            (Reads{{'a', "-a"}, {'?', "--"}, {'?', "-a"}, {kWord, "x"}, {'?', "--"}}));
  EXPECT_EQ(ReadAll({"cmd", "--"}, "a", kLongs), (Reads{{'?', "--"}}));
  EXPECT_EQ(ReadAll({"cmd", "--name", "--", "x"}, "an:", kLongs),
            (Reads{{'n', "--name"}, {kWord, "x"}}))
      << "a value is the next word, whatever it is";
}

TEST(OptionReaderTest, OnceKeepsAWordOnceAndEachReaderStartsAfresh) {
  std::vector<std::string> args = {"cmd", "-xay", "w", "-", "--", "-xy", "w"};
  std::vector<char*> argv = Argv(args);
  OptionReader in(static_cast<int>(args.size()), argv.data(), "a", kLongs);
  std::vector<std::string> kept;
  for (int c; (c = in.Next()) != -1;) {
    if (c != 'a' && in.Once()) kept.push_back(in.Word());
  }
  EXPECT_EQ(kept, (std::vector<std::string>{"-xay", "w", "-", "--", "-xy", "w"}));

  // A reader left in the middle of a cluster does not leak into the next one.
  std::vector<std::string> first = {"cmd", "-xy"};
  std::vector<char*> first_argv = Argv(first);
  OptionReader left(2, first_argv.data(), "", kLongs);
  EXPECT_EQ(left.Next(), '?');
  EXPECT_EQ(ReadAll({"cmd", "w", "-a"}, "a", kLongs), (Reads{{kWord, "w"}, {'a', "-a"}}));
}

TEST(OptionReaderTest, JsonOptionCommands) {
  std::vector<std::string> seen;
  const std::function<std::optional<int>(const std::string&)> word =
      [&](const std::string& w) -> std::optional<int> {
    if (w == "stop") return 7;
    seen.push_back(w);
    return std::nullopt;
  };
  auto read = [&](std::vector<std::string> args, bool* json, bool words) {
    std::vector<char*> argv = Argv(args);
    return ReadJsonOption("cmd", "bad", static_cast<int>(args.size()), argv.data(), "HELP\n", json,
                          words ? word : nullptr);
  };
  bool json = false;
  EXPECT_EQ(read({"cmd", "a", "--json", "b"}, &json, true), std::nullopt);
  EXPECT_TRUE(json);
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b"}));
  json = false;
  EXPECT_EQ(read({"cmd"}, &json, false), std::nullopt);
  EXPECT_FALSE(json);
  EXPECT_EQ(read({"cmd", "stop", "--help"}, &json, true), 7) << "a word ends it before --help";

  testing::internal::CaptureStdout();
  EXPECT_EQ(read({"cmd", "--js", "-h", "a"}, &json, false), kExitOk);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "HELP\n");
  for (auto [args, named] : {std::pair<std::vector<std::string>, std::string>{{"cmd", "a"}, "a"},
                             {{"cmd", "-hx"}, "-hx"},
                             {{"cmd", "-xh"}, "-xh"},
                             {{"cmd", "-jh"}, "-jh"},
                             {{"cmd", "--jsonx"}, "--jsonx"},
                             {{"cmd", "--"}, "--"}}) {
    testing::internal::CaptureStdout();
    testing::internal::CaptureStderr();
    const std::optional<int> rc = read(args, &json, false);
    const std::string out = testing::internal::GetCapturedStdout();
    const std::string err = testing::internal::GetCapturedStderr();
    if (named == "-hx") {
      EXPECT_EQ(rc, kExitOk) << "help comes before the letter after it";
      EXPECT_EQ(out, "HELP\n");
      continue;
    }
    EXPECT_EQ(rc, kExitUsage) << named;
    EXPECT_TRUE(Has(err, "bad '" + named + "'")) << err;
  }
  testing::internal::CaptureStderr();
  EXPECT_EQ(read({"cmd", "a", "-"}, &json, true), kExitUsage);
  EXPECT_TRUE(Has(testing::internal::GetCapturedStderr(), "bad '-'")) << "not a word, even here";
}

}  // namespace
}  // namespace muster::cli

namespace muster::cli {
namespace {

// scontrol show config: Slurm's "Key = value" lines (keys padded to 23), with Muster's settings
// under Slurm's names, the keys a workflow engine reads at start-up among them.
TEST(SlurmConfigTest, MustersSettingsUnderSlurmsNames) {
  auto c = ParseConfig(R"(
cluster_name = "lab"
private_data = ["jobs"]
[scheduling]
kill_grace_ms = 45000
max_array_size = 5001
[agent]
cgroup_root = "none"
prolog = "/etc/muster/prolog"
[[nodes]]
names = "n1"
cpus = 4
memory_mb = 1000
[[partition]]
name = "p"
nodes = "n1"
)",
                       "t.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::string out = SlurmConfigLines(*c, "/etc/muster/muster.toml", 0);
  EXPECT_EQ(out.rfind("Configuration data as of ", 0), 0u) << out;
  for (const char* want :
       {"ClusterName             = lab\n", "KillWait                = 45 sec\n",
        "MaxArraySize            = 5001\n", "PrivateData             = jobs\n",
        "Prolog                  = /etc/muster/prolog\n", "Epilog                  = (null)\n",
        "ProctrackType           = proctrack/linuxproc\n", "SchedulerTimeSlice      = 30 sec\n",
        "AcctGatherNodeFreq      = 0 sec\n", "SLURM_CONF              = /etc/muster/muster.toml\n",
        "SLURM_VERSION           = 22.05.0\n", "PreemptType             = preempt/none\n",
        "PriorityWeightFairShare = 10000\n", "AccountingStorageEnforce = associations,limits,qos\n",
        "MailProg                = (null)\n"}) {
    EXPECT_NE(out.find(want), std::string::npos) << want << " in\n" << out;
  }
}

// sacct -S/-E: Slurm's time forms; a time of day alone is today's even when later than now
// (sacct looks back), where sbatch --begin would take tomorrow's.
TEST(AcctTimeTest, SacctsTimeForms) {
  auto at = [](int y, int mo, int d, int h, int mi, int s) {
    struct tm t = {};
    t.tm_year = y - 1900;
    t.tm_mon = mo - 1;
    t.tm_mday = d;
    t.tm_hour = h;
    t.tm_min = mi;
    t.tm_sec = s;
    t.tm_isdst = -1;
    return static_cast<int64_t>(std::mktime(&t)) * 1000;
  };
  const int64_t now = at(2024, 7, 3, 10, 0, 0);
  auto parsed = [&](const std::string& v) {
    auto t = ParseAcctTime(v, now);
    EXPECT_TRUE(t.ok()) << v << ": " << t.status().ToString();
    return t.ok() ? *t : -1;
  };
  EXPECT_EQ(parsed("11:20"), at(2024, 7, 3, 11, 20, 0)) << "later today, not tomorrow";
  EXPECT_EQ(parsed("09:15:30"), at(2024, 7, 3, 9, 15, 30));
  EXPECT_EQ(parsed("11:20:05pm"), at(2024, 7, 3, 23, 20, 5));
  EXPECT_EQ(parsed("12:00AM"), at(2024, 7, 3, 0, 0, 0));
  EXPECT_EQ(parsed("0704"), at(2024, 7, 4, 0, 0, 0));
  EXPECT_EQ(parsed("070323"), at(2023, 7, 3, 0, 0, 0));
  EXPECT_EQ(parsed("07.03.23-08:30"), at(2023, 7, 3, 8, 30, 0));
  EXPECT_EQ(parsed("07/04-08:30:15"), at(2024, 7, 4, 8, 30, 15));
  EXPECT_EQ(parsed("07/04/2022"), at(2022, 7, 4, 0, 0, 0));
  EXPECT_EQ(parsed("2014-07-03T11:40"), at(2014, 7, 3, 11, 40, 0));
  EXPECT_EQ(parsed("2014-07-03-11:40:02"), at(2014, 7, 3, 11, 40, 2)) << "as sacct's own example";
  EXPECT_EQ(parsed("2014-07-03"), at(2014, 7, 3, 0, 0, 0));
  EXPECT_EQ(parsed("midnight"), at(2024, 7, 3, 0, 0, 0));
  EXPECT_EQ(parsed("Today"), at(2024, 7, 3, 0, 0, 0));
  EXPECT_EQ(parsed("noon"), at(2024, 7, 3, 12, 0, 0));
  EXPECT_EQ(parsed("fika"), at(2024, 7, 3, 15, 0, 0));
  EXPECT_EQ(parsed("teatime"), at(2024, 7, 3, 16, 0, 0));
  EXPECT_EQ(parsed("now"), now);
  EXPECT_EQ(parsed("now-2hours"), now - 2 * 3'600'000);
  EXPECT_EQ(parsed("now+30"), now + 30'000);
  for (const char* bad : {"13:00pm", "24:00", "10:60", "2014-13-01", "1332", "07/03/x", "7-3",
                          "2014-07-03X11:40", "yesterday", "", "now-2fortnights"}) {
    EXPECT_FALSE(ParseAcctTime(bad, now).ok()) << bad;
  }
}

// sacct's options: each is taken (and then fails to reach the controller here), refused by name
// with a reason, or its bad value is a usage error; all before the config is read.
TEST(AcctOptionsTest, TakenRefusedOrBadValue) {
  for (std::vector<std::string> args :
       {std::vector<std::string>{"-o", "jobid,exit,maxrss%-8,State%12"},
        {"-l"},
        {"-b"},
        {"--format=ALL"},
        {"--units=g"},
        {"--noconvert"},
        {"-g", "0"},
        {"-W", "w"},
        {"-D"},
        {"-L"},
        {"--local"},
        {"--federation"},
        {"--whole-hetjob"},
        {"--whole-hetjob=no"},
        {"-k", "5", "-K", "1:00:00"},
        {"-i", "2-4"},
        {"-I", "8"},
        {"-N", "n[1-2]"},
        {"-A", "a,b"},
        {"--name=x"},
        {"-q", "normal"},
        {"-R", "JobHeldUser"},
        {"-S", "11:20pm"},
        {"-T"},
        {"-u", "0"},
        {"--use-local-uid"},
        {"-v"},
        {"-M", "all"},
        {"--delimiter=,", "-P"},
        {"--yaml"}}) {
    args.insert(args.begin(), "acct");
    Ran r = RunCmd(CmdAcct, args);
    EXPECT_EQ(r.rc, kExitFailed) << args[1] << ": " << r.err;
    EXPECT_TRUE(Has(r.err, "cannot read config file")) << args[1] << ": " << r.err;
  }
  for (const auto& [args, name] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"-c"}, "-c/--completion"},
           {{"--file=x"}, "-f/--file"},
           {{"-C", "a"}, "-C/--constraints"},
           {{"-F", "SchedMain"}, "-F/--flags"},
           {{"--associations=1"}, "-x/--associations"},
           {{"-o", "JobID,Eligible"}, "'Eligible' is not available"},
           {{"-o", "jobid,suspend"}, "'Suspended' is not available"},
           {{"-o", "JobID,NoSuchField"}, "unknown format field 'NoSuchField'"},
           {{"-o", "JobID%-"}, "bad width"},
           {{"-i", "4-2"}, "-i/--nnodes"},
           {{"--units=X"}, "--units"},
           {{"--whole-hetjob=maybe"}, "--whole-hetjob"},
           {{"-N", "n[1-"}, "-N/--nodelist"},
           {{"-k", "soon"}, "-k/--timelimit-min"},
           {{"-E", "13:00pm"}, "-E/--endtime"},
           {{"-g", "no-such-group-here"}, "-g/--gid"}}) {
    std::vector<std::string> argv = {"acct"};
    argv.insert(argv.end(), args.begin(), args.end());
    Ran r = RunCmd(CmdAcct, argv);
    EXPECT_EQ(r.rc, kExitUsage) << name << ": " << r.err;
    EXPECT_TRUE(Has(r.err, name)) << name << ": " << r.err;
    EXPECT_FALSE(Has(r.err, "unknown or unsupported option")) << name << ": " << r.err;
  }
  // -e lists what --format prints (blank usage fields too), not the refused fields.
  Ran e = RunCmd(CmdAcct, {"acct", "-e"});
  EXPECT_EQ(e.rc, kExitOk);
  for (const char* field : {"DerivedExitCode", "MaxRSS", "TRESUsageOutTot", "ReqMem", "Cluster"}) {
    EXPECT_TRUE(Has(e.out, field)) << field << " in\n" << e.out;
  }
  EXPECT_FALSE(Has(e.out, "Eligible")) << e.out;
  EXPECT_EQ(RunCmd(CmdAcct, {"acct", "--usage"}).rc, kExitOk);
  Ran v = RunCmd(CmdAcct, {"acct", "-n", "-V"});
  EXPECT_EQ(v.rc, kExitOk);
  EXPECT_EQ(v.out.rfind("slurm 22.05.0\n", 0), 0u) << v.out;
}

}  // namespace
}  // namespace muster::cli
