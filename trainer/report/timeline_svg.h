// Timelines as inline SVG for the run report, drawn from a trace (collectives/trace_analysis.h):
// - ring_timeline_svg: one collective, one row per rank (and channel), a box per step at the
//   time it ran, coloured by phase (RS, AG, ...) and labelled with its step and chunk, so the
//   2(n-1) steps of a ring and the ranks waiting on each other show;
// - step_timeline_svg: one training step on every rank, its compute spans (forward, backward
//   and its autograd nodes, gradient sync wait, optimizer, data) above the collective steps that
//   ran meanwhile, with a tick where each DDP bucket became ready: the overlap of backward and
//   all-reduce, as Perfetto shows the same trace.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/trace_analysis.h"

namespace ringlet::trainer::report {

std::string ring_timeline_svg(const collectives::CollectiveRecord& collective);

// The training step numbered `step` (a "step" span's index); "" when no rank traced it.
std::string step_timeline_svg(const std::vector<collectives::SpanRecord>& spans,
                              const std::vector<collectives::StepRecord>& steps, std::int64_t step);

// The colour a phase or span category is drawn in (shared by the legend and the boxes).
std::string phase_color(const std::string& phase);

}  // namespace ringlet::trainer::report
