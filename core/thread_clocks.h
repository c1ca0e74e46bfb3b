// Where one thread's time goes between two moments: computing (its own CPU time), preempted
// (ready to run but waiting for a core: the run queue's wait, from
// /proc/thread-self/schedstat), and blocked (the rest: asleep, waiting for a peer, a lock or
// I/O; on a VM whose kernel accounts steal time, also the time the host ran something else on
// this virtual CPU, which counts as neither CPU time nor run-queue wait); beside it, the CPU time
// the process's other threads took meanwhile (a communicator's progress threads, say). Readings are
// cheap enough to take once per training step (a few microseconds: two clock reads and one small
// /proc read). Where the kernel keeps no scheduler statistics (no schedstat file), preempted is NaN
// and blocked then includes it.
#pragma once

#include <vector>

namespace ringlet::core {

// The calling thread's clocks at one moment, in milliseconds from each clock's own origin.
// The steady clock is read first and last, so a split's wall time (from one reading's first
// read to the next one's last) encloses its CPU and run-queue intervals: a preemption in the
// middle of a reading lands in both or in neither, never in preempted alone.
struct ThreadClocks {
  double wall_ms = 0;         // steady clock, read first
  double wall_end_ms = 0;     // steady clock, read last
  double cpu_ms = 0;          // this thread's CPU time
  double runqueue_ms = 0;     // this thread's total wait on a run queue; NaN when unknown
  double process_cpu_ms = 0;  // the whole process's CPU time (every thread)

  static ThreadClocks now();
};

// One thread's time between two readings, split by what it was doing.
struct TimeSplit {
  double wall_ms = 0;
  double computing_ms = 0;
  double preempted_ms = 0;  // NaN when the run queue's wait is unknown
  double blocked_ms = 0;    // wall - computing - preempted (with preempted unknown: - computing)
  double other_threads_ms = 0;  // CPU time of the process's other threads meanwhile
};

TimeSplit split_between(const ThreadClocks& from, const ThreadClocks& to);
// Field by field mean of `splits` (each field's NaNs make it NaN); all zero for none.
TimeSplit mean_split(const std::vector<TimeSplit>& splits);

}  // namespace ringlet::core
