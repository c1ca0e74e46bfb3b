// The device kernels on a CUDA GPU: KernelsImpl over an executor that launches a grid-stride
// kernel running f(i) for every index, on the given stream, and GEMM through cuBLAS (one
// handle per device, pointed at the stream of each call).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>

#include "core/cuda_plugin.h"
#include "device/counters.h"
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

// Whether the calling thread allows tensor cores (tensor/math_mode.h's tensor_cores_allowed):
// the function the program passed to ringlet_cuda_kernels, so that the plugin binds to no
// function of the tensor layer (programs without it load the plugin too).
bool (*tensor_cores_allowed)() = nullptr;

// One handle per device; callers hold cublas_mutex() from cublasSetStream to the GEMM, since a
// handle's stream is shared state.
std::mutex& cublas_mutex() {
  static std::mutex mutex;
  return mutex;
}

// Each handle's workspace, allocated with the handle: cublasSetStream resets a handle to the
// library's default pool, whose memory a graph capture cannot allocate, so every call sets this
// one again (as PyTorch does).
constexpr std::size_t kCublasWorkspaceBytes = std::size_t{32} << 20;
struct CublasHandle {
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;
};

// The device's handle, pointed at `stream` with its workspace (with cublas_mutex() held).
cublasHandle_t cublas_handle(cudaStream_t stream) {
  int device = 0;
  cudaGetDevice(&device);
  static CublasHandle handles[16] = {};
  CublasHandle& h = handles[device];
  if (h.handle == nullptr) {
    const cublasStatus_t status = cublasCreate(&h.handle);
    if (status != CUBLAS_STATUS_SUCCESS)
      RINGLET_THROW(DeviceError, "cublasCreate failed on cuda:", device, " (status ",
                    static_cast<int>(status), ")");
    if (cudaMalloc(&h.workspace, kCublasWorkspaceBytes) != cudaSuccess) {
      cudaGetLastError();
      RINGLET_THROW(OutOfMemoryError, "cuda:", device, ": no room for cuBLAS's workspace");
    }
  }
  // Tensor cores (TF32) when the thread allows them (tensor/math_mode.h), else plain f32.
  const cublasMath_t math =
      tensor_cores_allowed != nullptr && tensor_cores_allowed() ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                : CUBLAS_DEFAULT_MATH;
  if (cublasSetStream(h.handle, stream) != CUBLAS_STATUS_SUCCESS ||
      cublasSetWorkspace(h.handle, h.workspace, kCublasWorkspaceBytes) != CUBLAS_STATUS_SUCCESS ||
      cublasSetMathMode(h.handle, math) != CUBLAS_STATUS_SUCCESS) {
    RINGLET_THROW(DeviceError,
                  "cuBLAS: setting the stream, workspace and math mode failed on "
                  "cuda:",
                  device);
  }
  return h.handle;
}

// One stream operation on the thread's current device (ops make their device current first).
void count_launch() {
  int device = 0;
  cudaGetDevice(&device);
  device::count_stream_ops(core::Device::cuda(device));
}

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    RINGLET_THROW(DeviceError, what, " failed (cuBLAS status ", static_cast<int>(status), ")");
}

struct CudaExec {
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  template <class T>
  static void gemm(Stream stream, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                   std::int64_t k, const T* a, std::int64_t lda, const T* b, std::int64_t ldb,
                   T beta, T* c, std::int64_t ldc) {
    count_launch();
    std::lock_guard lock(cublas_mutex());
    cublasHandle_t handle = cublas_handle(static_cast<cudaStream_t>(stream));
    const T alpha = 1;
    const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const auto M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k);
    if constexpr (std::is_same_v<T, float>) {
      check_cublas(cublasSgemm(handle, op_b, op_a, N, M, K, &alpha, b, static_cast<int>(ldb), a,
                               static_cast<int>(lda), &beta, c, static_cast<int>(ldc)),
                   "cublasSgemm");
    } else if constexpr (std::is_same_v<T, double>) {
      check_cublas(cublasDgemm(handle, op_b, op_a, N, M, K, &alpha, b, static_cast<int>(ldb), a,
                               static_cast<int>(lda), &beta, c, static_cast<int>(ldc)),
                   "cublasDgemm");
    } else {
      RINGLET_THROW(DTypeError, "matmul on a GPU takes f32 or f64");
    }
  }

  // The batch as one cuBLAS call (strided batched GEMM), with the same operand swap.
  template <class T>
  static void gemm_batched(Stream stream, bool trans_a, bool trans_b, std::int64_t m,
                           std::int64_t n, std::int64_t k, const T* a, std::int64_t lda,
                           std::int64_t stride_a, const T* b, std::int64_t ldb,
                           std::int64_t stride_b, T beta, T* c, std::int64_t ldc,
                           std::int64_t stride_c, std::int64_t batch) {
    count_launch();
    std::lock_guard lock(cublas_mutex());
    cublasHandle_t handle = cublas_handle(static_cast<cudaStream_t>(stream));
    const T alpha = 1;
    const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const auto M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k);
    const auto count = static_cast<int>(batch);
    if constexpr (std::is_same_v<T, float>) {
      check_cublas(
          cublasSgemmStridedBatched(handle, op_b, op_a, N, M, K, &alpha, b, static_cast<int>(ldb),
                                    stride_b, a, static_cast<int>(lda), stride_a, &beta, c,
                                    static_cast<int>(ldc), stride_c, count),
          "cublasSgemmStridedBatched");
    } else if constexpr (std::is_same_v<T, double>) {
      check_cublas(
          cublasDgemmStridedBatched(handle, op_b, op_a, N, M, K, &alpha, b, static_cast<int>(ldb),
                                    stride_b, a, static_cast<int>(lda), stride_a, &beta, c,
                                    static_cast<int>(ldc), stride_c, count),
          "cublasDgemmStridedBatched");
    } else {
      RINGLET_THROW(DTypeError, "matmul on a GPU takes f32 or f64");
    }
  }

  template <class F>
  static void launch(Stream stream, std::int64_t n, const F& f) {
    count_launch();
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

// The plugin's entry point (core/cuda_plugin.h); tensor/cuda/plugin_calls.cpp calls it.
RINGLET_CUDA_PLUGIN_EXPORT ringlet::tensor::kernels::DeviceKernels* ringlet_cuda_kernels(
    bool (*tensor_cores_allowed)()) {
  ringlet::tensor::kernels::tensor_cores_allowed = tensor_cores_allowed;
  return &ringlet::tensor::kernels::cuda_kernels();
}
