// The lines of a buffer another core's cache holds, as the shm window's ranks share them: two
// threads on two CPUs take turns, one writing the buffer (each line the other read last turn), the
// other reading it (each line the first just wrote). `ringlet model fit` measures these rates
// (Profile::shared_write_GBps, shared_read_GBps, shared_write_past_GBps).
#pragma once

#include <cstddef>

namespace ringlet::model {

struct SharedRates {
  double write_GBps = 0, read_GBps = 0;
};

// Each side's GB/s over `turns` turns with a buffer of `bytes`, both with the window's copy
// (core::copy): the medians of the turns; 0 with fewer than two CPUs, or when a turn is not taken
// within a second.
SharedRates shared_lines(std::size_t bytes, int turns);

}  // namespace ringlet::model
