// Daemon signal handling: block termination signals in every thread (call before starting any),
// then wait for one in main().
#pragma once

#include <functional>
#include <string>

namespace muster {

// Blocks SIGTERM, SIGINT and SIGHUP for this thread and the threads it starts; ignores SIGPIPE.
void BlockTerminationSignals();
// Waits for one of them; returns its number.
int WaitForTerminationSignal();
// Waits for SIGTERM or SIGINT and returns its number; each SIGHUP meanwhile (a reload request:
// `systemctl reload`, Slurm's habit for reconfiguring) calls `on_hangup` instead of stopping.
int WaitForStopSignal(const std::function<void()>& on_hangup);

// A signal by name (USR1, SIGUSR1) or number (1-64), as scancel --signal and sbatch --signal take
// it; 0 when it is neither.
int SignalNumber(const std::string& text);

}  // namespace muster
