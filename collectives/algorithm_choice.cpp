// The all-reduce and all-gather algorithm choices and the all-reduce's measured thresholds.
#include "collectives/algorithm_choice.h"

#include "core/error.h"

namespace ringlet::collectives {
namespace {

// Measured with all_reduce_perf on 2 cores. Recursive doubling's log2(n) rounds win while latency
// is all that counts (tcp: up to 64 KiB; a larger send than the socket takes at once costs a
// hand-off). Cross-memory attach moves each byte between processes once per phase and wins from
// 1 MiB. Shared windows beat recursive doubling from 64 KiB at 3-8 ranks (at 32 KiB rd is
// 1.0-1.3x faster since the shm ring's messages cycle through cached lines: bench/RESULTS.md,
// 2026-12-01 "The shm ring's start"), and the ring and cross-memory attach at every larger size.
constexpr std::size_t kRdMaxBytes = 64 * 1024;
constexpr std::size_t kDirectMinBytes = 1024 * 1024;
constexpr std::size_t kWindowMinBytes = 64 * 1024;
// Two ranks, settled (bench/RESULTS.md, 2026-11-30 "Two ranks"): recursive doubling is one
// exchange, reduced where the message lies in the shm ring, and beats the window's two rounds
// and four copies up to 256 KiB (4.7 against 11.4 us at 64 KiB), while the thread that waits
// moves its message; past that the progress thread does, and the window wins (1 MiB: 67 against
// 163 us).
constexpr std::size_t kPairRdMaxBytes = 256 * 1024;
// Device flags: one-shot reads every rank's whole buffer (n x the bytes per rank), two-shot
// moves each byte about twice but runs two more barriers' worth of kernels per piece. Not yet
// measured on a GPU: the point where vLLM's custom all-reduce switches for 2 GPUs (256 KiB).
constexpr std::size_t kOneShotMaxBytes = 256 * 1024;

}  // namespace

bool checks_fingerprint_apart(Algorithm algorithm) {
  return algorithm == Algorithm::ring || algorithm == Algorithm::hierarchical;
}

const char* algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::ring: return "ring";
    case Algorithm::recursive_doubling: return "rd";
    case Algorithm::rabenseifner: return "rabenseifner";
    case Algorithm::tree: return "tree";
    case Algorithm::direct: return "direct";
    case Algorithm::window: return "window";
    case Algorithm::hierarchical: return "hierarchical";
    case Algorithm::one_shot: return "one_shot";
    case Algorithm::two_shot: return "two_shot";
    case Algorithm::bruck: return "bruck";
    case Algorithm::halving: return "halving";
    case Algorithm::doubling: return "doubling";
  }
  return "unknown";
}

bool is_algorithm_name(const std::string& name) {
  for (int a = 0; a <= static_cast<int>(Algorithm::doubling); ++a) {
    if (name == algorithm_name(static_cast<Algorithm>(a))) return true;
  }
  return false;
}

bool automatic_picks(Algorithm algorithm) {
  return algorithm != Algorithm::rabenseifner && algorithm != Algorithm::tree;
}

AlgoRequest parse_algo_request(const std::string& text, const std::string& source) {
  if (text == "auto") return AlgoRequest::automatic;
  if (text == "ring") return AlgoRequest::ring;
  if (text == "rd") return AlgoRequest::recursive_doubling;
  if (text == "rabenseifner") return AlgoRequest::rabenseifner;
  if (text == "tree") return AlgoRequest::tree;
  if (text == "direct") return AlgoRequest::direct;
  if (text == "window") return AlgoRequest::window;
  if (text == "hierarchical") return AlgoRequest::hierarchical;
  if (text == "one_shot") return AlgoRequest::one_shot;
  if (text == "two_shot") return AlgoRequest::two_shot;
  if (text == "bruck") return AlgoRequest::bruck;
  RINGLET_THROW(ValueError, source, "='", text,
                "' is not one of auto, ring, rd, rabenseifner, tree, direct, window, hierarchical, "
                "one_shot, two_shot, bruck (all-gather)");
}

AlgoThresholds default_thresholds() {
  return {kRdMaxBytes, kDirectMinBytes, kWindowMinBytes, kOneShotMaxBytes,
          {},          false,           kPairRdMaxBytes};
}

Algorithm table_choice(const AlgorithmTable& table, std::size_t bytes) {
  for (const SizeChoice& row : table) {
    if (row.up_to_bytes == 0 || bytes <= row.up_to_bytes) return row.algorithm;
  }
  return table.back().algorithm;
}

namespace {

// With device flags: what the request names where it can run (the window request is two-shot),
// else by size.
Algorithm choose_device_flags(AlgoRequest request, const AlgoThresholds& thresholds,
                              PeerAccess access, std::size_t bytes) {
  const bool fits_one_shot = bytes <= access.device_area_bytes;
  if (request == AlgoRequest::one_shot && fits_one_shot) return Algorithm::one_shot;
  if (request == AlgoRequest::two_shot || request == AlgoRequest::window) {
    return Algorithm::two_shot;
  }
  return fits_one_shot && bytes <= thresholds.one_shot_max_bytes ? Algorithm::one_shot
                                                                 : Algorithm::two_shot;
}

Algorithm choose_for_device(AlgoRequest request, const AlgoThresholds& thresholds,
                            PeerAccess access, int world_size, std::size_t bytes) {
  if (request == AlgoRequest::recursive_doubling || request == AlgoRequest::direct ||
      request == AlgoRequest::bruck) {
    request = AlgoRequest::automatic;
  }
  const bool host_driven = request == AlgoRequest::ring || request == AlgoRequest::hierarchical ||
                           request == AlgoRequest::rabenseifner || request == AlgoRequest::tree;
  if (access.device_flags && !host_driven) {
    if (world_size == 1) return Algorithm::one_shot;  // a copy on the device
    if (access.device_windows) return choose_device_flags(request, thresholds, access, bytes);
  }
  if (request == AlgoRequest::one_shot || request == AlgoRequest::two_shot) {
    request = AlgoRequest::automatic;
  }
  const bool automatic = request == AlgoRequest::automatic;
  if (world_size > 1 && access.device_windows && (automatic || request == AlgoRequest::window)) {
    return Algorithm::window;
  }
  if (access.hosts && (automatic || request == AlgoRequest::hierarchical)) {
    return Algorithm::hierarchical;
  }
  if (world_size > 1 && request == AlgoRequest::rabenseifner) return Algorithm::rabenseifner;
  if (world_size > 1 && request == AlgoRequest::tree) return Algorithm::tree;
  return Algorithm::ring;
}

// A table's row where these ranks can run it: direct and window need each other's memory.
bool can_run_on_host(Algorithm algorithm, PeerAccess access) {
  if (algorithm == Algorithm::window) return access.windows;
  if (algorithm == Algorithm::direct) return access.peers_readable;
  return true;
}

}  // namespace

Algorithm choose_all_reduce(AlgoRequest request, const AlgoThresholds& thresholds,
                            PeerAccess access, int world_size, std::size_t bytes, Buffers buffers) {
  if (buffers == Buffers::device) {
    return choose_for_device(request, thresholds, access, world_size, bytes);
  }
  if (request == AlgoRequest::one_shot || request == AlgoRequest::two_shot ||
      request == AlgoRequest::bruck) {
    request = AlgoRequest::automatic;  // device algorithms, and an all-gather
  }
  const bool automatic = request == AlgoRequest::automatic;
  if (automatic && world_size > 1 && !thresholds.table.empty() &&
      !(thresholds.table_is_builtin && access.hosts)) {
    const Algorithm chosen = table_choice(thresholds.table, bytes);
    if (can_run_on_host(chosen, access)) return chosen;
  }
  if (automatic && world_size == 2 && access.windows && bytes <= thresholds.pair_rd_max_bytes) {
    return Algorithm::recursive_doubling;
  }
  if (world_size > 1 && access.windows &&
      (request == AlgoRequest::window || (automatic && bytes >= thresholds.window_min_bytes))) {
    return Algorithm::window;
  }
  if (world_size > 1 && request == AlgoRequest::rabenseifner) return Algorithm::rabenseifner;
  if (world_size > 1 && request == AlgoRequest::tree) return Algorithm::tree;
  if (request == AlgoRequest::recursive_doubling ||
      (automatic && bytes <= thresholds.rd_max_bytes)) {
    return Algorithm::recursive_doubling;
  }
  if (access.peers_readable &&
      (request == AlgoRequest::direct || (automatic && bytes >= thresholds.direct_min_bytes))) {
    return Algorithm::direct;
  }
  if (access.hosts && (request == AlgoRequest::hierarchical || automatic)) {
    return Algorithm::hierarchical;
  }
  return Algorithm::ring;
}

Algorithm choose_all_gather(AlgoRequest request, int world_size, Buffers /*buffers*/) {
  if (world_size == 1) return Algorithm::ring;
  if (request == AlgoRequest::bruck) return Algorithm::bruck;
  if (request == AlgoRequest::rabenseifner) return Algorithm::doubling;
  return Algorithm::ring;
}

Algorithm choose_reduce_scatter(AlgoRequest request, int world_size, Buffers /*buffers*/) {
  const bool halving = request == AlgoRequest::rabenseifner && world_size > 1;
  return halving ? Algorithm::halving : Algorithm::ring;
}

}  // namespace ringlet::collectives
