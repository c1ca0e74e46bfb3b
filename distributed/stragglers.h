// Stragglers: how long the ranks waited for each rank at DDP's gradient all-reduces, over a
// stretch of steps (a log window). Each rank adds up its own waits (DistributedDataParallel::
// last_sync_wait: from backward's last gradient until every bucket was reduced). A ring
// all-reduce ends on every rank at about the same time, so a rank that arrived d later than the
// earliest one waits d less: what the earliest rank waited for rank r is max_j W_j - W_r.
// Differences of durations: no clocks to agree on across hosts.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "core/deadline.h"

namespace ringlet::distributed {

// What the ranks waited for each other over a window of steps.
struct Waits {
  std::vector<double> waited_for_ms;  // per rank: the earliest rank's wait for it, ms a step
  double step_ms = 0;                 // the ranks' mean step
};

class WaitTally {
 public:
  // One step: its wait for the gradient all-reduces, and its whole wall time.
  void add(std::chrono::steady_clock::duration wait, double step_ms);
  // A collective (every rank calls it at the same step): the window's waits since the last
  // call; then starts again. Empty on one rank or when a rank added no step.
  Waits waited_for(collectives::Communicator* comm, core::Deadline deadline);

 private:
  double wait_ms_ = 0, step_ms_ = 0;
  std::int64_t steps_ = 0;
};

struct Straggler {
  int rank = -1;
  double waited_ms = 0;  // per step
  double share = 0;      // of the step
};

// The rank the others waited for longest, when that is more than `share` of a step of
// `step_ms`; nullopt otherwise.
std::optional<Straggler> find_straggler(const std::vector<double>& waited_ms, double step_ms,
                                        double share = 0.2);

// "straggler: rank 1 keeps the others waiting 12.3 ms of a 41.0 ms step (30%)".
std::string straggler_text(const Straggler& s, double step_ms);

}  // namespace ringlet::distributed
