// The communicator's settings: CommOptions as the caller gives them (0 / -1 / empty meaning "the
// environment's value, else the default"), and resolve_options, the one place that reads the
// environment and turns them into ResolvedOptions, where every field is final.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "collectives/algorithm_choice.h"

namespace ringlet::collectives {

struct CommOptions {
  std::chrono::milliseconds timeout{0};  // per op; 0 = RINGLET_TIMEOUT or 10 minutes
  std::string timeout_source;    // what a timed-out op says sets it; empty: RINGLET_TIMEOUT's words
  std::string algo;              // "auto", "ring", "rd", "rabenseifner", "tree", "direct",
                                 // "window", "hierarchical", "one_shot", "two_shot", "bruck"
                                 // (all-gather); empty = RINGLET_ALGO or auto
  std::size_t rd_max_bytes = 0;  // auto uses rd up to this size; 0 = measured default
  std::size_t direct_min_bytes = 0;  // auto uses direct from this size (when every pair can
                                     // read each other's memory); 0 = measured default
  std::size_t window_min_bytes = 0;  // auto uses shared windows from this size (when the
                                     // ranks have them); 0 = measured default
  int channels = 0;                  // rings in parallel; 0 = RINGLET_CHANNELS or 1
  std::size_t slice_bytes = 0;       // pipelining unit; 0 = RINGLET_SLICE_BYTES, else per transport
  std::int64_t window_bytes = -1;    // shared window per rank when all are on one host with shm;
                                     // -1 = RINGLET_SHM_WINDOW_BYTES or size x 512 KiB, 0 = none
  std::int64_t inline_bytes = -1;    // run on the caller up to this; -1 = env or 64 KiB
  std::int64_t piece_bytes = -1;     // hierarchical all-reduce: pieces of this size overlap the
                                     // host ring with the cross-host ring; -1 =
                                     // RINGLET_HIER_PIECE_BYTES or 4 MiB, 0 = one piece
  std::string trace_dir;             // empty = RINGLET_TRACE (unset: no tracing)
  std::int64_t flight_recorder_size = -1;  // -1 = RINGLET_FR_SIZE or 2,000; 0 = off
  std::string flight_recorder_dir;         // dumps; empty = RINGLET_FR_DIR (unset: none)
  std::int64_t status_interval_ms = -1;    // -1 = RINGLET_STATUS_INTERVAL or 500; 0 = no board
  std::string algo_table;     // a file of a model's algorithm tables (algorithm_table.h),
                              // "model": its built-in ones (default_algorithm_tables.h, 2-8
                              // ranks on one host), or "thresholds": the measured thresholds
                              // alone; empty = RINGLET_ALGO_TABLE (unset: "model")
  std::string name = "comm";  // store prefix for this communicator
};

struct ResolvedOptions {
  std::chrono::milliseconds timeout;
  AlgoRequest algo;
  AlgoThresholds thresholds;
  int channels;
  std::size_t slice_bytes;                    // 0: each transport's preferred slice
  std::size_t window_bytes;                   // 0: no shared windows
  std::size_t inline_bytes;                   // 0: never inline
  std::size_t piece_bytes;                    // 0: the hierarchical all-reduce runs in one piece
  std::string trace_dir;                      // empty: no tracing
  std::size_t flight_recorder_size;           // 0: off
  std::string flight_recorder_dir;            // empty: no dumps
  std::chrono::milliseconds status_interval;  // 0: no status board (status_board.h)
  std::string name;
};

// The deadline of one collective: `given` when positive, else RINGLET_TIMEOUT (ms), else 10
// minutes (a bad RINGLET_TIMEOUT is a ValueError naming it).
std::chrono::milliseconds resolve_timeout(std::chrono::milliseconds given);

// A rank's shared window when neither CommOptions nor RINGLET_SHM_WINDOW_BYTES sets it: two
// chunks of 256 KiB per rank.
std::size_t default_window_bytes(int world_size);

// Fills every unset field of `options` from the environment (RINGLET_TIMEOUT, RINGLET_ALGO,
// RINGLET_CHANNELS, RINGLET_SLICE_BYTES, RINGLET_SHM_WINDOW_BYTES, RINGLET_INLINE_BYTES,
// RINGLET_HIER_PIECE_BYTES, RINGLET_TRACE, RINGLET_ALGO_TABLE) or the measured defaults; a bad
// value is a ValueError naming it.
ResolvedOptions resolve_options(const CommOptions& options, int world_size);

}  // namespace ringlet::collectives
