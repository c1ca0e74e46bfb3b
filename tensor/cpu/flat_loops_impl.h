// One instruction-set level's flat loops (tensor/cpu/flat_loops.h), written once as plain
// loops the compiler vectorizes with that level's flags, and included only by that level's
// translation unit (flat_loops_<level>.cpp), so everything here has internal linkage: no level
// can end up running another level's instructions through a shared inline function. The
// bodies are the scalar kernels' (tensor/kernels/elementwise.h) restated here for that reason:
// the same selects and the same single roundings, so every level gives the same bits.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/half_convert.h"
#include "tensor/cpu/flat_loops.h"

#if defined(__F16C__) && defined(__AVX2__)
#include "core/half_lanes.h"
#endif
#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace ringlet::tensor::cpu {

namespace {

using core::lanes::Bf16Format;
using core::lanes::HalfFormat;

template <class T>
void relu_loop(void* out, const void* x, std::int64_t n) {
  T* o = static_cast<T*>(out);
  const T* a = static_cast<const T*>(x);
  for (std::int64_t i = 0; i < n; ++i) o[i] = a[i] > T(0) || a[i] != a[i] ? a[i] : T(0);
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
    o[i] = value <= T(0) ? T(0) : grad;  // a NaN passes the gradient, as PyTorch's
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
    return a > b || a != a ? a : b;  // a NaN on either side wins
  } else {
    return a < b || a != a ? a : b;
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

// --- batch norm ---

// Sums fn(i) for i in [0, n) with eight independent f64 accumulators, so the adds pipeline and
// vectorize instead of waiting on one another; the order (FlatLoops::Sum) is every level's.
template <class F>
double lane_sum(std::int64_t n, F&& fn) {
  double lanes[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) lanes[k] += fn(i + k);
  }
  double total = 0;
  for (; i < n; ++i) total += fn(i);
  for (double lane : lanes) total += lane;
  return total;
}

template <class T>
double sum_loop(const void* x, std::int64_t n) {
  const T* v = static_cast<const T*>(x);
  return lane_sum(n, [&](std::int64_t i) { return static_cast<double>(v[i]); });
}

template <class T>
double sum_sq_dev_loop(const void* x, std::int64_t n, double mean) {
  const T* v = static_cast<const T*>(x);
  return lane_sum(n, [&](std::int64_t i) {
    const double d = v[i] - mean;
    return d * d;
  });
}

// sum dy and sum dy * (x - mean) in one pass: lane_sum's order for each, two sets of lanes.
template <class T>
void sums_dy_loop(const void* dy, const void* x, std::int64_t n, double mean, double* sum_dy,
                  double* sum_dy_dev) {
  const T* g = static_cast<const T*>(dy);
  const T* v = static_cast<const T*>(x);
  double lanes[8] = {}, dev_lanes[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) {
      const double gk = g[i + k];
      lanes[k] += gk;
      dev_lanes[k] += gk * (v[i + k] - mean);
    }
  }
  double total = 0, dev_total = 0;
  for (; i < n; ++i) {
    const double gi = g[i];
    total += gi;
    dev_total += gi * (v[i] - mean);
  }
  for (int k = 0; k < 8; ++k) {
    total += lanes[k];
    dev_total += dev_lanes[k];
  }
  *sum_dy = total;
  *sum_dy_dev = dev_total;
}

template <class T>
void norm_grad_loop(void* dx, const void* dy, const void* x, std::int64_t n, double a_, double b_,
                    double m_, double k_) {
  T* o = static_cast<T*>(dx);
  const T* g = static_cast<const T*>(dy);
  const T* v = static_cast<const T*>(x);
  const T a = static_cast<T>(a_), b = static_cast<T>(b_), m = static_cast<T>(m_),
          k = static_cast<T>(k_);
  for (std::int64_t i = 0; i < n; ++i) o[i] = a * g[i] + b * (v[i] - m) + k;
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

// --- max pool, 2x2 window, stride 2 ---

// The first of the window's four values (row by row) that is its maximum; with NaNs, the last
// NaN (PyTorch's `val > max || isnan(val)` scan, as tensor/ops/pool.cpp's generic loop).
template <class T>
int window_argmax(const T c[4]) {
  // max without branches (std::max's selects, written out: no std:: template out of line in a
  // level's unit), then the first position holding it in integer arithmetic: compilers turn a
  // select chain on floats back into branches, and on real data each is a coin flip.
  const T top = c[0] < c[1] ? c[1] : c[0], bottom = c[2] < c[3] ? c[3] : c[2];
  const T best = top < bottom ? bottom : top;
  const int not0 = c[0] != best, not1 = c[1] != best, not2 = c[2] != best;
  int k = not0 * (1 + not1 * (1 + not2));
  if (std::isnan(c[0] + c[1] + c[2] + c[3])) {  // a NaN in the window: the exact rule
    k = 0;
    for (int j = 1; j < 4; ++j) {
      if (c[j] > c[k] || std::isnan(c[j])) k = j;
    }
  }
  return k;
}

// Outputs [from, to) of output row oy, one at a time.
// The position a window's gradient goes to: its maximum's, or none after relu where the value
// is <= 0 (relu_grad_loop's select; a NaN passes).
template <class T>
std::uint8_t gradient_position(int k, T value, bool relu) {
  return relu && value <= T(0) ? kNoGradient : static_cast<std::uint8_t>(k);
}

template <class T>
void max_2x2_scalar(const T* plane, std::int64_t width, std::int64_t oy, std::int64_t from,
                    std::int64_t to, bool relu, T* values, std::uint8_t* position) {
  const T* top = plane + 2 * oy * width;
  const T* bottom = top + width;
  for (std::int64_t ox = from; ox < to; ++ox) {
    T c[4] = {top[2 * ox], top[2 * ox + 1], bottom[2 * ox], bottom[2 * ox + 1]};
    if (relu) {
      for (T& v : c) v = v > T(0) || v != v ? v : T(0);  // relu_loop's select
    }
    const int k = window_argmax(c);
    values[ox] = c[k];
    position[ox] = gradient_position(k, c[k], relu);
  }
}

#if defined(__AVX2__)
// 16 consecutive columns of one row as its 8 even and 8 odd ones (windows' left and right).
inline void split_columns(__m256 a, __m256 b, __m256& even, __m256& odd) {
  // In-lane shuffles leave the 64-bit quarters as a0 b0 a1 b1; 0xd8 puts them in order.
  even = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xd8));
  odd = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xdd)), 0xd8));
}

inline void split_columns(const float* p, __m256& even, __m256& odd) {
  split_columns(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), even, odd);
}

// The first `columns` (< 16) of p, zeros after them; nothing past them is read.
inline void split_columns(const float* p, std::int64_t columns, __m256& even, __m256& odd) {
  const __m256i count = _mm256_set1_epi32(static_cast<int>(columns));
  const __m256i low = _mm256_cmpgt_epi32(count, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i high = _mm256_cmpgt_epi32(count, _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15));
  const float* upper = columns > 8 ? p + 8 : p;  // no pointer past the columns when unused
  split_columns(_mm256_maskload_ps(p, low), _mm256_maskload_ps(upper, high), even, odd);
}

// Each 32-bit lane's low byte, lanes in order, stored as 8 bytes.
inline void store_low_bytes(__m256i lanes, std::uint8_t* to) {
  const __m256i gathered = _mm256_shuffle_epi8(
      lanes, _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8,
                              12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
  _mm_storel_epi64(
      reinterpret_cast<__m128i*>(to),
      _mm_unpacklo_epi32(_mm256_castsi256_si128(gathered), _mm256_extracti128_si256(gathered, 1)));
}

// 8 outputs from 16 columns of a window row pair, split into even and odd columns (c0 c1 of
// the top row, c2 c3 of the bottom: each window's four values): the maximum, the first position
// holding it by lane-wise compares, the value taken from that position (so a tie of -0 and +0
// gives the scalar's bits), and its gradient_position. Returns false, writing nothing, when a
// window holds a NaN (the scalar rule then decides).
inline bool max_2x2_eight(__m256 c0, __m256 c1, __m256 c2, __m256 c3, bool relu, float* values,
                          std::uint8_t* position) {
  const __m256 nan =
      _mm256_or_ps(_mm256_cmp_ps(c0, c1, _CMP_UNORD_Q), _mm256_cmp_ps(c2, c3, _CMP_UNORD_Q));
  if (_mm256_movemask_ps(nan) != 0) return false;
  const __m256 best = _mm256_max_ps(_mm256_max_ps(c0, c1), _mm256_max_ps(c2, c3));
  const __m256i eq0 = _mm256_castps_si256(_mm256_cmp_ps(c0, best, _CMP_EQ_OQ));
  const __m256i eq1 = _mm256_castps_si256(_mm256_cmp_ps(c1, best, _CMP_EQ_OQ));
  const __m256i eq2 = _mm256_castps_si256(_mm256_cmp_ps(c2, best, _CMP_EQ_OQ));
  __m256 value = _mm256_blendv_ps(c3, c2, _mm256_castsi256_ps(eq2));
  value = _mm256_blendv_ps(value, c1, _mm256_castsi256_ps(eq1));
  value = _mm256_blendv_ps(value, c0, _mm256_castsi256_ps(eq0));
  // k = 2 or 3 (the bottom row) when neither top value is it; k odd (the right column) when
  // k = 1 (c0 is not it, c1 is) or k = 3 (none of c0, c1, c2 is).
  const __m256i below = _mm256_andnot_si256(_mm256_or_si256(eq0, eq1), _mm256_set1_epi32(2));
  const __m256i right =
      _mm256_andnot_si256(eq0, _mm256_or_si256(eq1, _mm256_xor_si256(eq2, _mm256_set1_epi32(-1))));
  __m256i k = _mm256_add_epi32(below, _mm256_srli_epi32(right, 31));
  if (relu) {
    const __m256 passes = _mm256_cmp_ps(value, _mm256_setzero_ps(), _CMP_GT_OQ);
    k = _mm256_blendv_epi8(_mm256_set1_epi32(kNoGradient), k, _mm256_castps_si256(passes));
  }
  _mm256_storeu_ps(values, value);
  store_low_bytes(k, position);
  return true;
}

// relu_loop's select lane by lane: x unless x <= 0, then +0 (a NaN stays). Four plain calls,
// no initializer_list (a std:: template the per-level unit must not emit).
inline __m256 relu_lanes(__m256 c) {
  return _mm256_and_ps(c, _mm256_cmp_ps(c, _mm256_setzero_ps(), _CMP_NLE_UQ));
}
inline void relu_lanes(__m256& c0, __m256& c1, __m256& c2, __m256& c3) {
  c0 = relu_lanes(c0);
  c1 = relu_lanes(c1);
  c2 = relu_lanes(c2);
  c3 = relu_lanes(c3);
}

// Output row oy, 8 at a time; a last partial 8 as the row's last 8 (some outputs again), and
// a row of fewer than 8 from masked loads of its columns (zeros beyond them). With `relu`, the
// windows' values go through relu first.
inline void max_2x2_row(const float* plane, std::int64_t width, std::int64_t oy, std::int64_t out_w,
                        bool relu, float* values, std::uint8_t* position) {
  const float* top = plane + 2 * oy * width;
  const float* bottom = top + width;
  const auto eight = [&](std::int64_t ox) {
    __m256 c0, c1, c2, c3;
    split_columns(top + 2 * ox, c0, c1);
    split_columns(bottom + 2 * ox, c2, c3);
    if (relu) relu_lanes(c0, c1, c2, c3);
    if (!max_2x2_eight(c0, c1, c2, c3, relu, values + ox, position + ox)) {
      max_2x2_scalar(plane, width, oy, ox, ox + 8, relu, values, position);
    }
  };
  if (out_w >= 8) {
    std::int64_t ox = 0;
    for (; ox + 8 <= out_w; ox += 8) eight(ox);
    if (ox < out_w) eight(out_w - 8);
    return;
  }
  __m256 c0, c1, c2, c3;  // the row's 2 x out_w columns, under masks
  split_columns(top, 2 * out_w, c0, c1);
  split_columns(bottom, 2 * out_w, c2, c3);
  if (relu) relu_lanes(c0, c1, c2, c3);
  float row_values[8];
  std::uint8_t row_position[8];
  if (!max_2x2_eight(c0, c1, c2, c3, relu, row_values, row_position)) {
    return max_2x2_scalar(plane, width, oy, 0, out_w, relu, values, position);
  }
  for (std::int64_t ox = 0; ox < out_w; ++ox) {
    values[ox] = row_values[ox];
    position[ox] = row_position[ox];
  }
}
#endif

template <class T>
void max_pool_2x2_loop(const void* plane_bytes, std::int64_t width, std::int64_t out_h,
                       std::int64_t out_w, bool relu, void* values_bytes, std::uint8_t* position) {
  const T* plane = static_cast<const T*>(plane_bytes);
  T* values = static_cast<T*>(values_bytes);
  for (std::int64_t oy = 0; oy < out_h; ++oy) {
    T* row_values = values + oy * out_w;
    std::uint8_t* row_position = position + oy * out_w;
#if defined(__AVX2__)
    if constexpr (std::is_same_v<T, float>) {
      max_2x2_row(plane, width, oy, out_w, relu, row_values, row_position);
      continue;
    }
#endif
    max_2x2_scalar(plane, width, oy, 0, out_w, relu, row_values, row_position);
  }
}

// --- its backward ---

// Windows [from, to) of one row pair (top, and the row below it), one at a time.
template <class T>
void unpool_2x2_scalar(T* top, std::int64_t width, std::int64_t from, std::int64_t to,
                       const T* grad, const std::uint8_t* position) {
  T* bottom = top + width;
  for (std::int64_t ox = from; ox < to; ++ox) {
    const T g = T(0) + grad[ox];
    const int k = position[ox];
    top[2 * ox] = k == 0 ? g : T(0);
    top[2 * ox + 1] = k == 1 ? g : T(0);
    bottom[2 * ox] = k == 2 ? g : T(0);
    bottom[2 * ox + 1] = k == 3 ? g : T(0);
  }
}

#if defined(__AVX2__)
// 8 windows' values for their even and odd columns as the 16 columns of their row, in order.
inline void interleave_columns(__m256 even, __m256 odd, __m256& first, __m256& second) {
  const __m256 low = _mm256_unpacklo_ps(even, odd), high = _mm256_unpackhi_ps(even, odd);
  first = _mm256_permute2f128_ps(low, high, 0x20);
  second = _mm256_permute2f128_ps(low, high, 0x31);
}

// g where the window's position is j, +0 elsewhere.
inline __m256 at_position(__m256 g, __m256i k, int j) {
  return _mm256_and_ps(g, _mm256_castsi256_ps(_mm256_cmpeq_epi32(k, _mm256_set1_epi32(j))));
}

// The 16 columns of the top and of the bottom row that 8 windows cover, from their gradients
// (already + 0) and positions.
inline void unpool_eight(__m256 g, __m256i k, __m256 columns[4]) {
  interleave_columns(at_position(g, k, 0), at_position(g, k, 1), columns[0], columns[1]);
  interleave_columns(at_position(g, k, 2), at_position(g, k, 3), columns[2], columns[3]);
}

inline __m256i positions_of(const std::uint8_t* position) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(position)));
}

// One row pair, 8 windows at a time; a last partial 8 as the row's last 8 (written again).
inline void unpool_2x2_row(float* top, std::int64_t width, std::int64_t out_w, const float* grad,
                           const std::uint8_t* position) {
  float* bottom = top + width;
  __m256 columns[4];
  const auto eight = [&](std::int64_t ox) {
    unpool_eight(_mm256_add_ps(_mm256_setzero_ps(), _mm256_loadu_ps(grad + ox)),
                 positions_of(position + ox), columns);
    _mm256_storeu_ps(top + 2 * ox, columns[0]);
    _mm256_storeu_ps(top + 2 * ox + 8, columns[1]);
    _mm256_storeu_ps(bottom + 2 * ox, columns[2]);
    _mm256_storeu_ps(bottom + 2 * ox + 8, columns[3]);
  };
  std::int64_t ox = 0;
  for (; ox + 8 <= out_w; ox += 8) eight(ox);
  if (ox < out_w) eight(out_w - 8);
}

// A row pair of fewer than 8 windows, at least 6 columns wide, that is not the plane's last
// (so its stores below stay within the plane): the gradients under a mask
// (zeros past the row), the positions read past it (the next row's), and all 16 columns of
// each row stored, the top row's excess landing on the start of the bottom row, which is
// written after it, and the bottom row's on the next row pair, written after this one. (AMD's
// masked stores are microcoded: slower than the scalar loop.)
inline void unpool_2x2_short_row(float* top, std::int64_t width, std::int64_t out_w,
                                 const float* grad, const std::uint8_t* position) {
  const __m256i windows = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(out_w)),
                                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256 columns[4];
  unpool_eight(_mm256_add_ps(_mm256_setzero_ps(), _mm256_maskload_ps(grad, windows)),
               positions_of(position), columns);
  _mm256_storeu_ps(top, columns[0]);
  _mm256_storeu_ps(top + 8, columns[1]);
  _mm256_storeu_ps(top + width, columns[2]);
  _mm256_storeu_ps(top + width + 8, columns[3]);
}
#endif

// One row pair by the widest way that fits: `more` says another row pair of the plane follows.
template <class T>
void unpool_2x2_row_pair(T* top, std::int64_t width, std::int64_t out_w, bool more, const T* grad,
                         const std::uint8_t* position) {
#if defined(__AVX2__)
  if constexpr (std::is_same_v<T, float>) {
    if (out_w >= 8) return unpool_2x2_row(top, width, out_w, grad, position);
    // The bottom row's 16 columns end inside the next row pair when width + 16 <= 4 * width.
    if (more && width >= 6) return unpool_2x2_short_row(top, width, out_w, grad, position);
  }
#else
  (void)more;
#endif
  unpool_2x2_scalar(top, width, 0, out_w, grad, position);
}

template <class T>
void max_unpool_2x2_loop(void* plane_bytes, std::int64_t height, std::int64_t width,
                         const void* grad_bytes, const std::uint8_t* position) {
  T* plane = static_cast<T*>(plane_bytes);
  const T* grad = static_cast<const T*>(grad_bytes);
  const std::int64_t out_h = height / 2, out_w = width / 2;
  for (std::int64_t oy = 0; oy < out_h; ++oy) {
    T* top = plane + 2 * oy * width;
    const T* row_grad = grad + oy * out_w;
    const std::uint8_t* row_position = position + oy * out_w;
    unpool_2x2_row_pair(top, width, out_w, oy + 1 < out_h, row_grad, row_position);
    if (width % 2 != 0) top[width - 1] = top[2 * width - 1] = T(0);  // an odd last column
  }
  for (std::int64_t k = 2 * out_h * width; k < height * width; ++k) plane[k] = T(0);  // odd row
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
  t.sum[d] = sum_loop<T>;
  t.sum_sq_dev[d] = sum_sq_dev_loop<T>;
  t.sums_dy[d] = sums_dy_loop<T>;
  t.norm_grad[d] = norm_grad_loop<T>;
  t.max_pool_2x2[d] = max_pool_2x2_loop<T>;
  t.max_unpool_2x2[d] = max_unpool_2x2_loop<T>;
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
