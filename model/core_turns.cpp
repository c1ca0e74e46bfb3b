// CoreTurns: a host's ranks taking turns on its cores (core_turns.h).
#include "model/core_turns.h"

#include <algorithm>

#include "core/error.h"

namespace ringlet::model {

CoreTurns::CoreTurns(int ranks, int cores) {
  RINGLET_CHECK(ranks >= 1 && cores >= 1, Error, "core turns: ", ranks, " ranks on ", cores,
                " cores: needs at least one of each");
  for (int r = 0; r < ranks; ++r) core_.push_back(r % cores);
  held_by_.assign(static_cast<std::size_t>(cores), -1);
}

std::size_t CoreTurns::index(int i, std::size_t count) {
  RINGLET_CHECK(i >= 0 && static_cast<std::size_t>(i) < count, Error, "core turns: ", i,
                " is not one of the ", count);
  return static_cast<std::size_t>(i);
}

bool CoreTurns::take(int rank) {
  if (holds(rank)) return true;
  RINGLET_CHECK(std::find(queue_.begin(), queue_.end(), rank) == queue_.end(), Error,
                "core turns: rank ", rank, " queued twice");
  int core = held_by(core_of(rank)) < 0 ? core_of(rank) : -1;
  for (int c = 0; core < 0 && c < cores(); ++c) {
    if (held_by(c) < 0) core = c;
  }
  if (core < 0) {
    queue_.push_back(rank);
    return false;
  }
  hand(core, rank);
  return true;
}

int CoreTurns::release(int rank) {
  if (!holds(rank)) return -1;
  const int core = core_of(rank);
  held_by_[index(core, held_by_.size())] = -1;
  if (queue_.empty()) return -1;
  const int next = queue_.front();
  queue_.pop_front();
  hand(core, next);
  ++passed_;
  return next;
}

void CoreTurns::hand(int core, int rank) {
  held_by_[index(core, held_by_.size())] = rank;
  core_[index(rank, core_.size())] = core;
}

}  // namespace ringlet::model
