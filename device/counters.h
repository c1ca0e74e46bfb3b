// What each device's runtime did, counted per device (cuda:N and emu:N by the same code paths,
// so a test on the emulated device sees the counts a GPU would):
// - stream operations: work queued on a stream: kernels, library calls (GEMM), copies, host
//   functions, stream memory operations, graph launches. Event records and waits are markers
//   and are not counted.
// - host synchronizations: the host blocked until the device got somewhere: a stream, event or
//   device synchronize, a blocking device-to-host read, a free that waits for the device.
// - driver allocations: device memory or pinned host memory taken from the driver (the caching
//   allocators' misses).
// The counts only grow; a step's cost is the difference of two snapshots.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace ringlet::device {

struct DeviceCounts {
  std::uint64_t stream_ops = 0;
  std::uint64_t host_syncs = 0;
  std::uint64_t driver_allocs = 0;
  DeviceCounts operator-(const DeviceCounts& before) const {
    return {stream_ops - before.stream_ops, host_syncs - before.host_syncs,
            driver_allocs - before.driver_allocs};
  }
};

// A snapshot of `device`'s counts (zeros for the host).
DeviceCounts device_counts(core::Device device);

void count_stream_ops(core::Device device, std::uint64_t n = 1);
void count_host_sync(core::Device device);
void count_driver_alloc(core::Device device);

}  // namespace ringlet::device
