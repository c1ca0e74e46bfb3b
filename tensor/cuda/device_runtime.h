// The CUDA device runtime (device::Runtime over cudart): streams are non-blocking
// cudaStream_t, events cudaEvent_t without timing, copies cudaMemcpyAsync with unified
// addressing, pinned memory cudaHostAlloc. Host waits poll with the device deadline. Built
// without CUDA, device_runtime() throws NotBuiltError.
#pragma once

#include "tensor/device/runtime.h"

namespace ringlet::tensor::cuda {

device::Runtime& device_runtime(int index);

}  // namespace ringlet::tensor::cuda
