// Linked instead of the CUDA kernels themselves when ringlet is built with CUDA: each call goes
// to the plugin (core/cuda_plugin.h), loaded on first use; without one, they throw DeviceError
// saying why.
#include "collectives/cuda/reduce.h"
#include "core/cuda_plugin.h"

namespace ringlet::collectives::cuda {

void reduce_into(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op,
                 int device, void* stream) {
  using Fn = void(void*, const void*, std::size_t, DType, ReduceOp, int, void*);
  static auto* const fn = core::cuda_plugin_function<Fn>("ringlet_cuda_reduce_into");
  fn(dst, src, count, dtype, op, device, stream);
}

int reduce_many(void* dst, const void* const* srcs, int sources, std::size_t count, DType dtype,
                ReduceOp op, int device, void* stream) {
  using Fn = int(void*, const void* const*, int, std::size_t, DType, ReduceOp, int, void*);
  static auto* const fn = core::cuda_plugin_function<Fn>("ringlet_cuda_reduce_many");
  return fn(dst, srcs, sources, count, dtype, op, device, stream);
}

void divide_by(void* data, std::size_t count, DType dtype, int divisor, int device, void* stream) {
  using Fn = void(void*, std::size_t, DType, int, int, void*);
  static auto* const fn = core::cuda_plugin_function<Fn>("ringlet_cuda_divide_by");
  fn(data, count, dtype, divisor, device, stream);
}

}  // namespace ringlet::collectives::cuda
