// Branch-free f16/bf16 <-> f32 conversions, one element at a time, for the loops compiled once
// per instruction-set level (core/isa.h): the host reduction (collectives/reduce_loops.h) and
// tensor's flat loops (tensor/cpu/flat_loops_impl.h) use them, and the vector loops' tails do.
// Bit for bit the same as core's out-of-line half_to_float & co. (core/dtype.h;
// tests/collectives/test_reduce_kernels.cpp compares them over every 16-bit value). Everything has
// internal linkage: each level's translation unit gets its own copy, compiled with its own flags,
// and the linker can never hand one level another level's instructions.
#pragma once

#include <cstdint>

namespace ringlet::core::lanes {

namespace {

template <class To, class From>
To bits_to(From value) {
  static_assert(sizeof(To) == sizeof(From));
  return __builtin_bit_cast(To, value);
}

// All ones when cond holds, else zero. f16 conversions select with masks rather than ?:,
// because GCC turns ?: around float arithmetic into branches (it may not speculate FP ops
// under -ftrapping-math), and a loop with branches does not vectorize.
inline std::uint32_t mask_if(bool cond) { return 0u - static_cast<std::uint32_t>(cond); }
inline std::uint32_t select(std::uint32_t mask, std::uint32_t a, std::uint32_t b) {
  return (a & mask) | (b & ~mask);
}

// Branch-free f16/bf16 conversions, bit-for-bit the same as core's (round to nearest even,
// NaN made quiet, overflow to inf; tests/collectives/test_reduce_kernels.cpp compares them over
// every 16-bit value). core's are out-of-line with branches, which held f16 reduction to ~0.4 GB/s;
// written as selects these inline into the block loops and vectorize.
inline float half_to_float(std::uint16_t h) {
  constexpr std::uint32_t kExpMask = 0x7c00u << 13;  // f16 exponent, moved to f32's position
  const std::uint32_t shifted = static_cast<std::uint32_t>(h & 0x7fffu) << 13;
  const std::uint32_t exp = shifted & kExpMask;
  const std::uint32_t normal = shifted + ((127u - 15u) << 23);  // rebias the exponent
  const std::uint32_t inf_nan = normal + ((128u - 16u) << 23);  // exponent all ones
  // Subnormal: set the implicit bit at 2^-14 and subtract it again in float arithmetic,
  // which renormalizes exactly.
  const float subnormal = bits_to<float>(normal + (1u << 23)) - bits_to<float>(113u << 23);
  const std::uint32_t bits =
      select(mask_if(exp == kExpMask), inf_nan,
             select(mask_if(exp == 0), bits_to<std::uint32_t>(subnormal), normal));
  return bits_to<float>(bits | (static_cast<std::uint32_t>(h & 0x8000u) << 16));
}

inline std::uint16_t float_to_half(float value) {
  const std::uint32_t f = bits_to<std::uint32_t>(value);
  const std::uint32_t sign = (f >> 16) & 0x8000u;
  const std::uint32_t abs = f & 0x7fffffffu;
  const std::uint32_t inf_nan = abs > 0x7f800000u ? 0x7e00u : 0x7c00u;
  // Results below 2^-14 are subnormal: adding 0.5 aligns the 10 mantissa bits at the bottom
  // of the float, and the FPU's round to nearest even does the rounding.
  const std::uint32_t subnormal = bits_to<std::uint32_t>(bits_to<float>(abs) + 0.5f) - 0x3f000000u;
  // Normal: rebias the exponent (-112 << 23) and round to nearest even on bit 13.
  const std::uint32_t normal = (abs + 0xc8000fffu + ((abs >> 13) & 1u)) >> 13;
  const std::uint32_t bits = select(mask_if(abs >= 0x477ff000u), inf_nan,
                                    select(mask_if(abs < 0x38800000u), subnormal, normal));
  return static_cast<std::uint16_t>(bits | sign);
}

inline float bf16_to_float(std::uint16_t bits) {
  return bits_to<float>(static_cast<std::uint32_t>(bits) << 16);
}

inline std::uint16_t float_to_bf16(float value) {
  const std::uint32_t f = bits_to<std::uint32_t>(value);
  const std::uint32_t rounded = (f + 0x7fffu + ((f >> 16) & 1u)) >> 16;
  const std::uint32_t quiet_nan = (f >> 16) | 0x40u;
  return static_cast<std::uint16_t>((f & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

// The 16-bit storage formats, one element at a time.
struct HalfFormat {
  static float to_float(std::uint16_t h) { return half_to_float(h); }
  static std::uint16_t from_float(float x) { return float_to_half(x); }
};
struct Bf16Format {
  static float to_float(std::uint16_t h) { return bf16_to_float(h); }
  static std::uint16_t from_float(float x) { return float_to_bf16(x); }
};

}  // namespace

}  // namespace ringlet::core::lanes
