// Stop requests by signal; see stop_request.h.
#include "trainer/stop_request.h"

#include <signal.h>

#include <array>
#include <atomic>

namespace ringlet::trainer {
namespace {

constexpr std::array<int, 3> kSignals = {SIGTERM, SIGINT, SIGUSR1};
std::atomic<int> g_requested{0};
static_assert(std::atomic<int>::is_always_lock_free, "set from a signal handler");

// The first signal is recorded; a second one gets the default action, which stops the process.
extern "C" void on_stop_signal(int sig) {
  int none = 0;
  if (g_requested.compare_exchange_strong(none, sig)) return;
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  ::sigaction(sig, &fallback, nullptr);
  ::raise(sig);
}

std::array<struct sigaction, kSignals.size()> g_previous{};

}  // namespace

StopRequest::StopRequest() {
  g_requested.store(0);
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (std::size_t i = 0; i < kSignals.size(); ++i) {
    ::sigaction(kSignals[i], &action, &g_previous[i]);
  }
}

StopRequest::~StopRequest() {
  for (std::size_t i = 0; i < kSignals.size(); ++i) {
    ::sigaction(kSignals[i], &g_previous[i], nullptr);
  }
}

int StopRequest::signal() const { return g_requested.load(); }

void StopRequest::request(int sig) {
  int none = 0;
  g_requested.compare_exchange_strong(none, sig);
}

const char* stop_signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "a signal";
  }
}

}  // namespace ringlet::trainer
