// The op layer's bridge to the device kernels (tensor/kernels/device_kernels.h): a Tensor as a
// kernel View (optionally broadcast to an iteration shape), the kernels of its device, the
// stream its kernels queue on (the thread's current stream of that device), and the check
// that every operand of an op lives on one device.
#pragma once

#include <initializer_list>

#include "tensor/kernels/device_kernels.h"
#include "tensor/tensor.h"

namespace ringlet::tensor {

kernels::View kernel_view(const Tensor& t);
// `t` broadcast to `shape` (stride 0 on broadcast dims); the shapes must be compatible.
kernels::View kernel_view(const Tensor& t, const Shape& shape);
kernels::DeviceKernels& kernels_for(Device device);
kernels::Stream stream_for(Device device);

// The one device of an op's operands; a DeviceError naming the op and both devices if they
// differ (as PyTorch: "Expected all tensors to be on the same device").
Device same_device(std::initializer_list<const Tensor*> operands, const char* op);

}  // namespace ringlet::tensor
