#include "muster/common/signals.h"

#include <signal.h>

#include <cctype>
#include <map>

#include "muster/common/strings.h"

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

int WaitForStopSignal(const std::function<void()>& on_hangup) {
  while (true) {
    const int sig = WaitForTerminationSignal();
    if (sig != SIGHUP) return sig;
    on_hangup();
  }
}

}  // namespace muster

namespace muster {

int SignalNumber(const std::string& v) {
  static const std::map<std::string, int> names = {
      {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"CONT", SIGCONT},
      {"STOP", SIGSTOP}, {"TSTP", SIGTSTP}, {"ALRM", SIGALRM}, {"URG", SIGURG}};
  if (auto n = ParseUint(v); n && *n > 0 && *n < 65) return static_cast<int>(*n);
  std::string name = v;
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (StartsWith(name, "SIG")) name = name.substr(3);
  auto it = names.find(name);
  return it == names.end() ? 0 : it->second;
}

}  // namespace muster
