// Per-rank tracing of collective steps. With RINGLET_TRACE=dir, every step of every
// collective records (op, seq, step, phase, chunk, peer, bytes, start, end) and the rank's
// events are written as Chrome trace JSON to dir/trace.rank<R>.json when the communicator is
// destroyed (or flush() is called). merge_traces() joins a directory of rank files into one
// file that Perfetto / chrome://tracing open with one row (process) per rank.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace ringlet::collectives {

struct TraceEvent {
  std::string op;     // "all_reduce"
  std::uint64_t seq;  // collective number
  int step;           // step within the collective
  std::string phase;  // "RS", "AG", "RD", "BCAST", "REDUCE", "BARRIER", "P2P"
  int chunk;          // chunk index (-1 if none)
  int peer;           // the peer sent to / received from
  int channel;
  std::uint64_t bytes;
  std::chrono::steady_clock::time_point start, end;
};

class Tracer {
 public:
  // Disabled when dir is empty. rank names the output file.
  Tracer(std::string dir, int rank);
  ~Tracer();  // flush()
  bool enabled() const { return !dir_.empty(); }
  void record(TraceEvent event);  // thread-safe
  void flush();                   // writes dir/trace.rank<R>.json (atomically: temp + rename)

 private:
  std::string dir_;
  int rank_;
  std::mutex mutex_;
  std::vector<TraceEvent> events_;
};

// Merges every trace.rank*.json in `dir` into `out` (ranks as processes, named "rank R").
// Returns the number of events written; throws core::Error naming a malformed file.
std::size_t merge_traces(const std::string& dir, const std::string& out);

}  // namespace ringlet::collectives
