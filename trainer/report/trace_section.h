// The report's trace section, from a run's trace directory (step_trace.h): one traced training
// step on every rank (compute spans over collective steps), the ring's steps of the collective
// that moved the most bytes, and a table of those steps next to the alpha-beta model with where
// the time went (collectives/trace_analysis.h).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace ringlet::trainer::report {

struct TraceSection {
  std::string html;
  std::size_t ranks = 0;  // trace files read; 0 when the run was not traced
};

// A note on how to trace when `dir` holds no trace files.
TraceSection trace_section(const std::filesystem::path& dir);

}  // namespace ringlet::trainer::report
