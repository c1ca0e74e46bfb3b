// Device reduction kernels. One instance per (element type, op). Where both pointers are
// 16-byte aligned, each thread moves whole 16-byte vectors (4 floats, 8 halves): the loads and
// stores are as wide as the memory system's, which is what a bandwidth-bound kernel needs;
// the remaining elements (and unaligned buffers) go through the element-wise kernel. A
// grid-stride loop over at most 8 blocks per SM covers any count.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "collectives/cuda/reduce.h"
#include "core/cuda_plugin.h"

namespace ringlet::collectives::cuda {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    cudaGetLastError();  // reported here, not again at the next launch check
    throw std::runtime_error(std::string("CUDA error in ") + what + ": " +
                             cudaGetErrorString(status));
  }
}

// Storage tags for the 16-bit floats: the bits travel as unsigned short.
struct F16 {
  unsigned short bits;
};
struct BF16 {
  unsigned short bits;
};

template <class T>
struct Widen {  // native types combine as themselves
  using type = T;
  __device__ static T load(T v) { return v; }
  __device__ static T store(T v) { return v; }
};
template <>
struct Widen<F16> {
  using type = float;
  __device__ static float load(F16 v) { return __half2float(__ushort_as_half(v.bits)); }
  __device__ static F16 store(float v) { return F16{__half_as_ushort(__float2half_rn(v))}; }
};
template <>
struct Widen<BF16> {
  using type = float;
  __device__ static float load(BF16 v) { return __bfloat162float(__ushort_as_bfloat16(v.bits)); }
  __device__ static BF16 store(float v) {
    return BF16{__bfloat16_as_ushort(__float2bfloat16_rn(v))};
  }
};

struct Sum {
  template <class T>
  __device__ static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {  // wrap, like the host kernels
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
};
struct Prod {
  template <class T>
  __device__ static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    } else {
      return a * b;
    }
  }
};
struct Min {  // NaN in either operand gives NaN, as torch.minimum
  template <class T>
  __device__ static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return (a < b || a != a) ? a : b;
    } else {
      return a < b ? a : b;
    }
  }
};
struct Max {
  template <class T>
  __device__ static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return (a > b || a != a) ? a : b;
    } else {
      return a > b ? a : b;
    }
  }
};

template <class Op, class T>
__device__ T combine(T a, T b) {
  using W = Widen<T>;
  return W::store(Op::apply(W::load(a), W::load(b)));
}

template <class Op, class T>
__global__ void reduce_elements(T* __restrict__ dst, const T* __restrict__ src, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    dst[i] = combine<Op>(dst[i], src[i]);
  }
}

template <class Op, class T>
__global__ void reduce_vectors(uint4* __restrict__ dst, const uint4* __restrict__ src,
                               std::size_t vectors) {
  constexpr int kPer = sizeof(uint4) / sizeof(T);
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < vectors;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    uint4 a = dst[i];
    const uint4 b = src[i];
    T* x = reinterpret_cast<T*>(&a);
    const T* y = reinterpret_cast<const T*>(&b);
#pragma unroll
    for (int k = 0; k < kPer; ++k) x[k] = combine<Op>(x[k], y[k]);
    dst[i] = a;
  }
}

// dst = srcs[0] op srcs[1] op ..., each pair combined (and 16-bit floats rounded) as the
// pairwise kernels do, so the bits equal a chain of reduce_into calls. dst may be any source:
// every element is read by the thread that writes it.
constexpr int kMaxSources = 8;
struct Sources {
  const void* at[kMaxSources];
  int count;
};

template <class Op, class T>
__global__ void reduce_many_elements(T* dst, Sources srcs, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    T acc = static_cast<const T*>(srcs.at[0])[i];
    for (int k = 1; k < srcs.count; ++k)
      acc = combine<Op>(acc, static_cast<const T*>(srcs.at[k])[i]);
    dst[i] = acc;
  }
}

template <class Op, class T>
__global__ void reduce_many_vectors(uint4* dst, Sources srcs, std::size_t vectors) {
  constexpr int kPer = sizeof(uint4) / sizeof(T);
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < vectors;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    uint4 a = static_cast<const uint4*>(srcs.at[0])[i];
    T* x = reinterpret_cast<T*>(&a);
    for (int s = 1; s < srcs.count; ++s) {
      const uint4 b = static_cast<const uint4*>(srcs.at[s])[i];
      const T* y = reinterpret_cast<const T*>(&b);
#pragma unroll
      for (int k = 0; k < kPer; ++k) x[k] = combine<Op>(x[k], y[k]);
    }
    dst[i] = a;
  }
}

template <class T>
__global__ void divide_elements(T* __restrict__ data, std::size_t n, int divisor) {
  using W = Widen<T>;
  using C = typename W::type;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    data[i] = W::store(W::load(data[i]) / static_cast<C>(divisor));
  }
}

constexpr unsigned kThreads = 256;

unsigned blocks_for(std::size_t items, int device) {
  static int sms[64] = {};
  int& count = sms[device & 63];
  if (count == 0) {
    check(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device),
          "cudaDeviceGetAttribute");
  }
  const std::size_t wanted = (items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(wanted, count * 8)));
}

template <class Op, class T>
void launch_reduce(void* dst, const void* src, std::size_t count, int device, cudaStream_t stream) {
  constexpr std::size_t kPer = sizeof(uint4) / sizeof(T);
  std::size_t done = 0;
  const bool aligned = (reinterpret_cast<std::uintptr_t>(dst) % sizeof(uint4)) == 0 &&
                       (reinterpret_cast<std::uintptr_t>(src) % sizeof(uint4)) == 0;
  if (aligned && count >= kPer) {
    const std::size_t vectors = count / kPer;
    reduce_vectors<Op, T><<<blocks_for(vectors, device), kThreads, 0, stream>>>(
        static_cast<uint4*>(dst), static_cast<const uint4*>(src), vectors);
    done = vectors * kPer;
  }
  if (done < count) {
    reduce_elements<Op, T><<<blocks_for(count - done, device), kThreads, 0, stream>>>(
        static_cast<T*>(dst) + done, static_cast<const T*>(src) + done, count - done);
  }
  check(cudaGetLastError(), "launching a reduction kernel");
}

template <class Op, class T>
void launch_reduce_many(void* dst, const Sources& srcs, std::size_t count, int device,
                        cudaStream_t stream) {
  constexpr std::size_t kPer = sizeof(uint4) / sizeof(T);
  bool aligned = reinterpret_cast<std::uintptr_t>(dst) % sizeof(uint4) == 0;
  for (int k = 0; k < srcs.count; ++k) {
    aligned = aligned && reinterpret_cast<std::uintptr_t>(srcs.at[k]) % sizeof(uint4) == 0;
  }
  std::size_t done = 0;
  if (aligned && count >= kPer) {
    const std::size_t vectors = count / kPer;
    reduce_many_vectors<Op, T><<<blocks_for(vectors, device), kThreads, 0, stream>>>(
        static_cast<uint4*>(dst), srcs, vectors);
    done = vectors * kPer;
  }
  if (done < count) {
    Sources rest = srcs;
    for (int k = 0; k < rest.count; ++k) rest.at[k] = static_cast<const T*>(rest.at[k]) + done;
    reduce_many_elements<Op, T><<<blocks_for(count - done, device), kThreads, 0, stream>>>(
        static_cast<T*>(dst) + done, rest, count - done);
  }
  check(cudaGetLastError(), "launching a reduction kernel");
}

template <class T>
void launch_many_for_op(void* dst, const Sources& srcs, std::size_t count, ReduceOp op, int device,
                        cudaStream_t stream) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return launch_reduce_many<Sum, T>(dst, srcs, count, device, stream);
    case ReduceOp::prod: return launch_reduce_many<Prod, T>(dst, srcs, count, device, stream);
    case ReduceOp::min: return launch_reduce_many<Min, T>(dst, srcs, count, device, stream);
    case ReduceOp::max: return launch_reduce_many<Max, T>(dst, srcs, count, device, stream);
    default: break;
  }
  throw std::invalid_argument("cuda::reduce_many: unknown reduce op");
}

void launch_many(void* dst, const Sources& srcs, std::size_t count, DType dtype, ReduceOp op,
                 int device, cudaStream_t stream) {
  switch (dtype) {
    case DType::f32: return launch_many_for_op<float>(dst, srcs, count, op, device, stream);
    case DType::f64: return launch_many_for_op<double>(dst, srcs, count, op, device, stream);
    case DType::f16: return launch_many_for_op<F16>(dst, srcs, count, op, device, stream);
    case DType::bf16: return launch_many_for_op<BF16>(dst, srcs, count, op, device, stream);
    case DType::i32: return launch_many_for_op<std::int32_t>(dst, srcs, count, op, device, stream);
    case DType::i64: return launch_many_for_op<std::int64_t>(dst, srcs, count, op, device, stream);
    default: break;
  }
  throw std::invalid_argument("cuda::reduce_many: dtype not supported on device");
}

template <class T>
void launch_for_op(void* dst, const void* src, std::size_t count, ReduceOp op, int device,
                   cudaStream_t stream) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return launch_reduce<Sum, T>(dst, src, count, device, stream);
    case ReduceOp::prod: return launch_reduce<Prod, T>(dst, src, count, device, stream);
    case ReduceOp::min: return launch_reduce<Min, T>(dst, src, count, device, stream);
    case ReduceOp::max: return launch_reduce<Max, T>(dst, src, count, device, stream);
    default: break;
  }
  throw std::invalid_argument("cuda::reduce_into: unknown reduce op");
}

template <class T>
void launch_divide(void* data, std::size_t count, int divisor, int device, cudaStream_t stream) {
  divide_elements<T>
      <<<blocks_for(count, device), kThreads, 0, stream>>>(static_cast<T*>(data), count, divisor);
  check(cudaGetLastError(), "launching the divide kernel");
}

}  // namespace

void reduce_into(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op,
                 int device, void* stream_ptr) {
  if (count == 0) return;
  check(cudaSetDevice(device), "cudaSetDevice");
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  switch (dtype) {
    case DType::f32: return launch_for_op<float>(dst, src, count, op, device, stream);
    case DType::f64: return launch_for_op<double>(dst, src, count, op, device, stream);
    case DType::f16: return launch_for_op<F16>(dst, src, count, op, device, stream);
    case DType::bf16: return launch_for_op<BF16>(dst, src, count, op, device, stream);
    case DType::i32: return launch_for_op<std::int32_t>(dst, src, count, op, device, stream);
    case DType::i64: return launch_for_op<std::int64_t>(dst, src, count, op, device, stream);
    default: break;
  }
  throw std::invalid_argument("cuda::reduce_into: dtype not supported on device");
}

int reduce_many(void* dst, const void* const* srcs, int sources, std::size_t count, DType dtype,
                ReduceOp op, int device, void* stream_ptr) {
  if (sources < 1) throw std::invalid_argument("cuda::reduce_many: no source");
  if (count == 0) return 0;
  check(cudaSetDevice(device), "cudaSetDevice");
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  // Up to kMaxSources a launch; a longer list continues from dst: (dst op next ...), the same
  // order of combination.
  int launches = 0;
  for (int first = 0; first < sources;) {
    Sources batch{};
    if (first > 0) batch.at[batch.count++] = dst;
    while (batch.count < kMaxSources && first < sources) batch.at[batch.count++] = srcs[first++];
    launch_many(dst, batch, count, dtype, op, device, stream);
    ++launches;
  }
  return launches;
}

void divide_by(void* data, std::size_t count, DType dtype, int divisor, int device,
               void* stream_ptr) {
  if (divisor <= 0) throw std::invalid_argument("cuda::divide_by: divisor must be positive");
  if (count == 0) return;
  check(cudaSetDevice(device), "cudaSetDevice");
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  switch (dtype) {
    case DType::f32: return launch_divide<float>(data, count, divisor, device, stream);
    case DType::f64: return launch_divide<double>(data, count, divisor, device, stream);
    case DType::f16: return launch_divide<F16>(data, count, divisor, device, stream);
    case DType::bf16: return launch_divide<BF16>(data, count, divisor, device, stream);
    case DType::i32: return launch_divide<std::int32_t>(data, count, divisor, device, stream);
    case DType::i64: return launch_divide<std::int64_t>(data, count, divisor, device, stream);
    default: break;
  }
  throw std::invalid_argument("cuda::divide_by: dtype not supported on device");
}

}  // namespace ringlet::collectives::cuda

// The plugin's entry points (core/cuda_plugin.h); collectives/cuda/plugin_calls.cpp calls them.
namespace cuda = ringlet::collectives::cuda;
RINGLET_CUDA_PLUGIN_EXPORT void ringlet_cuda_reduce_into(void* dst, const void* src,
                                                         std::size_t count,
                                                         ringlet::collectives::DType dtype,
                                                         ringlet::collectives::ReduceOp op,
                                                         int device, void* stream) {
  cuda::reduce_into(dst, src, count, dtype, op, device, stream);
}
RINGLET_CUDA_PLUGIN_EXPORT int ringlet_cuda_reduce_many(void* dst, const void* const* srcs,
                                                        int sources, std::size_t count,
                                                        ringlet::collectives::DType dtype,
                                                        ringlet::collectives::ReduceOp op,
                                                        int device, void* stream) {
  return cuda::reduce_many(dst, srcs, sources, count, dtype, op, device, stream);
}
RINGLET_CUDA_PLUGIN_EXPORT void ringlet_cuda_divide_by(void* data, std::size_t count,
                                                       ringlet::collectives::DType dtype,
                                                       int divisor, int device, void* stream) {
  cuda::divide_by(data, count, dtype, divisor, device, stream);
}
