// The host reduction's loops at the avx2 and avx512 levels, a register at a time on the lanes
// of core/half_lanes.h: the scalar ops lane by lane (vec_apply), and the f16/bf16 combine and
// divide loops with no scratch block in between. Included only by reduce_loops.h in the levels
// built with F16C.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "collectives/reduce_scalar.h"
#include "core/half_lanes.h"

namespace ringlet::collectives {

namespace {

using namespace core::lanes;  // NOLINT: VecF, kLanes, vec_*, HalfLanes, Bf16Lanes

// The scalar op's lane-wise form.
template <class Op>
VecF vec_apply(VecF a, VecF b);
template <>
inline VecF vec_apply<SumOp>(VecF a, VecF b) {
  return vec_add(a, b);
}
template <>
inline VecF vec_apply<ProdOp>(VecF a, VecF b) {
  return vec_mul(a, b);
}
template <>
inline VecF vec_apply<MinOp>(VecF a, VecF b) {
  return vec_min(a, b);
}
template <>
inline VecF vec_apply<MaxOp>(VecF a, VecF b) {
  return vec_max(a, b);
}

// dst = op(first, src) a register at a time; first may be dst. Lanes: HalfLanes or
// Bf16Lanes, Format the matching scalar format for the tail.
template <class Op, class Lanes, class Format>
void combine_16bit_lanes(std::uint16_t* dst, const std::uint16_t* first, const std::uint16_t* src,
                         std::size_t count) {
  std::size_t i = 0;
  for (; i + 2 * kLanes <= count; i += 2 * kLanes) {
    VecF a_lo, a_hi, b_lo, b_hi;
    Lanes::load_pair(first + i, a_lo, a_hi);
    Lanes::load_pair(src + i, b_lo, b_hi);
    Lanes::store_pair(dst + i, vec_apply<Op>(a_lo, b_lo), vec_apply<Op>(a_hi, b_hi));
  }
  for (; i + kLanes <= count; i += kLanes) {
    Lanes::store(dst + i, vec_apply<Op>(Lanes::load(first + i), Lanes::load(src + i)));
  }
  for (; i < count; ++i) {
    dst[i] = Format::from_float(Op::apply(Format::to_float(first[i]), Format::to_float(src[i])));
  }
}

template <class Lanes, class Format>
void divide_16bit_lanes(std::uint16_t* data, std::size_t count, float divisor) {
  const VecF by = vec_set(divisor);
  std::size_t i = 0;
  for (; i + 2 * kLanes <= count; i += 2 * kLanes) {
    VecF lo, hi;
    Lanes::load_pair(data + i, lo, hi);
    Lanes::store_pair(data + i, vec_div(lo, by), vec_div(hi, by));
  }
  for (; i + kLanes <= count; i += kLanes)
    Lanes::store(data + i, vec_div(Lanes::load(data + i), by));
  for (; i < count; ++i) data[i] = Format::from_float(Format::to_float(data[i]) / divisor);
}

}  // namespace

}  // namespace ringlet::collectives
