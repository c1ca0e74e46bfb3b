// CoreTurns: which of a host's ranks runs on which of its cores, where the host has more ranks
// than cores. A rank holds a core from when it computes until it waits for a message (it runs to
// block, as an operating system runs a process whose work is shorter than its time slice); a
// rank that needs a core while all are held queues for one and gets the first one freed (first
// come, first served; the scheduler moves a runnable process to a core gone idle). A rank that
// takes a free core takes the one it last ran on where that one is free.
//
// Without turns, every rank's work went on its own core's calendar piece by piece, so the ranks
// sharing a core interleaved at the grain of their operations: a rank's send waited for its
// neighbours' unrelated work, and at 8 ranks on 2 cores the ring's simulated cores stood idle a
// third of the time (bench/RESULTS.md, 2026-12-05 "Turns").
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

namespace ringlet::model {

class CoreTurns {
 public:
  // `ranks` ranks (0 .. ranks - 1, the host's own numbering) on `cores` cores; rank r starts on
  // core r mod cores.
  CoreTurns(int ranks, int cores);

  // The core the rank holds, or the one it last held (where it started, before any).
  int core_of(int rank) const { return core_[index(rank, core_.size())]; }
  bool holds(int rank) const { return held_by(core_of(rank)) == rank; }
  // The rank holds a core after this where it returns true: it held one, or took a free one. It
  // returns false where every core is held: the rank is queued, and release() hands it one.
  bool take(int rank);
  // The rank gives its core up (nothing where it holds none). The rank queued first gets it:
  // that rank, now holding the core, or -1 where none is queued.
  int release(int rank);
  // How many times a core passed straight from one rank to a queued one: the switches between
  // runnable ranks an operating system counts as involuntary (bench/placed_ranks.sh counts them).
  std::uint64_t turns_passed() const { return passed_; }

 private:
  int cores() const { return static_cast<int>(held_by_.size()); }
  int held_by(int core) const { return held_by_[index(core, held_by_.size())]; }
  static std::size_t index(int i, std::size_t count);
  void hand(int core, int rank);

  std::vector<int> core_;     // per rank: the core it holds or last held
  std::vector<int> held_by_;  // per core: the rank holding it, -1 where free
  std::deque<int> queue_;     // ranks waiting for a core, first come first
  std::uint64_t passed_ = 0;
};

}  // namespace ringlet::model
