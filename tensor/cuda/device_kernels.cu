// The device kernels on a CUDA GPU: KernelsImpl over an executor that launches a grid-stride
// kernel running f(i) for every index, on the given stream.
#include <cuda_runtime.h>

#include <algorithm>

#include "tensor/kernels/device_kernels_impl.h"

namespace ringlet::tensor::kernels {
namespace {

template <class F>
__global__ void grid_stride(F f, std::int64_t n) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step) {
    f(i);
  }
}

struct CudaExec {
  template <class F>
  static void launch(Stream stream, std::int64_t n, const F& f) {
    constexpr unsigned kThreads = 256;
    const auto blocks = static_cast<unsigned>(
        std::min<std::int64_t>((n + kThreads - 1) / kThreads, std::int64_t{1} << 20));
    grid_stride<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(f, n);
    const cudaError_t status = cudaGetLastError();
    if (status != cudaSuccess)
      RINGLET_THROW(DeviceError, "CUDA kernel launch failed: ", cudaGetErrorString(status));
  }
};

}  // namespace

DeviceKernels& cuda_kernels() {
  static KernelsImpl<CudaExec> kernels;
  return kernels;
}

}  // namespace ringlet::tensor::kernels
