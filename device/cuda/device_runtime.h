// The CUDA device runtime (device::Runtime over cudart): streams are non-blocking
// cudaStream_t, events cudaEvent_t without timing, copies cudaMemcpyAsync with unified
// addressing, pinned memory cudaHostAlloc. Host waits poll with the device deadline. Plain C++:
// no CUDA headers here, so host code compiles without the toolkit. Built without CUDA,
// built_with_cuda() is false and the rest throws NotBuiltError.
#pragma once

#include "device/runtime.h"

namespace ringlet::device::cuda {

bool built_with_cuda();
// The GPUs visible: 0 when CUDA is built in but no usable GPU or driver is present.
int device_count();
device::Runtime& device_runtime(int index);

}  // namespace ringlet::device::cuda
