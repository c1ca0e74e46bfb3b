// resolve_options: CommOptions + the environment -> ResolvedOptions, once per communicator.
#include "collectives/options.h"

#include "collectives/algorithm_table.h"
#include "collectives/default_algorithm_tables.h"
#include "collectives/flight_recorder.h"
#include "collectives/status_board.h"
#include "core/env.h"
#include "core/error.h"

namespace ringlet::collectives {
namespace {

constexpr std::chrono::minutes kDefaultTimeout{10};
// A shared window holds two pieces, each one chunk per rank; chunks of 256 KiB stay in every
// core's 1 MiB L2 from staging to gathering. Measured over shm on 2 cores: 16 MiB at 2 ranks
// took 2.2 ms with 1 MiB windows, 2.6 with 2 MiB, 2.8 with 4 MiB; at 4 ranks 2 MiB windows beat
// 4 MiB ones.
constexpr std::int64_t kDefaultWindowChunkBytes = 256 * 1024;
constexpr std::int64_t kDefaultInlineBytes = 64 * 1024;
// The hierarchical all-reduce's pipelining unit: the host ring works on the next piece and
// gathers the last one while the cross-host ring carries this one.
constexpr std::int64_t kDefaultPieceBytes = 4 * 1024 * 1024;
constexpr std::int64_t kMaxBytes = std::int64_t{1} << 40;

AlgoRequest resolve_algo(const std::string& given) {
  if (!given.empty()) return parse_algo_request(given, "RINGLET_ALGO");
  return parse_algo_request(core::env_string("RINGLET_ALGO").value_or("auto"), "RINGLET_ALGO");
}

// The table `auto` takes: "model" (unset, the default): the model's built-in table for this
// world size (none beyond 8 ranks); "thresholds": none (the measured thresholds decide); else a
// file of tables.
AlgoThresholds resolve_thresholds(const CommOptions& o, int world_size) {
  AlgoThresholds t = default_thresholds();
  std::string table = !o.algo_table.empty()
                          ? o.algo_table
                          : core::env_string("RINGLET_ALGO_TABLE").value_or("model");
  if (table.empty()) table = "model";
  if (table == "model") {
    t.table = default_algorithm_table(world_size);
    t.table_is_builtin = true;
  } else if (table != "thresholds") {
    t.table = algorithm_table_for(table, world_size);
  }
  if (o.rd_max_bytes != 0) t.rd_max_bytes = o.rd_max_bytes;
  if (o.direct_min_bytes != 0) t.direct_min_bytes = o.direct_min_bytes;
  if (o.window_min_bytes != 0) t.window_min_bytes = o.window_min_bytes;
  // Thresholds set by hand decide alone, at two ranks too.
  if (o.rd_max_bytes != 0 || o.window_min_bytes != 0) t.pair_rd_max_bytes = 0;
  return t;
}

std::size_t resolve_window_bytes(std::int64_t given, int world_size) {
  const std::int64_t bytes =
      given >= 0 ? given
                 : core::env_int("RINGLET_SHM_WINDOW_BYTES",
                                 static_cast<std::int64_t>(default_window_bytes(world_size)), 0,
                                 kMaxBytes);
  RINGLET_CHECK(bytes == 0 || bytes >= 256, ValueError, "RINGLET_SHM_WINDOW_BYTES=", bytes,
                " is too small: 0 (no windows) or at least 256 bytes");
  return static_cast<std::size_t>(bytes);
}

}  // namespace

std::size_t default_window_bytes(int world_size) {
  return 2 * static_cast<std::size_t>(world_size) * kDefaultWindowChunkBytes;
}

std::chrono::milliseconds resolve_timeout(std::chrono::milliseconds given) {
  if (given.count() > 0) return given;
  const auto fallback = std::chrono::duration_cast<std::chrono::milliseconds>(kDefaultTimeout);
  return std::chrono::milliseconds(
      core::env_int("RINGLET_TIMEOUT", fallback.count(), 1, kMaxBytes));
}

ResolvedOptions resolve_options(const CommOptions& o, int world_size) {
  ResolvedOptions r;
  r.timeout = resolve_timeout(o.timeout);
  r.algo = resolve_algo(o.algo);
  r.thresholds = resolve_thresholds(o, world_size);
  r.channels =
      o.channels > 0 ? o.channels : static_cast<int>(core::env_int("RINGLET_CHANNELS", 1, 1, 16));
  // 0 stays 0: each transport's preferred slice.
  r.slice_bytes = o.slice_bytes != 0 ? o.slice_bytes
                                     : static_cast<std::size_t>(core::env_int(
                                           "RINGLET_SLICE_BYTES", 0, 1, std::int64_t{1} << 32));
  r.window_bytes = resolve_window_bytes(o.window_bytes, world_size);
  r.inline_bytes = static_cast<std::size_t>(
      o.inline_bytes >= 0
          ? o.inline_bytes
          : core::env_int("RINGLET_INLINE_BYTES", kDefaultInlineBytes, 0, kMaxBytes));
  r.piece_bytes = static_cast<std::size_t>(
      o.piece_bytes >= 0
          ? o.piece_bytes
          : core::env_int("RINGLET_HIER_PIECE_BYTES", kDefaultPieceBytes, 0, kMaxBytes));
  r.trace_dir = !o.trace_dir.empty() ? o.trace_dir : core::env_string("RINGLET_TRACE").value_or("");
  r.flight_recorder_size = o.flight_recorder_size >= 0
                               ? static_cast<std::size_t>(o.flight_recorder_size)
                               : flight_recorder_size_from_env();
  r.flight_recorder_dir = !o.flight_recorder_dir.empty()
                              ? o.flight_recorder_dir
                              : core::env_string("RINGLET_FR_DIR").value_or("");
  r.status_interval = o.status_interval_ms >= 0 ? std::chrono::milliseconds(o.status_interval_ms)
                                                : status_interval_from_env();
  r.name = o.name;
  return r;
}

}  // namespace ringlet::collectives
