// Where every rank's training steps went (core/thread_clocks.h: computing, preempted, blocked),
// gathered from all ranks so that one of them can tell a straggler from the ranks that wait for
// it. In lockstep (DDP) each rank's step takes as long; a rank that computes faster spends the
// difference blocked, waiting for the others at the gradient all-reduce (or for its data). On a
// device, computing is the host thread's part (launches, copies); the device's own time shows
// as blocked (the host waiting for it) or, on the emulated device, as other threads' CPU.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "core/thread_clocks.h"

namespace ringlet::distributed {

// Every rank's `mine`, in rank order (all ranks call it, as a collective); {mine} without a
// communicator.
std::vector<core::TimeSplit> gather_splits(collectives::Communicator* comm,
                                           const core::TimeSplit& mine, core::Deadline deadline);

// [{"rank", "wall_ms" (the mean step), "computing_ms", "preempted_ms" (null when unknown),
// "blocked_ms",
//   "other_threads_ms"}, ...]
nlohmann::json splits_json(const std::vector<core::TimeSplit>& ranks);

// "a step 42.64 ms: computing 36.40-41.83 ms (rank 1 the slowest), preempted 0.51-0.74 ms,
// blocked 0.31-5.50 ms" for several ranks (ranges over them; preempted left out where a rank's
// is unknown), "a step 38.01 ms: computing 37.52 ms, preempted 0.01 ms, blocked 0.45 ms" for
// one.
std::string describe_splits(const std::vector<core::TimeSplit>& ranks);

}  // namespace ringlet::distributed
