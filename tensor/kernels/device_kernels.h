// The kernels a device (cuda, emu) offers the op layer, as one interface with two
// implementations compiled from the same source (device_kernels_impl.h): by nvcc for CUDA
// (tensor/cuda/device_kernels.cu) and by g++ for the emulated device (tensor/emu/kernels.cpp).
// Operands are Views (strided.h) already broadcast to the output's shape; every call queues
// its work on `stream` and returns. Dtypes follow the CPU kernels: arithmetic on f32/f64,
// integer-friendly ops on i64/i32/u8 too, copies between any two dtypes.
#pragma once

#include "core/device.h"
#include "tensor/kernels/elementwise.h"
#include "tensor/kernels/strided.h"

namespace ringlet::tensor::kernels {

using Stream = void*;  // the device's stream handle

class DeviceKernels {
 public:
  virtual ~DeviceKernels() = default;
  virtual void fill(const View& out, double value, Stream stream) = 0;
  // out = in, converting the dtype (f16/bf16 round to nearest even).
  virtual void copy(const View& out, const View& in, Stream stream) = 0;
  virtual void binary(BinaryOp op, const View& out, const View& a, const View& b,
                      Stream stream) = 0;
  virtual void unary(const UnaryParams& op, const View& out, const View& in, Stream stream) = 0;
  // grad_in = g * d op(x) / dx, with y = op(x).
  virtual void unary_backward(const UnaryParams& op, const View& grad_in, const View& g,
                              const View& x, const View& y, Stream stream) = 0;
  virtual void compare(CompareOp op, const View& out, const View& a, const View& b,
                       Stream stream) = 0;  // out is u8
  virtual void where(const View& out, const View& cond, const View& a, const View& b,
                     Stream stream) = 0;
  virtual void add_scaled(const View& out, const View& a, const View& b, double alpha,
                          Stream stream) = 0;
  // out = (sum of in over the dims where out has size 1 and in does not); out has
  // in's rank, divided by `divisor` (1 for a sum, the count for a mean). Accumulates in double
  // (floating) or i64 (integers, whose out is i64), in the input's row-major order, one thread per
  // output element.
  virtual void sum(const View& out, const View& in, double divisor, Stream stream) = 0;
};

// The kernels of a device kind (DeviceError for cpu; NotBuiltError for cuda without CUDA).
DeviceKernels& device_kernels(core::Device device);
// The two implementations (defined in their executors' libraries).
DeviceKernels& emu_kernels();
DeviceKernels& cuda_kernels();

}  // namespace ringlet::tensor::kernels
