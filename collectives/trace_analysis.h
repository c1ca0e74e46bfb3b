// What a trace directory says about the collectives: every step of each collective on each
// rank (phase, chunk, peer, bytes, start, duration), grouped by collective, next to the
// alpha-beta cost model of one step, t = alpha + bytes / beta: alpha the per-message cost
// (latency, a wake-up, a syscall), beta the bandwidth. A ring all-reduce of S bytes over n ranks
// takes 2(n-1) steps of S/n bytes each, so the model predicts 2(n-1) (alpha + S / (n beta)).
// The model comes from p2p_perf's JSON lines (latency and bandwidth between two processes) or
// is fitted from the trace itself: a line through the fastest step of each message size, since
// a step's time beyond that is spent waiting for a slower peer, not moving bytes.
// `ringlet trace report` prints these; `ringlet report` draws them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/trace_files.h"

namespace ringlet::collectives {

// One step of one collective on one rank.
struct StepRecord {
  int rank = 0;
  std::string op;  // "all_reduce", "broadcast", ...
  std::uint64_t seq = 0;
  int step = 0;
  std::string phase;  // "RS", "AG", "RD", ...
  int chunk = -1;
  int peer = -1;
  int channel = 0;
  std::uint64_t bytes = 0;
  double start_us = 0, dur_us = 0;
  double gbps() const { return dur_us > 0 ? static_cast<double>(bytes) / dur_us / 1e3 : 0.0; }
};

// One collective (op, seq) on every rank that traced it; steps sorted by rank, channel, start.
struct CollectiveRecord {
  std::string op;
  std::uint64_t seq = 0;
  std::vector<StepRecord> steps;
  int ranks = 0;                    // ranks with at least one step
  std::uint64_t rank_bytes = 0;     // the most bytes one rank moved in it (sum of its steps)
  double start_us = 0, end_us = 0;  // first step's start, last step's end, over all ranks
  double wall_us() const { return end_us - start_us; }
};

// A compute span of the trainer (trace.h's TraceSpan), as read back.
struct SpanRecord {
  int rank = 0;
  std::string name, category;
  double start_us = 0, dur_us = 0;  // dur_us 0: an instant
  std::int64_t index = -1;
};

struct AlphaBeta {
  double alpha_us = 0;  // per step
  double beta_gbps = 0;
  std::string source;  // how it was obtained, for the reader
  double predict_us(std::uint64_t bytes) const {
    return alpha_us + static_cast<double>(bytes) / (beta_gbps * 1e3);
  }
};

// "512 B", "1.5 KiB", "64 MiB".
std::string bytes_text(std::uint64_t bytes);

std::vector<StepRecord> step_records(const std::vector<RankTrace>& traces);
std::vector<SpanRecord> span_records(const std::vector<RankTrace>& traces);
// Groups steps by (op, seq), in the order the collectives were issued.
std::vector<CollectiveRecord> group_collectives(std::vector<StepRecord> steps);

// The line through the fastest step of each distinct message size (least squares; alpha >= 0).
// With one size alpha and beta cannot be told apart: alpha is 0 and beta that size's rate, and
// `source` says so. Throws core::ValueError when no step moved bytes.
AlphaBeta fit_alpha_beta(const std::vector<StepRecord>& steps);
// From p2p_perf's output: alpha its smallest latency, beta its best bandwidth, on `transport`
// (tcp lines with one socket). Throws core::ValueError naming the file when it has neither.
AlphaBeta alpha_beta_from_p2p(const std::string& path, const std::string& transport);

// The collective of interest in a report: the one that moved the most bytes per rank (the
// first such), or the one numbered `seq` when seq >= 0. Throws core::ValueError if none is.
const CollectiveRecord& pick_collective(const std::vector<CollectiveRecord>& collectives,
                                        std::int64_t seq);

// The model's time for one collective: the longest sum of predicted steps over its ranks'
// channels (they run side by side).
double model_us(const CollectiveRecord& collective, const AlphaBeta& model);

// Where one collective's time went, summed over its ranks' steps.
struct TimeSplit {
  double measured_us = 0;
  double alpha_us = 0;   // steps x alpha
  double bytes_us = 0;   // bytes / beta
  double beyond_us = 0;  // measured - model, >= 0: waiting on peers, reducing, scheduling
};
TimeSplit split_time(const CollectiveRecord& collective, const AlphaBeta& model);

}  // namespace ringlet::collectives
