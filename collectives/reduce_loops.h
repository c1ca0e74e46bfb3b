// The host reduction loops, compiled once per instruction-set level: this header is included
// by exactly one translation unit per level (reduce_kernels_baseline.cpp, _avx2.cpp,
// _avx512.cpp), each built with its own -m flags (meson.build's isa_cpp_args), and fills that
// level's ReduceTable. Everything here has internal linkage (anonymous namespaces, and no
// out-of-line std:: template), so the linker cannot hand a function compiled for AVX-512 to a
// caller at the baseline level.
//
// The op is chosen once, outside the loop (one template instance per dtype x op), so each
// inner loop is a plain restrict-pointer loop that the compiler vectorizes at the level's
// width. f16/bf16 are combined in f32 and rounded back once per element: at the baseline
// through a float scratch block (widen, combine, round back; each loop vectorizes), at the
// avx2 and avx512 levels a register at a time (reduce_vectors.h). Every level gives the same
// bits (tests/collectives/test_reduce_kernels.cpp compares each with the baseline).
//
// Vectorization of the baseline (SSE2), checked with `-O3 -fopt-info-vec-optimized`, GCC 12:
// every f32 and f64 loop (sum prod min max, divide) is vectorized, and so are all loops of the
// f16/bf16 paths (conversions too), i32 and u8 sum/prod/min/max, and i64 sum. Not vectorized
// for lack of SSE2 instructions: i64 prod/min/max and integer division (AVX-512 has the first
// three).
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/reduce_scalar.h"
#include "collectives/reduce_table.h"

#if defined(__F16C__) && defined(__AVX2__)
#include "collectives/reduce_vectors.h"
#endif

namespace ringlet::collectives {

namespace {

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

#if defined(__F16C__) && defined(__AVX2__)
template <class Format>
struct LanesOf;
template <>
struct LanesOf<HalfFormat> {
  using type = HalfLanes;
};
template <>
struct LanesOf<Bf16Format> {
  using type = Bf16Lanes;
};

// dst = op(first, src); first may be dst.
template <class Op, class Format>
void combine_16bit(void* dst, const void* first, const void* src, std::size_t count) {
  combine_16bit_lanes<Op, typename LanesOf<Format>::type, Format>(
      static_cast<std::uint16_t*>(dst), static_cast<const std::uint16_t*>(first),
      static_cast<const std::uint16_t*>(src), count);
}

template <class Format>
void divide_16bit(std::uint16_t* data, std::size_t count, float divisor) {
  divide_16bit_lanes<typename LanesOf<Format>::type, Format>(data, count, divisor);
}
#else
// Elements per scratch block for f16/bf16: 2 x 1 KiB of floats stays in L1 and is long
// enough that the vectorized f32 loop dominates the per-block overhead.
constexpr std::size_t kBlock = 256;
inline std::size_t block_size(std::size_t left) { return left < kBlock ? left : kBlock; }

// dst = op(first, src) through f32 blocks; first may be dst.
template <class Op, class Format>
void combine_16bit(void* dst_bytes, const void* first_bytes, const void* src_bytes,
                   std::size_t count) {
  auto* dst = static_cast<std::uint16_t*>(dst_bytes);
  const auto* first = static_cast<const std::uint16_t*>(first_bytes);
  const auto* src = static_cast<const std::uint16_t*>(src_bytes);
  float a[kBlock];
  float b[kBlock];
  for (std::size_t base = 0; base < count; base += kBlock) {
    const std::size_t n = block_size(count - base);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = Format::to_float(first[base + i]);
      b[i] = Format::to_float(src[base + i]);
    }
    combine<Op>(a, b, n);
    for (std::size_t i = 0; i < n; ++i) dst[base + i] = Format::from_float(a[i]);
  }
}

template <class Format>
void divide_16bit(std::uint16_t* __restrict data, std::size_t count, float divisor) {
  float a[kBlock];
  for (std::size_t base = 0; base < count; base += kBlock) {
    const std::size_t n = block_size(count - base);
    for (std::size_t i = 0; i < n; ++i) a[i] = Format::to_float(data[base + i]);
    for (std::size_t i = 0; i < n; ++i) a[i] = a[i] / divisor;
    for (std::size_t i = 0; i < n; ++i) data[base + i] = Format::from_float(a[i]);
  }
}
#endif

// Division, not multiplication by the reciprocal: x / n is correctly rounded, so averages of
// integer-valued floats are exact whenever the true average is representable.
template <class T>
void divide(T* __restrict data, std::size_t count, T divisor) {
  for (std::size_t i = 0; i < count; ++i) data[i] = data[i] / divisor;
}

template <class Op>
ReduceTable::Combine combine_of(DType dtype) {
  switch (dtype) {
    case DType::f32: return combine_typed<Op, float>;
    case DType::f64: return combine_typed<Op, double>;
    case DType::f16: return combine_16bit<Op, HalfFormat>;
    case DType::bf16: return combine_16bit<Op, Bf16Format>;
    case DType::i32: return combine_typed<Op, std::int32_t>;
    case DType::i64: return combine_typed<Op, std::int64_t>;
    case DType::u8: return combine_typed<Op, std::uint8_t>;
  }
  return nullptr;
}

// The bitwise ops: integer dtypes only.
template <class Op>
ReduceTable::Combine bitwise_of(DType dtype) {
  switch (dtype) {
    case DType::i32: return combine_typed<Op, std::int32_t>;
    case DType::i64: return combine_typed<Op, std::int64_t>;
    case DType::u8: return combine_typed<Op, std::uint8_t>;
    default: return nullptr;
  }
}

template <class T>
void divide_typed(void* data, std::size_t count, int divisor) {
  divide(static_cast<T*>(data), count, static_cast<T>(divisor));
}

template <class Format>
void divide_16bit_typed(void* data, std::size_t count, int divisor) {
  divide_16bit<Format>(static_cast<std::uint16_t*>(data), count, static_cast<float>(divisor));
}

// u8: a divisor above 255 truncates every element to 0; the cast must not wrap it first.
void divide_u8(void* data, std::size_t count, int divisor) {
  auto* bytes = static_cast<std::uint8_t*>(data);
  if (divisor > 255) {
    for (std::size_t i = 0; i < count; ++i) bytes[i] = 0;
    return;
  }
  divide(bytes, count, static_cast<std::uint8_t>(divisor));
}

ReduceTable::Divide divide_of(DType dtype) {
  switch (dtype) {
    case DType::f32: return divide_typed<float>;
    case DType::f64: return divide_typed<double>;
    case DType::f16: return divide_16bit_typed<HalfFormat>;
    case DType::bf16: return divide_16bit_typed<Bf16Format>;
    case DType::i32: return divide_typed<std::int32_t>;
    case DType::i64: return divide_typed<std::int64_t>;
    case DType::u8: return divide_u8;
  }
  return nullptr;
}

ReduceTable make_reduce_table() {
  ReduceTable table{};
  for (std::size_t d = 0; d < kReduceDTypes; ++d) {
    const auto dtype = static_cast<DType>(d);
    table.combine[d][0] = combine_of<SumOp>(dtype);
    table.combine[d][1] = combine_of<ProdOp>(dtype);
    table.combine[d][2] = combine_of<MinOp>(dtype);
    table.combine[d][3] = combine_of<MaxOp>(dtype);
    table.combine[d][4] = bitwise_of<BandOp>(dtype);
    table.combine[d][5] = bitwise_of<BorOp>(dtype);
    table.combine[d][6] = bitwise_of<BxorOp>(dtype);
    table.divide[d] = divide_of(dtype);
  }
  return table;
}

}  // namespace

}  // namespace ringlet::collectives
