// A request to stop a run early, the way a preempted job is asked: SIGTERM (scancel, a
// preemption, the launcher forwarding one), SIGINT (Ctrl-C) or SIGUSR1 (Slurm's --signal). The
// first such signal is only recorded: the training loop finishes its current step on every
// rank, writes a checkpoint at that step and exits. A second one stops the process at once
// (the signal's default action).
#pragma once

namespace ringlet::trainer {

class StopRequest {
 public:
  // Installs the handlers for this object's lifetime; the previous ones come back after.
  StopRequest();
  ~StopRequest();
  StopRequest(const StopRequest&) = delete;
  StopRequest& operator=(const StopRequest&) = delete;

  // The signal that asked for a stop, or 0.
  int signal() const;
  // As if `sig` had arrived (tests, and a rank told by its peers).
  static void request(int sig);
};

// "SIGTERM", "SIGINT", "SIGUSR1", or "a signal".
const char* stop_signal_name(int sig);

}  // namespace ringlet::trainer
