// `ringlet trace report DIR`: what a trace directory says about its collectives, for people
// studying the ring: each collective (op, ranks, steps, bytes per rank, wall time, the
// alpha-beta model's time), every step of one of them on every rank (phase RS/AG, chunk,
// peer, bytes, microseconds, GB/s, predicted vs measured) and where its time went (alpha,
// bytes / beta, beyond the model: waiting on a peer, reducing). The model comes from
// p2p_perf's output (--p2p FILE --transport T) or is fitted from the trace
// (collectives/trace_analysis.h).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace ringlet::trainer::cli {

struct TraceReportOptions {
  std::string dir;
  std::string p2p_file;   // empty: fit the model from the trace
  std::string transport;  // p2p_perf's lines to use (required with p2p_file)
  std::int64_t seq = -1;  // the collective shown step by step; -1: the one with most bytes
  int limit = 20;         // collectives listed
};

void print_trace_report(const TraceReportOptions& options, std::ostream& out);

}  // namespace ringlet::trainer::cli
