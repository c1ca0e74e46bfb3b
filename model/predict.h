// Predictor: the simulated times of one collective on one network shape under one profile, for
// each algorithm and size asked (each simulated once, then remembered), and what follows from
// them: the fastest algorithm at a size, the fastest over a range of sizes (where it changes),
// and where one algorithm stops beating another.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "collectives/algorithm_choice.h"
#include "model/simulate.h"

namespace ringlet::model {

struct Prediction {
  collectives::Algorithm algorithm;
  SimResult result;
  double bus_GBps = 0;
};

// A range of sizes [first, last] (powers of two) with the algorithm fastest at its ends.
struct SizeRange {
  std::size_t first = 0, last = 0;
  collectives::Algorithm fastest;
};

class Predictor {
 public:
  // algorithms {}: every simulated one; in_place: SimCase's.
  Predictor(Collective collective, NetworkShape shape, Profile profile,
            std::vector<collectives::Algorithm> algorithms = {}, bool in_place = true);

  const Prediction& at(collectives::Algorithm algorithm, std::size_t bytes);
  std::vector<Prediction> all(std::size_t bytes);  // in the order of algorithms()
  collectives::Algorithm fastest(std::size_t bytes);
  // The fastest at every power of two from `low` to `high` (simulated side by side on the
  // machine's cores), as ranges of neighbouring sizes with the same fastest.
  std::vector<SizeRange> fastest_by_size(std::size_t low, std::size_t high);
  // The smallest power of two in [low, high] at which `b` is faster than `a`, where `a` is
  // faster at `low` and `b` at `high` (bisection); nullopt otherwise.
  std::optional<std::size_t> crossover(collectives::Algorithm a, collectives::Algorithm b,
                                       std::size_t low, std::size_t high);
  // fastest_by_size as the communicator's table (collectives/algorithm_table.h): each range's
  // fastest up to its last size, the last one for every size above.
  collectives::AlgorithmTable table(std::size_t low, std::size_t high);

  const std::vector<collectives::Algorithm>& algorithms() const { return algorithms_; }
  int ranks() const { return shape_.ranks; }
  double wall_seconds() const { return wall_seconds_; }  // all simulations so far

 private:
  double bound(collectives::Algorithm algorithm, std::size_t bytes) const;
  bool faster(collectives::Algorithm b, collectives::Algorithm a, std::size_t bytes);

  Collective collective_;
  NetworkShape shape_;
  Profile profile_;
  std::vector<collectives::Algorithm> algorithms_;
  bool in_place_;
  std::mutex mutex_;  // guards done_ and wall_seconds_
  std::map<std::pair<collectives::Algorithm, std::size_t>, Prediction> done_;
  double wall_seconds_ = 0;  // of the simulations, added up (more than the sweep's wall time
                             // where they ran side by side)
};

// The algorithms an all-reduce table chooses among unless told otherwise: those the simulator
// runs on this network that the communicator's `auto` picks on its own
// (collectives::automatic_picks).
std::vector<collectives::Algorithm> table_algorithms(const NetworkShape& shape,
                                                     const Profile& profile);

// A lower bound of the ring's time at `bytes` (float32): its longest chain of steps at the
// links' latency and bandwidth, without the waits for cores, NICs and wake-ups.
double ring_chain_seconds(Collective collective, const NetworkShape& shape, const Profile& profile,
                          std::size_t bytes);

// 1536 -> "1.5 KiB", 8 -> "8 B", 4 MiB -> "4 MiB" (collectives' bytes_text writes "4.0 MiB").
std::string size_text(std::size_t bytes);

}  // namespace ringlet::model
