// Which algorithm runs an all-reduce: a pure function of what was asked for, the message size,
// the world size and what the ranks can do with each other's memory (tests/test_algorithm_choice
// checks it as a table). Every rank computes the same answer from the same inputs: the
// capabilities are agreed through the store when the communicator connects.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ringlet::collectives {

enum class Algorithm {
  ring,
  recursive_doubling,
  rabenseifner,
  tree,
  direct,
  window,
  hierarchical,
  one_shot,
  two_shot,
  bruck,     // an all-gather
  halving,   // a reduce-scatter (RINGLET_ALGO=rabenseifner)
  doubling,  // an all-gather (RINGLET_ALGO=rabenseifner)
};
// What the user asked for (RINGLET_ALGO / CommOptions::algo).
enum class AlgoRequest {
  automatic,
  ring,
  recursive_doubling,
  rabenseifner,
  tree,
  direct,
  window,
  hierarchical,
  one_shot,
  two_shot,
  bruck
};

// "ring", "rd", "rabenseifner", "tree", "direct", "window", "hierarchical", "one_shot",
// "two_shot", "bruck", "halving", "doubling"
const char* algorithm_name(Algorithm algorithm);
bool is_algorithm_name(const std::string& name);  // one of the names above
// Whether `automatic` picks the algorithm on its own: every one but Rabenseifner's and the double
// binary tree, which run where asked for or where a table names them (a model's tables do only
// when made with them: `ringlet model table --algorithms`; the model priced them 0.6-0.8 of their
// measured time past 1 MiB at 3-4 ranks on 2 cores, bench/RESULTS.md 2026-12-02 "auto from the
// model", and the tree 1.2-1.6x at 64 MiB on 4-8 ranks once shm readers stopped holding their
// cores, 2026-12-06 "A message whole").
bool automatic_picks(Algorithm algorithm);
// Whether an op's fingerprint travels in a message of its own to each ring neighbour
// (FingerprintExchange, fingerprint.h), as the rings check it (ring, hierarchical); every other
// algorithm carries it in its own messages.
bool checks_fingerprint_apart(Algorithm algorithm);
// "auto" or an algorithm's name; a ValueError naming `source` and the choices.
AlgoRequest parse_algo_request(const std::string& text, const std::string& source);

// A cost model's choice of the host all-reduce by size, for one world size (algorithm_table.h
// reads it from a file): the first row whose up_to_bytes holds the size (0: any), the last row
// above them all.
struct SizeChoice {
  std::size_t up_to_bytes = 0;
  Algorithm algorithm = Algorithm::ring;
};
using AlgorithmTable = std::vector<SizeChoice>;
Algorithm table_choice(const AlgorithmTable& table, std::size_t bytes);  // table not empty

// Where `automatic` switches, in bytes per rank. Measured with all_reduce_perf on 2 cores (see
// algorithm_choice.cpp), or a model's table.
struct AlgoThresholds {
  std::size_t rd_max_bytes;        // recursive doubling up to this
  std::size_t direct_min_bytes;    // cross-memory attach from this
  std::size_t window_min_bytes;    // shared windows from this
  std::size_t one_shot_max_bytes;  // device buffers with device flags: one-shot up to this
  AlgorithmTable table;            // host buffers: when set, `automatic` takes its row instead
  bool table_is_builtin = false;   // the model's built-in table (one host): not across hosts
  // Two ranks with shared windows: recursive doubling up to this, before the windows (0: no).
  std::size_t pair_rd_max_bytes = 0;
};
AlgoThresholds default_thresholds();

// What every rank of the communicator can do (agreed through the store).
struct PeerAccess {
  bool peers_readable = false;  // every pair can read each other's memory (shm with CMA)
  bool windows = false;         // every rank mapped every other rank's shared window
  bool hosts = false;           // several hosts, the same number (>= 2) of ranks on each
  bool device_windows = false;  // device buffers: every rank opened every rank's device window
  bool device_flags = false;    // ... and they synchronize through flags in them (no host)
  std::size_t device_area_bytes = 0;  // with device flags: each window's staged area
};

// Where the buffers live: host memory, or a device's (reached through a BufferSpace).
enum class Buffers { host, device };

// The algorithm of an all-reduce of `bytes` per rank.
// Host buffers: the model's table where there is one (the algorithms it simulates: ring, rd,
// rabenseifner, tree, and direct and window where the ranks can run them; the built-in table not
// for ranks on several hosts, which it does not describe); else, for two ranks with shared
// windows, recursive doubling up to pair_rd_max_bytes; else shared windows when the ranks have
// them, from window_min_bytes;
// else recursive doubling up to rd_max_bytes, then cross-memory attach from direct_min_bytes where
// the ranks can read each other's memory, the hierarchical all-reduce where the ranks are on
// several hosts (access.hosts), and the ring in between and everywhere else. Device buffers: where
// the ranks synchronize through device flags (device_collectives.h), one-shot up to
// one_shot_max_bytes (and what the staged area holds), two-shot above (a request for the window
// gets two-shot, the window protocol with device flags; a request for the ring or the hierarchical
// all-reduce runs that algorithm, host-driven, on such a space too, and the space's other
// collectives stay on the device; one rank copies on the device, one-shot); else the host-driven
// device windows where the ranks opened them, else the hierarchical all-reduce on several hosts,
// else the ring (both staged through the host). Recursive doubling and cross-memory attach are host
// algorithms, and one-shot and two-shot device ones: a request for one where it cannot run counts
// as automatic. Rabenseifner's (recursive halving, then doubling) and the double binary tree run
// only when asked for, host-driven; on device buffers staged whole through pinned host memory. An
// explicit request wins where its algorithm can run, else the ring. Bruck's is an all-gather: a
// request for it counts as automatic.
Algorithm choose_all_reduce(AlgoRequest request, const AlgoThresholds& thresholds,
                            PeerAccess access, int world_size, std::size_t bytes,
                            Buffers buffers = Buffers::host);

// The algorithm of an all-gather: with two ranks or more, Bruck's where asked for, recursive
// doubling where Rabenseifner's is (its all-gather half); else the ring. On device buffers both
// run host-driven, staged whole through pinned host memory (where the ranks synchronize through
// device flags, the device runs the all-gather, whatever this says).
Algorithm choose_all_gather(AlgoRequest request, int world_size, Buffers buffers);
// The algorithm of a reduce-scatter: recursive halving where Rabenseifner's is asked for (its
// reduce-scatter half; two ranks or more; staged on device buffers, as above), else the ring.
Algorithm choose_reduce_scatter(AlgoRequest request, int world_size, Buffers buffers);

}  // namespace ringlet::collectives
