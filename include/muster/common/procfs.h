// The one reader of /proc: a process's stat line, the machine's processes, and what follows from
// them (a process group with a live member, a process's descendants, a process's program).
// Thread-safe (reads files only).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace muster {

// What /proc/PID/stat says of a process (the fields after "(command)").
struct ProcStat {
  pid_t pid = 0;
  char state = 0;  // R, S, D, Z (zombie), X (dead), ...
  pid_t ppid = 0;
  pid_t pgrp = 0;
  uint64_t start_time = 0;  // clock ticks since boot (field 22): a pid plus this names a process
  bool zombie() const { return state == 'Z' || state == 'X'; }
};

// nullopt when the process does not exist (or its stat line does not parse).
std::optional<ProcStat> ReadProcStat(pid_t pid);
// Every process on the machine.
std::vector<ProcStat> ListProcesses();
// Whether a process group has a member that is not a zombie (orphans are reaped by init, which
// may take its time; a zombie holds nothing).
bool GroupHasLiveProcess(pid_t pgid);
// Every process below `root` in the process tree (children, grandchildren, ...).
std::vector<pid_t> DescendantsOf(pid_t root);
// Whether `pid` runs and is not a zombie.
bool ProcessAlive(pid_t pid);
// argv[0] of a process ("" when it is gone).
std::string ProcessProgram(pid_t pid);
// Where the cgroup v2 hierarchy is mounted, from /proc/self/mountinfo ("" when it is not).
std::string Cgroup2Mount();
// This process's cgroup in the v2 hierarchy, from /proc/self/cgroup ("/system.slice/x", "" when
// unknown).
std::string OwnCgroup2();

}  // namespace muster
