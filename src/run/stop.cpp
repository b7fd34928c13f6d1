#include "burstpool/stop.hpp"

#include <signal.h>

#include <atomic>

#include "burstpool/error.hpp"

namespace burstpool {
namespace {

std::atomic<int> received{0};
static_assert(std::atomic<int>::is_always_lock_free, "the handler may only touch lock-free atomics");

void on_stop_signal(int signal) {
  int none = 0;
  if (!received.compare_exchange_strong(none, signal)) {  // the second one: the default action, now
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction(signal, &dfl, nullptr);
    raise(signal);
  }
}

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // MPI's and the file system's calls go on
  for (int signal : {SIGTERM, SIGUSR1})
    if (sigaction(signal, &action, nullptr) != 0) throw Error(fmt::format("cannot handle {}", stop_signal_name(signal)));
}

int stop_signal() { return received.load(); }

const char* stop_signal_name(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return "another signal";
  }
}

}  // namespace burstpool
