// simulate(): one collective, run by its algorithm's own code (collectives/: the ring, the tree,
// recursive doubling, ...) on every rank of a simulated network (network.h) with no data in it
// (collectives/dry_run.h): how long it takes in virtual time under a profile. The same source
// that runs over tcp, shm and rdma, so what is simulated is what runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/algorithm_choice.h"
#include "model/network.h"
#include "model/profile.h"

namespace ringlet::model {

enum class Collective { all_reduce, all_gather, reduce_scatter };
const char* collective_name(Collective collective);
Collective parse_collective(const std::string& text);  // "all_reduce", ...; else a ValueError

struct SimCase {
  Collective collective = Collective::all_reduce;
  collectives::Algorithm algorithm = collectives::Algorithm::ring;
  NetworkShape shape;
  // float32 buffers: the all-reduce's buffer; the all-gather's output and the reduce-scatter's
  // input (every rank's block), as nccl-tests counts them. Rounded up to whole elements (and
  // for those two, to a whole block per rank).
  std::size_t bytes = 0;
  // All-reduce: the result written over the input (nccl-tests' in-place column), or into another
  // buffer (out of place: the reductions that first meet the input read it there). The other
  // collectives run their algorithm on one buffer either way.
  bool in_place = true;
};

struct SimResult {
  double seconds = 0;     // virtual: from the start to the last rank's return
  std::size_t bytes = 0;  // the size simulated (SimCase::bytes rounded up)
  std::uint64_t messages = 0;
  std::uint64_t bytes_sent = 0;  // over all ranks
  // Over all ranks: how many times a core passed from one rank to another that waited for it,
  // where a host's ranks outnumber its cores (0 where each has one).
  std::uint64_t turns_passed = 0;
  double wall_seconds = 0;  // the real time the simulation took
};

// The algorithms the simulator runs for a collective on any network: every host algorithm of
// it that only sends messages (not the hierarchical all-reduce, which needs a second thread).
std::vector<collectives::Algorithm> simulated_algorithms(Collective collective);
// Those, and for an all-reduce of ranks on one host whose CPUs copy (shared memory: the
// profile's intra link `copies`), the two that read each other's memory: cross-memory attach
// (direct) and the shared windows (window, of collectives::default_window_bytes).
std::vector<collectives::Algorithm> simulated_algorithms(Collective collective,
                                                         const NetworkShape& shape,
                                                         const Profile& profile);

// nccl-tests' bus bandwidth in GB/s: size / time x 2(n - 1)/n for an all-reduce, (n - 1)/n for
// the other two.
double bus_bandwidth_GBps(Collective collective, int ranks, std::size_t bytes, double seconds);

SimResult simulate(const SimCase& sim_case, const Profile& profile);

}  // namespace ringlet::model
