// One instruction-set level's flat loops (tensor/cpu/flat_loops.h), written once as plain
// loops the compiler vectorizes with that level's flags, and included only by that level's
// translation unit (flat_loops_<level>.cpp), so everything here has internal linkage: no level
// can end up running another level's instructions through a shared inline function. The
// bodies are the scalar kernels' (tensor/kernels/elementwise.h) restated here for that reason:
// the same selects and the same single roundings, so every level gives the same bits.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/half_convert.h"
#include "tensor/cpu/flat_loops.h"

#if defined(__F16C__) && defined(__AVX2__)
#include "core/half_lanes.h"
#endif

namespace ringlet::tensor::cpu {

namespace {

using core::lanes::Bf16Format;
using core::lanes::HalfFormat;

template <class T>
void relu_loop(void* out, const void* x, std::int64_t n) {
  T* o = static_cast<T*>(out);
  const T* a = static_cast<const T*>(x);
  for (std::int64_t i = 0; i < n; ++i) o[i] = a[i] > T(0) ? a[i] : T(0);
}

template <class T>
void relu_grad_loop(void* out, const void* g, const void* x, std::int64_t n) {
  T* o = static_cast<T*>(out);
  const T* dy = static_cast<const T*>(g);
  const T* a = static_cast<const T*>(x);
  for (std::int64_t i = 0; i < n; ++i) {
    // Both loads unconditional, so the select is a mask: as `x > 0 ? dy[i] : 0` the load of
    // dy[i] is conditional, and the loop would not vectorize where there are no masked loads.
    const T grad = dy[i], value = a[i];
    o[i] = value > T(0) ? grad : T(0);
  }
}

// kernels::BinaryOp's add sub mul div maximum minimum, by their index there.
template <class T, int Op>
T binary(T a, T b) {
  static_assert(Op <= 3 || Op == 5 || Op == 6, "pow has no flat loop");
  if constexpr (Op == 0) {
    return a + b;
  } else if constexpr (Op == 1) {
    return a - b;
  } else if constexpr (Op == 2) {
    return a * b;
  } else if constexpr (Op == 3) {
    return a / b;
  } else if constexpr (Op == 5) {
    return a > b ? a : b;
  } else {
    return a < b ? a : b;
  }
}

template <class T, int Op>
void binary_loop(void* out, const void* a, const void* b, std::int64_t n) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (std::int64_t i = 0; i < n; ++i) o[i] = binary<T, Op>(x[i], y[i]);
}

template <class T>
void affine_loop(void* out, const void* x, std::int64_t n, double scale, double shift) {
  T* o = static_cast<T*>(out);
  const T* a = static_cast<const T*>(x);
  const T s = static_cast<T>(scale), k = static_cast<T>(shift);
  for (std::int64_t i = 0; i < n; ++i) o[i] = a[i] * s + k;
}

// f32 -> 16 bits (Format: HalfFormat or Bf16Format), a register at a time where the level has
// F16C (and AVX2), the rest (and the baseline) one element at a time with the branch-free
// conversion.
template <class Format>
void to_16bit_loop(void* out, const void* x, std::int64_t n) {
  auto* o = static_cast<std::uint16_t*>(out);
  const auto* a = static_cast<const float*>(x);
  std::int64_t i = 0;
#if defined(__F16C__) && defined(__AVX2__)
  using Lanes = std::conditional_t<std::is_same_v<Format, HalfFormat>, core::lanes::HalfLanes,
                                   core::lanes::Bf16Lanes>;
  constexpr auto lanes = static_cast<std::int64_t>(core::lanes::kLanes);
  for (; i + lanes <= n; i += lanes) Lanes::store(o + i, core::lanes::vec_load(a + i));
#endif
  for (; i < n; ++i) o[i] = Format::from_float(a[i]);
}

// 16 bits -> f32: the branch-free conversion, which the compiler vectorizes at each level.
// (vcvtph2ps would quiet a signaling NaN, which core's conversion keeps as it is.)
template <class Format>
void from_16bit_loop(void* out, const void* x, std::int64_t n) {
  auto* o = static_cast<float*>(out);
  const auto* a = static_cast<const std::uint16_t*>(x);
  for (std::int64_t i = 0; i < n; ++i) o[i] = Format::to_float(a[i]);
}

template <class T>
void fill_row(FlatLoops& t, std::size_t d) {
  t.relu[d] = relu_loop<T>;
  t.relu_grad[d] = relu_grad_loop<T>;
  t.arithmetic[d][0] = binary_loop<T, 0>;
  t.arithmetic[d][1] = binary_loop<T, 1>;
  t.arithmetic[d][2] = binary_loop<T, 2>;
  t.arithmetic[d][3] = binary_loop<T, 3>;
  t.select[d][0] = binary_loop<T, 5>;
  t.select[d][1] = binary_loop<T, 6>;
  t.affine[d] = affine_loop<T>;
}

FlatLoops make_flat_loops() {
  FlatLoops t{};
  fill_row<float>(t, 0);
  fill_row<double>(t, 1);
  t.f32_to_f16 = to_16bit_loop<HalfFormat>;
  t.f16_to_f32 = from_16bit_loop<HalfFormat>;
  t.f32_to_bf16 = to_16bit_loop<Bf16Format>;
  t.bf16_to_f32 = from_16bit_loop<Bf16Format>;
  return t;
}

}  // namespace

}  // namespace ringlet::tensor::cpu
