// Daemon signal handling: block termination signals in every thread (call before starting any),
// then wait for one in main().
#pragma once

namespace muster {

// Blocks SIGTERM, SIGINT and SIGHUP for this thread and the threads it starts; ignores SIGPIPE.
void BlockTerminationSignals();
// Waits for one of them; returns its number.
int WaitForTerminationSignal();

}  // namespace muster
