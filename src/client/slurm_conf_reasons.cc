#include "slurm_conf_reasons.h"

#include <map>

namespace muster::client {

// Why a setting Muster has no equivalent for is left, where that says more than the fact.
std::string NotCarried(const std::string& k) {
  static const std::map<std::string, const char*> kWhy = {
      {"defmempercpu", "a job without --mem reserves no memory (as Slurm without DefMemPer*)"},
      {"defmempergpu", "a job without --mem reserves no memory (as Slurm without DefMemPer*)"},
      {"defmempernode", "a job without --mem reserves no memory (as Slurm without DefMemPer*)"},
      {"maxmempercpu", "memory is bounded by --mem and the node's memory_mb"},
      {"maxmempernode", "memory is bounded by --mem and the node's memory_mb"},
      {"priorityweighttres",
       "Muster's size factor counts nodes and GPUs; [billing] prices "
       "usage for fair share"},
      {"priorityweightassoc", "no association factor; fair share and QoS weigh accounts"},
      {"jobsubmitplugins", "no submit plugins: limits, QoS and quotas check submissions"},
      {"jobcompcontainer", "no job completion plugins"},
      {"x11parameters", "no X11 forwarding"},
      {"prologflags", "the prolog runs when a job starts on a node, before its tasks"},
      {"healthchecknodestate", "the health check runs on every node, whatever its state"},
      {"suspendprogram", "no power saving"},
      {"resumeprogram", "no power saving"},
      {"suspendtime", "no power saving"},
      {"unkillablesteptimeout", "a step's processes are killed through its cgroup"},
      {"overtimelimit", "jobs end at their time limit (after kill_grace_ms)"},
  };
  auto it = kWhy.find(k);
  return it == kWhy.end() ? "not carried" : std::string("not carried: ") + it->second;
}

// Settings whose job Muster does itself, with how.
const char* NotNeeded(const std::string& k) {
  static const std::map<std::string, const char*> kWhy = {
      {"authtype", "users are known by SO_PEERCRED locally and MUNGE over TCP ([munge])"},
      {"credtype", "step credentials are Muster's own (per-node HMAC keys)"},
      {"cryptotype", "step credentials are Muster's own (per-node HMAC keys)"},
      {"selecttype", "Muster allocates CPUs, memory and GPUs (cons_tres's model) always"},
      {"selecttypeparameters", "Muster allocates cores, memory and GPUs always"},
      {"proctracktype", "musterd tracks job processes with cgroup v2 (agent.cgroup_root)"},
      {"taskplugin", "musterd binds CPUs and GPUs and confines jobs with cgroup v2"},
      {"jobacctgathertype", "musterd accounts jobs through their cgroups"},
      {"jobacctgatherfrequency", "musterd accounts jobs through their cgroups"},
      {"accountingstoragetype", "the controller keeps accounting in its own store (sacct)"},
      {"accountingstoragehost", "the controller keeps accounting in its own store (sacct)"},
      {"accountingstorageport", "the controller keeps accounting in its own store (sacct)"},
      {"accountingstorageenforce",
       "accounts, limits and QoS are enforced whenever [[accounts]] exist"},
      {"accountingstoragetres", "usage counts CPUs, memory and GPUs ([billing])"},
      {"jobcomptype", "finished jobs are kept for sacct (accounting_retention_days)"},
      {"slurmuser", "musterctld runs as the muster user (its systemd unit)"},
      {"slurmduser", "musterd runs as root"},
      {"statesavelocation",
       "controller.state_dir (RocksDB; Slurm's state files are not read: drain and empty the "
       "queue before switching)"},
      {"slurmdspooldir", "agent.spool_dir"},
      {"slurmctldpidfile", "systemd tracks the daemons"},
      {"slurmdpidfile", "systemd tracks the daemons"},
      {"slurmctldlogfile", "controller.log_file (default: the journal)"},
      {"slurmdlogfile", "the journal"},
      {"slurmctlddebug", "controller.log_level"},
      {"slurmddebug", "agent.log_level"},
      {"slurmdport", "musterd's step port is agent.step_address"},
      {"switchtype", "no switch plugin"},
      {"mpidefault", "srun --mpi=pmi2 and PMIx-less MPI work without it"},
      {"returntoservice", "a node that registers again is up unless an admin drained it"},
      {"launchtype", "musterd launches steps itself"},
      {"schedulertimeslice", "no time slicing"},
      {"inactivelimit", "an srun/salloc whose client is gone ends after allocation_grace_ms"},
      {"waittime", "the first task's exit ends a step's other tasks after kill_grace_ms"},
      {"messagetimeout", "Muster's timeouts are its own"},
      {"treewidth", "agents talk to the controller directly"},
      {"fasttaskprocs", "not applicable"},
      {"slurmctldtimeout", "a standby's takeover time is controller.leader_lease_s"},
  };
  auto it = kWhy.find(k);
  return it == kWhy.end() ? nullptr : it->second;
}

}  // namespace muster::client
