// The `muster` command line: one binary, subcommands. Each command takes argv starting at its
// own name ("submit", "queue", ...) and returns the process exit code: 0 ok, 1 failed, 2 usage.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "muster/client/controller_client.h"
#include "muster/client/submit_options.h"
#include "muster/common/status.h"

namespace muster::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;
// The Slurm version the front ends answer as (the first line of their --version).
inline constexpr const char* kSlurmCompatVersion = "22.05.0";

int Main(int argc, char** argv);

int CmdSubmit(int argc, char** argv);
int CmdQueue(int argc, char** argv);
int CmdCancel(int argc, char** argv);
int CmdJob(int argc, char** argv);
int CmdNodes(int argc, char** argv);
int CmdNode(int argc, char** argv);
// muster node update|reset NODES ... (argv[1] is the action).
int CmdNodeSettings(int argc, char** argv);
// scontrol update NodeName='s Features= (AvailableFeatures=, ActiveFeatures=), Weight= and Gres=
// (keys lower-cased) into `s`; INVALID_ARGUMENT for a bad value.
Status NodeSettingsFromKeys(const std::map<std::string, std::string>& kv, v1::NodeSettings* s);
int CmdRun(int argc, char** argv);
int CmdAlloc(int argc, char** argv);
int CmdAcct(int argc, char** argv);
int CmdControl(int argc, char** argv);
int CmdExplain(int argc, char** argv);
int CmdSinfo(int argc, char** argv);
int CmdInfo(int argc, char** argv);
int CmdDiag(int argc, char** argv);
int CmdLocal(int argc, char** argv);
int CmdTopology(int argc, char** argv);
int CmdCerts(int argc, char** argv);
int CmdAudit(int argc, char** argv);
int CmdAccount(int argc, char** argv);
int CmdQos(int argc, char** argv);
int CmdQuota(int argc, char** argv);
int CmdUser(int argc, char** argv);
int CmdSacctmgr(int argc, char** argv);
int CmdShare(int argc, char** argv);
int CmdSprio(int argc, char** argv);
int CmdReport(int argc, char** argv);
int CmdReservation(int argc, char** argv);
int CmdSreport(int argc, char** argv);
int CmdReconfigure(int argc, char** argv);
int CmdImportSlurmConf(int argc, char** argv);
// Asks the controller to read its config file again; prints what changed unless `quiet`
// (scontrol reconfigure says nothing when it worked). Warnings go to stderr either way.
int Reconfigure(bool quiet);
// scontrol show reservation [NAME] [-o]; scontrol create|update|delete reservation KEY=VALUE...
int ShowReservations(const std::string& name, bool oneliner);
int ReservationCommand(const std::string& verb, const std::vector<std::string>& words);
// muster partition ...; scontrol show partition [NAME] [-o]; scontrol create|update|delete
// partition KEY=VALUE...; the controller's partitions in place of `config`'s (sinfo).
int CmdPartition(int argc, char** argv);
// muster web: a one-time login address for the controller's web view.
int CmdWeb(int argc, char** argv);
int ShowPartitions(const std::string& name, bool oneliner);
int PartitionCommand(const std::string& verb, const std::vector<std::string>& words);
Status UseControllerPartitions(client::ControllerClient& c, Config* config);

// The controller of the cluster named by $MUSTER_CONF (or /etc/muster/muster.toml).
Result<client::ControllerClient> ConnectController();
// The same, for a command given Slurm's -M/--clusters LIST (empty: not given). Muster serves
// one cluster: LIST must name it (config `cluster_name`) or be `all`, else INVALID_ARGUMENT
// saying which cluster this is. Checked here because the name is known only from the config,
// which is read after the options.
Result<client::ControllerClient> ConnectController(const std::string& clusters);
Status CheckClusters(const std::string& clusters, const std::string& cluster_name);
// The cluster's defaults a submission takes from the config (propagate_resource_limits and
// its _except, as Slurm's clients read slurm.conf); left as they are without a readable config.
void ApplyClusterDefaults(client::SubmitContext* ctx);

// "muster submit: <message>" on stderr; returns kExitFailed (or kExitUsage for INVALID_ARGUMENT
// when usage is true).
int Fail(const std::string& cmd, const Status& s);
// "muster submit", or "sbatch" when run under that name (messages and help use it).
std::string ProgramName(const std::string& cmd);
const std::string& FrontEnd();
const std::vector<std::string>& FrontEnds();
int CmdCompat(int argc, char** argv);
int Usage(const std::string& cmd, const std::string& message);

}  // namespace muster::cli
