// line_round_trip_ns(): how far apart the two ends of an shm connection sit, from the round trip
// of one cache line of their segment between the two processes' connecting threads, as they sit
// when they connect. Where the two cores share no cache, writing a line the peer's core has just
// read takes the line back from that core, which decides where a ring's writer puts its next
// message (ShmRing::set_going_back).
//
// Unlike core::cpu_round_trip_ns nothing is pinned: the threads stay where the scheduler has
// them, so with more ranks than CPUs the two may take turns on one CPU, and then neither answers
// in time and the result is NaN.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace ringlet::transport {

inline constexpr int kLineTripBatches = 8;
inline constexpr int kLineTripsPerBatch = 16;
// A side silent this long: NaN, and both stop (a connection's; a test may wait longer).
inline constexpr std::chrono::microseconds kLineAnswerWait{2000};

// Side 0 measures: the fastest of kLineTripBatches batches' mean round trips, in ns (a batch a
// time slice or an interrupt fell in only reads slower); NaN where side 1 did not answer in time.
// Side 1 echoes until side 0 says it is done or stops answering, and returns NaN. Both sides call
// it at once on the same zeroed `line`, once.
double line_round_trip_ns(std::atomic<std::uint64_t>& line, int side,
                          std::chrono::microseconds answer_wait = kLineAnswerWait);

}  // namespace ringlet::transport
