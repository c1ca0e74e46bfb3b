// CUDA implementation of tensor/cuda/runtime.h. Every runtime call goes through check(),
// which records the call site. No CUDA device (or no driver) is reported as 0 devices.
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "tensor/cuda/runtime.h"

namespace ringlet::tensor::cuda {
namespace {

void check(cudaError_t status, const char* what, const char* file, int line) {
  if (status != cudaSuccess) {
    cudaGetLastError();  // reported here, not again at the next launch check
    throw std::runtime_error(std::string("CUDA error in ") + what + ": " +
                             cudaGetErrorString(status) + " [" + file + ":" + std::to_string(line) +
                             "]");
  }
}
#define RINGLET_CUDA_CHECK(call) check((call), #call, __FILE__, __LINE__)

__global__ void add_f32_kernel(float* out, const float* a, const float* b, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[i] = a[i] + b[i];
  }
}

}  // namespace

bool built_with_cuda() { return true; }

int device_count() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver) {
    cudaGetLastError();  // clear the sticky error
    return 0;
  }
  RINGLET_CUDA_CHECK(status);
  return count;
}

void* device_malloc(std::size_t bytes, int device) {
  RINGLET_CUDA_CHECK(cudaSetDevice(device));
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, bytes);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear it: out of memory is an answer here, not a broken context
    return nullptr;
  }
  RINGLET_CUDA_CHECK(status);
  return ptr;
}

void device_free(void* ptr, int device) {
  RINGLET_CUDA_CHECK(cudaSetDevice(device));
  RINGLET_CUDA_CHECK(cudaFree(ptr));
}

void copy_host_to_device(void* dst, const void* src, std::size_t bytes, int device) {
  RINGLET_CUDA_CHECK(cudaSetDevice(device));
  RINGLET_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

void copy_device_to_host(void* dst, const void* src, std::size_t bytes, int device) {
  RINGLET_CUDA_CHECK(cudaSetDevice(device));
  RINGLET_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

void copy_device_to_device(void* dst, const void* src, std::size_t bytes, int device) {
  RINGLET_CUDA_CHECK(cudaSetDevice(device));
  RINGLET_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}

void synchronize(int device) {
  RINGLET_CUDA_CHECK(cudaSetDevice(device));
  RINGLET_CUDA_CHECK(cudaDeviceSynchronize());
}

void add_f32(float* out, const float* a, const float* b, std::size_t n, int device) {
  RINGLET_CUDA_CHECK(cudaSetDevice(device));
  if (n == 0) return;
  const unsigned threads = 256;
  const unsigned blocks =
      static_cast<unsigned>(std::min<std::size_t>((n + threads - 1) / threads, 65535));
  add_f32_kernel<<<blocks, threads>>>(out, a, b, n);
  RINGLET_CUDA_CHECK(cudaGetLastError());
  RINGLET_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace ringlet::tensor::cuda
