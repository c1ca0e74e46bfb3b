// The reductions a device space queues on a device's stream, one table per kind of device (as
// tensor's KernelsImpl<Exec>: one algorithm source, two executors): on a GPU the CUDA kernels
// (collectives/cuda/reduce.h); on the emulated device the host reduction kernels
// (reduce_kernels.h) as tasks of the stream's own thread, bit for bit what the CUDA kernels
// compute. Each counts the stream operations it queues (device/counters.h).
#pragma once

#include <cstddef>

#include "collectives/types.h"
#include "core/device.h"
#include "device/runtime.h"

namespace ringlet::collectives {

struct DeviceReduce {
  // dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[sources-1][i], in that order; dst may be
  // srcs[0] and no other source. avg is refused (sum, then divide_by).
  void (*reduce_many)(void* dst, const void* const* srcs, int sources, std::size_t count,
                      DType dtype, ReduceOp op, core::Device device, device::StreamHandle stream);
  // data[i] /= divisor (integers: truncating division).
  void (*divide_by)(void* data, std::size_t count, DType dtype, int divisor, core::Device device,
                    device::StreamHandle stream);
};

// The table of `device`'s kind (emu or cuda); a ValueError for the host.
const DeviceReduce& device_reduce(core::Device device);

}  // namespace ringlet::collectives
