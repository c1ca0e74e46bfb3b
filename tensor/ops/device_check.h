// The one device check every op without a device kernel makes before dispatching: a tensor on
// cuda or emu is a DeviceError naming the op (device kernels arrive through the same dispatch
// as the other ops', tensor/ops/device_dispatch.h).
#pragma once

#include "tensor/tensor.h"

namespace ringlet::tensor {

inline void require_cpu(const Tensor& t, const char* op) {
  RINGLET_CHECK(t.device().is_cpu(), DeviceError, "'", op, "' has no device kernel yet (tensor on ",
                t.device(), ")");
}

}  // namespace ringlet::tensor
