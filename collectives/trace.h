// Per-rank tracing of collective steps and of the compute around them. With RINGLET_TRACE=dir
// (or a Tracer opened later, as `ringlet train --trace_steps N` does), every step of every
// collective records (op, seq, step, phase, chunk, peer, bytes, start, end), and the trainer
// records compute spans (forward, backward per autograd node, optimizer, a DDP bucket becoming
// ready) on a "compute" row next to the channels. A rank's events are written as Chrome trace
// JSON to dir/trace.rank<R>.json when the communicator is destroyed (or flush() is called);
// trace_files.h reads and merges them.
#pragma once

#include <atomic>
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

// A span of the rank's own work (not a collective step), shown on the "compute" row.
struct TraceSpan {
  std::string name;      // "forward", "backward", "ConvolutionBackward", "optimizer", ...
  std::string category;  // "step", "forward", "backward", "optimizer", "ddp"
  std::chrono::steady_clock::time_point start, end;  // start == end: an instant
  std::int64_t index = -1;                           // the training step / bucket, if any
  std::uint64_t bytes = 0;                           // a bucket's, if any
};

// A rank's trace file in its directory: trace.rank<R>.json.
inline constexpr const char* kTraceFilePrefix = "trace.rank";
inline constexpr const char* kTraceFileSuffix = ".json";

// The Chrome trace thread id of the compute row (channels are 0, 1, ...).
constexpr int kComputeLane = 1000;
// Channel c's host ring, when a pipelined hierarchical all-reduce runs it on a second thread
// beside the cross-host ring: its steps overlap the channel's, so they get a row of their own,
// kHostRingLane + c.
constexpr int kHostRingLane = 500;
inline bool is_host_ring_lane(int lane) { return lane >= kHostRingLane && lane < kComputeLane; }
// How reports name a row: "0" for channel 0, "0h" for its host ring.
inline std::string lane_label(int lane) {
  return is_host_ring_lane(lane) ? std::to_string(lane - kHostRingLane) + "h"
                                 : std::to_string(lane);
}

class Tracer {
 public:
  // Disabled when dir is empty. rank names the output file.
  Tracer(std::string dir, int rank);
  ~Tracer();  // flush()
  bool enabled() const { return recording_.load(std::memory_order_relaxed); }
  // Starts recording into `dir` (creating it) when not already recording somewhere.
  void open(const std::string& dir);
  // Stops (false) or restarts (true) recording; what was recorded stays to be written.
  void set_recording(bool on);
  // Stops recording, writes what was recorded and forgets the directory and the events, so
  // the tracer can be opened again (for the next run on the same communicator).
  void close();
  void record(TraceEvent event);  // thread-safe
  void record(TraceSpan span);    // thread-safe
  void flush();                   // writes dir/trace.rank<R>.json (atomically: temp + rename)

 private:
  std::string dir_;
  int rank_;
  std::atomic<bool> recording_{false};
  std::mutex mutex_;
  std::vector<TraceEvent> events_;
  std::vector<TraceSpan> spans_;
};

// Records a span from construction to destruction when `tracer` is non-null and enabled.
class TraceScope {
 public:
  TraceScope(Tracer* tracer, std::string name, std::string category, std::int64_t index = -1);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  Tracer* tracer_;
  TraceSpan span_;
};

}  // namespace ringlet::collectives
