// Host reduction kernels: dst[i] = op(dst[i], src[i]) and dst[i] /= divisor for every dtype.
// The op is chosen once, outside the loop (one template instance per dtype x op), so each
// inner loop is a plain restrict-pointer loop that GCC auto-vectorizes. f16/bf16 go through a
// float scratch block: widen, combine in f32 (vectorized), round back once per element.
//
// Vectorization, checked with `-O3 -fopt-info-vec-optimized` (and -fdump-tree-vect per
// instance) on this file, GCC 12, x86-64 baseline SSE2: every f32 and f64 loop (sum prod min
// max, divide) is vectorized, and so are all loops of the f16/bf16 paths (conversions too),
// i32 and u8 sum/prod/min/max, and i64 sum. Not vectorized, for lack of SSE2 instructions:
// i64 prod/min/max and integer division; none is on the hot path of training. Measured on
// 16 MiB, one core: f32/f64 ~10 GB/s, bf16 ~3 GB/s, f16 ~1 GB/s (of dst bytes).
#include "collectives/reduce_kernels.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>

#include "core/error.h"

namespace ringlet::collectives {

namespace {

// Signed integer overflow is undefined in C++; collectives wrap like PyTorch and NCCL do,
// so integer sums and products are done in the unsigned type of the same width.
template <class T>
T wrapping_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <class T>
T wrapping_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}

struct SumOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return wrapping_add(a, b);
    } else {
      return a + b;
    }
  }
};
struct ProdOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return wrapping_mul(a, b);
    } else {
      return a * b;
    }
  }
};
// min/max propagate NaN like torch.minimum/maximum: a NaN in either operand gives NaN.
// When b is NaN the comparison is false and b is chosen; `a != a` catches a NaN in a.
// Written as selects (no std::min, no branches) so they vectorize as compare + blend.
struct MinOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return (a < b || a != a) ? a : b;
    } else {
      return a < b ? a : b;
    }
  }
};
struct MaxOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return (a > b || a != a) ? a : b;
    } else {
      return a > b ? a : b;
    }
  }
};

template <class Op, class T>
void combine(T* __restrict dst, const T* __restrict src, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) dst[i] = Op::apply(dst[i], src[i]);
}

template <class Op, class T>
void combine(T* __restrict dst, const T* __restrict a, const T* __restrict b, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) dst[i] = Op::apply(a[i], b[i]);
}

// dst = op(a, b), with the two-operand loop when a is dst (restrict forbids passing it twice).
template <class Op, class T>
void combine_typed(void* dst, const void* a, const void* b, std::size_t count) {
  if (a == dst) {
    combine<Op>(static_cast<T*>(dst), static_cast<const T*>(b), count);
  } else {
    combine<Op>(static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), count);
  }
}

// Elements per scratch block for f16/bf16: 2 x 1 KiB of floats stays in L1 and is long
// enough that the vectorized f32 loop dominates the per-block overhead.
constexpr std::size_t kBlock = 256;

// All ones when cond holds, else zero. f16 conversions select with masks rather than ?:,
// because GCC turns ?: around float arithmetic into branches (it may not speculate FP ops
// under -ftrapping-math), and a loop with branches does not vectorize.
inline std::uint32_t mask_if(bool cond) { return 0u - static_cast<std::uint32_t>(cond); }
inline std::uint32_t select(std::uint32_t mask, std::uint32_t a, std::uint32_t b) {
  return (a & mask) | (b & ~mask);
}

// Branch-free f16/bf16 conversions, bit-for-bit the same as core's (round to nearest even,
// NaN made quiet, overflow to inf; tests/test_reduce_kernels.cpp compares them over every
// 16-bit value). core's are out-of-line with branches, which held f16 reduction to ~0.4 GB/s;
// written as selects these inline into the block loops and vectorize.
inline float half_to_float(std::uint16_t h) {
  constexpr std::uint32_t kExpMask = 0x7c00u << 13;  // f16 exponent, moved to f32's position
  const std::uint32_t shifted = static_cast<std::uint32_t>(h & 0x7fffu) << 13;
  const std::uint32_t exp = shifted & kExpMask;
  const std::uint32_t normal = shifted + ((127u - 15u) << 23);  // rebias the exponent
  const std::uint32_t inf_nan = normal + ((128u - 16u) << 23);  // exponent all ones
  // Subnormal: set the implicit bit at 2^-14 and subtract it again in float arithmetic,
  // which renormalizes exactly.
  const float subnormal =
      std::bit_cast<float>(normal + (1u << 23)) - std::bit_cast<float>(113u << 23);
  const std::uint32_t bits =
      select(mask_if(exp == kExpMask), inf_nan,
             select(mask_if(exp == 0), std::bit_cast<std::uint32_t>(subnormal), normal));
  return std::bit_cast<float>(bits | (static_cast<std::uint32_t>(h & 0x8000u) << 16));
}

inline std::uint16_t float_to_half(float value) {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (f >> 16) & 0x8000u;
  const std::uint32_t abs = f & 0x7fffffffu;
  const std::uint32_t inf_nan = abs > 0x7f800000u ? 0x7e00u : 0x7c00u;
  // Results below 2^-14 are subnormal: adding 0.5 aligns the 10 mantissa bits at the bottom
  // of the float, and the FPU's round to nearest even does the rounding.
  const std::uint32_t subnormal =
      std::bit_cast<std::uint32_t>(std::bit_cast<float>(abs) + 0.5f) - 0x3f000000u;
  // Normal: rebias the exponent (-112 << 23) and round to nearest even on bit 13.
  const std::uint32_t normal = (abs + 0xc8000fffu + ((abs >> 13) & 1u)) >> 13;
  const std::uint32_t bits = select(mask_if(abs >= 0x477ff000u), inf_nan,
                                    select(mask_if(abs < 0x38800000u), subnormal, normal));
  return static_cast<std::uint16_t>(bits | sign);
}

inline float bf16_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

inline std::uint16_t float_to_bf16(float value) {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t rounded = (f + 0x7fffu + ((f >> 16) & 1u)) >> 16;
  const std::uint32_t quiet_nan = (f >> 16) | 0x40u;
  return static_cast<std::uint16_t>((f & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

using ToFloat = float (*)(std::uint16_t);
using FromFloat = std::uint16_t (*)(float);

// dst = op(first, src) through f32 blocks; first may be dst.
template <class Op, ToFloat to_float, FromFloat from_float>
void combine_16bit(void* dst_bytes, const void* first_bytes, const void* src_bytes,
                   std::size_t count) {
  auto* dst = static_cast<std::uint16_t*>(dst_bytes);
  const auto* first = static_cast<const std::uint16_t*>(first_bytes);
  const auto* src = static_cast<const std::uint16_t*>(src_bytes);
  float a[kBlock];
  float b[kBlock];
  for (std::size_t base = 0; base < count; base += kBlock) {
    const std::size_t n = std::min(kBlock, count - base);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = to_float(first[base + i]);
      b[i] = to_float(src[base + i]);
    }
    combine<Op>(a, b, n);
    for (std::size_t i = 0; i < n; ++i) dst[base + i] = from_float(a[i]);
  }
}

template <ToFloat to_float, FromFloat from_float>
void divide_16bit(std::uint16_t* __restrict data, std::size_t count, float divisor) {
  float a[kBlock];
  for (std::size_t base = 0; base < count; base += kBlock) {
    const std::size_t n = std::min(kBlock, count - base);
    for (std::size_t i = 0; i < n; ++i) a[i] = to_float(data[base + i]);
    for (std::size_t i = 0; i < n; ++i) a[i] = a[i] / divisor;
    for (std::size_t i = 0; i < n; ++i) data[base + i] = from_float(a[i]);
  }
}

// Division, not multiplication by the reciprocal: x / n is correctly rounded, so averages of
// integer-valued floats are exact whenever the true average is representable.
template <class T>
void divide(T* __restrict data, std::size_t count, T divisor) {
  for (std::size_t i = 0; i < count; ++i) data[i] = data[i] / divisor;
}

template <class Op>
void reduce_typed(void* dst, const void* a, const void* b, std::size_t count, DType dtype) {
  switch (dtype) {
    case DType::f32: return combine_typed<Op, float>(dst, a, b, count);
    case DType::f64: return combine_typed<Op, double>(dst, a, b, count);
    case DType::f16: return combine_16bit<Op, half_to_float, float_to_half>(dst, a, b, count);
    case DType::bf16: return combine_16bit<Op, bf16_to_float, float_to_bf16>(dst, a, b, count);
    case DType::i32: return combine_typed<Op, std::int32_t>(dst, a, b, count);
    case DType::i64: return combine_typed<Op, std::int64_t>(dst, a, b, count);
    case DType::u8: return combine_typed<Op, std::uint8_t>(dst, a, b, count);
  }
  RINGLET_THROW(DTypeError, "reduce_into: unsupported dtype code ", static_cast<int>(dtype));
}

bool known_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::f64:
    case DType::f16:
    case DType::bf16:
    case DType::i32:
    case DType::i64:
    case DType::u8: return true;
  }
  return false;
}

}  // namespace

void reduce_into(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op) {
  reduce_pair(dst, dst, src, count, dtype, op);
}

void reduce_pair(void* dst, const void* a, const void* src, std::size_t count, DType dtype,
                 ReduceOp op) {
  // Validate before the count == 0 shortcut, so a bad dtype or op fails the same way for
  // every count (ranks with an empty chunk must not accept what the others reject).
  RINGLET_CHECK(known_dtype(dtype), DTypeError, "reduce_into: unsupported dtype code ",
                static_cast<int>(dtype));
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::prod:
    case ReduceOp::min:
    case ReduceOp::max:
    case ReduceOp::avg: break;
    default:
      RINGLET_THROW(ValueError, "reduce_into: unknown reduce op code ", static_cast<int>(op),
                    " (choices: sum, prod, min, max, avg)");
  }
  if (count == 0) return;
  RINGLET_CHECK(dst != nullptr && a != nullptr && src != nullptr, ValueError,
                "reduce_into: null buffer for ", count, " elements of ", dtype);
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:  // the caller divides once at the end (divide_by)
      return reduce_typed<SumOp>(dst, a, src, count, dtype);
    case ReduceOp::prod: return reduce_typed<ProdOp>(dst, a, src, count, dtype);
    case ReduceOp::min: return reduce_typed<MinOp>(dst, a, src, count, dtype);
    case ReduceOp::max: return reduce_typed<MaxOp>(dst, a, src, count, dtype);
  }
}

void divide_by(void* data, std::size_t count, DType dtype, int divisor) {
  RINGLET_CHECK(known_dtype(dtype), DTypeError, "divide_by: unsupported dtype code ",
                static_cast<int>(dtype));
  // A divisor is a rank count; requiring > 0 also rules out INT_MIN / -1.
  RINGLET_CHECK(divisor > 0, ValueError, "divide_by: divisor must be positive, got ", divisor);
  if (count == 0 || divisor == 1) return;
  RINGLET_CHECK(data != nullptr, ValueError, "divide_by: null buffer for ", count, " elements of ",
                dtype);
  switch (dtype) {
    case DType::f32: return divide(static_cast<float*>(data), count, static_cast<float>(divisor));
    case DType::f64: return divide(static_cast<double*>(data), count, static_cast<double>(divisor));
    case DType::f16:
      return divide_16bit<half_to_float, float_to_half>(static_cast<std::uint16_t*>(data), count,
                                                        static_cast<float>(divisor));
    case DType::bf16:
      return divide_16bit<bf16_to_float, float_to_bf16>(static_cast<std::uint16_t*>(data), count,
                                                        static_cast<float>(divisor));
    case DType::i32:
      return divide(static_cast<std::int32_t*>(data), count, static_cast<std::int32_t>(divisor));
    case DType::i64:
      return divide(static_cast<std::int64_t*>(data), count, static_cast<std::int64_t>(divisor));
    case DType::u8:
      // A divisor above 255 truncates every u8 to 0; the cast must not wrap it first.
      if (divisor > 255) {
        std::fill_n(static_cast<std::uint8_t*>(data), count, std::uint8_t{0});
        return;
      }
      return divide(static_cast<std::uint8_t*>(data), count, static_cast<std::uint8_t>(divisor));
  }
}

}  // namespace ringlet::collectives
