// What lets one kernel source compile twice: RINGLET_HD marks functions nvcc builds for both
// host and device (plain inline functions for g++), and the element conversions and math the
// kernels call, mapped to CUDA's intrinsics on the device and to the host's (core/dtype.h,
// <cmath>) elsewhere, so the emulated device computes bit for bit what the CPU computes.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/dtype.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define RINGLET_HD __host__ __device__ __forceinline__
#else
#define RINGLET_HD inline
#endif

namespace ringlet::tensor::kernels {

using core::BFloat16;
using core::DType;
using core::Half;

// One 64-bit store that several threads may race on (the sticky error words): whole on either
// side, relaxed.
RINGLET_HD void store_word(std::uint64_t* p, std::uint64_t v) {
#if defined(__CUDA_ARCH__)
  *static_cast<volatile std::uint64_t*>(p) = v;
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

RINGLET_HD float half_to_float(Half h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h.bits));
#else
  return core::half_to_float(h.bits);
#endif
}
RINGLET_HD Half float_to_half(float f) {
#if defined(__CUDA_ARCH__)
  return Half{__half_as_ushort(__float2half_rn(f))};
#else
  return Half{core::float_to_half(f)};
#endif
}
RINGLET_HD float bf16_to_float(BFloat16 h) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(static_cast<unsigned>(h.bits) << 16);
#else
  return core::bf16_to_float(h.bits);
#endif
}
RINGLET_HD BFloat16 float_to_bf16(float f) {
#if defined(__CUDA_ARCH__)
  return BFloat16{__bfloat16_as_ushort(__float2bfloat16_rn(f))};
#else
  return BFloat16{core::float_to_bf16(f)};
#endif
}

// Element conversion between any two dtypes' C++ types (f16/bf16 through float).
template <class D, class S>
RINGLET_HD D convert(S value) {
  if constexpr (std::is_same_v<S, D>) {
    return value;
  } else if constexpr (std::is_same_v<S, Half>) {
    return convert<D>(half_to_float(value));
  } else if constexpr (std::is_same_v<S, BFloat16>) {
    return convert<D>(bf16_to_float(value));
  } else if constexpr (std::is_same_v<D, Half>) {
    return float_to_half(static_cast<float>(value));
  } else if constexpr (std::is_same_v<D, BFloat16>) {
    return float_to_bf16(static_cast<float>(value));
  } else {
    return static_cast<D>(value);
  }
}

// Math with one name for float and double on both sides.
template <class T>
RINGLET_HD T hd_exp(T x) {
  return std::exp(x);
}
template <class T>
RINGLET_HD T hd_log(T x) {
  return std::log(x);
}
template <class T>
RINGLET_HD T hd_sqrt(T x) {
  return std::sqrt(x);
}
template <class T>
RINGLET_HD T hd_tanh(T x) {
  return std::tanh(x);
}
template <class T>
RINGLET_HD T hd_pow(T x, T y) {
  return std::pow(x, y);
}

template <class T>
RINGLET_HD T hd_fma(T a, T b, T c) {
  return std::fma(a, b, c);
}
template <class T>
RINGLET_HD T hd_max(T a, T b) {
  return a < b ? b : a;  // std::max's rule: a unless b is larger
}
template <class T>
RINGLET_HD T hd_infinity() {  // an integer type's largest value
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(HUGE_VAL);
  } else {
    return std::numeric_limits<T>::max();
  }
}

}  // namespace ringlet::tensor::kernels
