#include "muster/common/signals.h"

#include <signal.h>

namespace muster {
namespace {
sigset_t TerminationSet() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGTERM);
  sigaddset(&s, SIGINT);
  sigaddset(&s, SIGHUP);
  return s;
}
}  // namespace

void BlockTerminationSignals() {
  sigset_t s = TerminationSet();
  pthread_sigmask(SIG_BLOCK, &s, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

int WaitForTerminationSignal() {
  sigset_t s = TerminationSet();
  int sig = 0;
  sigwait(&s, &sig);
  return sig;
}

}  // namespace muster
