// cpu_round_trip_ns(): how far apart two CPUs are, from the round trip of one cache line between
// two threads pinned to them (the median of 25 batches of trips / 25 round trips each).
//
// On a virtual machine the host decides where the virtual CPUs run and moves them while a job
// runs; shared memory's and loopback's costs follow (bench/RESULTS.md, 2026-11-26 "Placement").
// On the 2-vCPU machines this project is measured on the round trip is 40-160 ns while the two
// sit near (one physical core, or cores sharing a cache) and 340-570 ns while they sit apart.
//
// Both threads run at real-time priority for the sample where the process may (root), so a busy
// program on the same CPUs delays it by no more than a time slice. The caller's own thread, CPUs
// and priority are left as they were.
#pragma once

namespace ringlet::core {

constexpr int kRoundTripBatches = 25;   // a sample is the median of this many batches
constexpr int kRoundTripAnswerMs = 50;  // a partner silent this long: NaN

// The round trip in ns; NaN where a thread cannot be placed on its CPU or its partner does not
// answer within 50 ms (each side then stops within that). `trips` is rounded down to a multiple
// of 25, at least 25.
double cpu_round_trip_ns(int cpu_a, int cpu_b, int trips = 500);

}  // namespace ringlet::core
