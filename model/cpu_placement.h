// Where the fit's two CPUs sat while it ran: the round trip of a cache line between them
// (core::cpu_round_trip_ns), probed before the fit and after each of its parts. On a virtual
// machine the host moves the virtual CPUs every few minutes, and the fit's shared-memory figures
// move 1.5-4x with them (a line another core's cache holds is written at 28 GB/s near, 6 apart:
// bench/RESULTS.md, 2026-12-03 "The ring's start and the peer's cache"); a fit whose parts ran in
// two placements describes neither, so `fit_machine` fits again when the round trip moved.
#pragma once

#include <string>
#include <vector>

namespace ringlet::model {

// The round trips probed over one fit, ns; empty where the process may use only one CPU.
struct CpuPlacement {
  std::vector<double> round_trips_ns;

  // Probes the fit's two CPUs (two_cpus()) now: the fastest of three samples (a sample can meet
  // a busy moment, never a faster placement); nothing where there are not two CPUs or none
  // answered.
  void probe();

  // Whether the slowest round trip is at least kMovedRatio times the fastest: the two CPUs sat
  // in two placements. On the VMs measured here one placement's probes agree within 1.3x, and
  // the placements lie 2x and more apart: one core about 50 ns, a shared cache 100-130, apart
  // 340-570.
  bool moved() const;

  // "381-412 ns", or "" with no round trips.
  std::string range() const;

  static constexpr double kMovedRatio = 2.0;
};

}  // namespace ringlet::model
