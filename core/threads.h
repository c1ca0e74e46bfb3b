// The CPU thread count used by ringlet's kernels (and handed to OpenBLAS by the tensor layer).
// One knob: RINGLET_NUM_THREADS, default all cores of the machine. parallel_for splits
// [0, n) into contiguous ranges run on up to num_threads() threads; it returns when all are
// done and rethrows the first exception a range threw.
#pragma once

#include <cstdint>
#include <functional>

namespace ringlet::core {

int num_threads();
void set_num_threads(int n);  // process-wide, like torch.set_num_threads

// Runs fn(begin, end) over ranges of at least `grain` items.
void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& fn);

}  // namespace ringlet::core
