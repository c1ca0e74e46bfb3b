// What the ranks of a communicator can do with each other's memory, agreed through the store when
// it connects so that every rank chooses the same algorithms: whether every pair can read each
// other's memory (cross-memory attach: the direct algorithm), and shared windows (every rank maps
// every other rank's window: the window algorithm). Each rank publishes its own answer and reads
// everyone's.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/deadline.h"
#include "transport/shm/window.h"
#include "transport/store.h"

namespace ringlet::collectives {

// Whether every rank said yes: publishes `mine` under key + rank and reads every other rank's.
bool all_ranks_agree(transport::Store& store, const std::string& key, int rank, int size, bool mine,
                     core::Deadline deadline);

// This rank's window and its peers' as mapped here; `mapped` is empty when some rank could not
// create or map one (every rank then has none).
struct SharedWindows {
  std::vector<transport::SharedWindow> owned;  // this rank's own first, then its peers'
  std::vector<std::byte*> mapped;              // mapped[p]: rank p's window, for ChannelContext
  std::size_t bytes = 0;
};

// Creates this rank's window of `bytes`, publishes its address under `key`, maps every peer's
// and agrees with every rank on whether all could. A rank that cannot logs why.
SharedWindows setup_shared_windows(transport::Store& store, const std::string& key, int rank,
                                   int size, std::size_t bytes, core::Deadline deadline);

}  // namespace ringlet::collectives
