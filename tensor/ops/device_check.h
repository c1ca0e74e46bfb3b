// The one device check every CPU-only op makes before dispatching: CUDA kernels arrive through
// the same dispatch later, until then a device tensor is a DeviceError naming the op.
#pragma once

#include "tensor/tensor.h"

namespace ringlet::tensor {

inline void require_cpu(const Tensor& t, const char* op) {
  RINGLET_CHECK(t.device().is_cpu(), DeviceError, "'", op, "' has no CUDA kernel yet (tensor on ",
                t.device(), ")");
}

}  // namespace ringlet::tensor
