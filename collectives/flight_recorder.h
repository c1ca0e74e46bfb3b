// FlightRecorder: the last N operations of one communicator, kept in a ring buffer so that when
// a job hangs or fails every surviving rank can say what it issued, what it was running and what
// it was waiting for (as PyTorch's flight recorder and NCCL's RAS). Each record: the sequence
// number, op, dtype, count, bytes, algorithm and transport, and its state: issued (`scheduled`,
// with its time), `started` (a channel began it), `completed` or `failed` (with the time, the peer
// it waited on, the bytes it had moved and the error). RINGLET_FR_SIZE records (default 2,000; 0
// turns it off). dump() writes the records as JSON with PyTorch's field names where the concept
// is the same (`collective_seq_id`, `profiling_name`, `state`, `time_created_ns`, sizes and
// dtypes); flight_analysis.h reads the dumps back. Thread-safe; one short lock per change.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collectives/types.h"

namespace ringlet::collectives {

// What a record starts with, at issue.
struct FlightOp {
  OpKind kind = OpKind::all_reduce;
  bool collective = true;  // false: send/recv (numbered apart, as p2p_seq_id)
  std::uint64_t seq = 0;
  DType dtype = DType::f32;
  std::size_t count = 0;
  std::size_t bytes = 0;
  int peer = -1;  // send/recv: the other rank; broadcast/reduce: the root
  // Names that outlive the recorder (string literals, the communicator's transport label): a
  // record copies no string, so keeping it costs a small op next to nothing.
  const char* algorithm = "";
  const char* transport = "";

  static FlightOp with_algorithm(const char* name) {
    FlightOp op;
    op.algorithm = name;
    return op;
  }
  static FlightOp point_to_point(std::size_t bytes, int peer) {
    FlightOp op;
    op.bytes = bytes;
    op.peer = peer;
    return op;
  }
};

// One op as a live status shows it (status_board.h).
struct FlightMark {
  std::uint64_t seq = 0;
  OpKind kind = OpKind::all_reduce;
  const char* state = "";    // scheduled, started, completed, failed
  std::int64_t time_ns = 0;  // wall clock: issued (an open op), ended (a finished one)
};

// Where a rank stands among its collectives (send/recv left out): the oldest op still open
// (issued, not finished: the one it is in or waits to start), the newest finished, and how many
// it has issued. No open op: the rank is outside collectives since `last` ended.
struct FlightPosition {
  bool enabled = false;
  std::uint64_t issued = 0;
  std::optional<FlightMark> open;
  std::optional<FlightMark> last;
};

class FlightRecorder {
 public:
  explicit FlightRecorder(std::size_t capacity);
  bool enabled() const { return capacity_ > 0; }
  std::size_t capacity() const { return capacity_; }

  // Records an issued op; returns its id for the calls below (0 when the recorder is off: the
  // calls then do nothing). An id whose record was overwritten by newer ones is ignored too.
  std::uint64_t issued(const FlightOp& op);
  void started(std::uint64_t id);
  void completed(std::uint64_t id);
  void failed(std::uint64_t id, const std::string& error, bool timed_out, int waiting_on,
              std::uint64_t bytes_done);

  // The records, oldest first, as one JSON document's text: {"version", "rank", "world_size",
  // "pg_name", "host", "pid", "reason", "time_dumped_ns", "entries": [...]}.
  std::string dump_json(int rank, int world_size, const std::string& name,
                        const std::string& reason) const;
  // Writes dump_json() to `path` (atomically: a temporary file, then a rename), creating its
  // directory. Errors are returned as text (empty: written), never thrown: a dump is written on
  // the way out of a failure.
  std::string dump(const std::string& path, int rank, int world_size, const std::string& name,
                   const std::string& reason) const;
  // The rank's position now, from the newest kPositionScan records.
  FlightPosition position() const;
  static constexpr std::size_t kPositionScan = 256;

 private:
  enum class State { scheduled, started, completed, failed };
  struct Record {
    std::uint64_t id = 0;  // 0: empty slot
    FlightOp op;
    State state = State::scheduled;
    std::uint64_t created = 0, finished = 0;  // clock ticks (tick_now)
    std::string error;
    bool timed_out = false;
    int waiting_on = -1;
    std::uint64_t bytes_done = 0;
  };
  Record* find(std::uint64_t id);  // with mutex_ held; null when off or overwritten
  static const char* state_name(State state);
  // Ticks of the processor's time-stamp counter (a few ns to read, where the wall clock may take
  // a hundred on a VM), turned into wall-clock ns at dump time from two (wall, tick) readings.
  static std::uint64_t tick_now();
  // A tick's length and a (wall, tick) pair to convert from, read now.
  struct TickScale {
    double ns_per_tick;
    std::int64_t now_ns;
    std::uint64_t now_tick;
    std::int64_t to_ns(std::uint64_t tick) const;
  };
  TickScale tick_scale() const;

  // Held for a few stores at a time: one atomic exchange to take (a mutex takes two atomic
  // operations, which on a 1 us all-reduce are a measurable share).
  class SpinLock {
   public:
    void lock() {
      while (held_.exchange(true, std::memory_order_acquire)) {
        while (held_.load(std::memory_order_relaxed)) std::this_thread::yield();
      }
    }
    void unlock() { held_.store(false, std::memory_order_release); }

   private:
    std::atomic<bool> held_{false};
  };

  std::size_t capacity_;
  mutable SpinLock mutex_;
  std::vector<Record> records_;
  std::uint64_t next_id_ = 1;
  std::int64_t start_ns_;     // wall clock at construction
  std::uint64_t start_tick_;  // and the tick then
};

// RINGLET_FR_SIZE (default 2,000; 0: off).
std::size_t flight_recorder_size_from_env();
// The file a rank's dump goes to in `dir`: rank<R>.json for the job's communicator ("comm"),
// rank<R>.<name>.json for another (a sub-communicator, a torch process group).
std::string flight_dump_path(const std::string& dir, int rank, const std::string& name);

}  // namespace ringlet::collectives
