// The flat loops of the hottest CPU kernels (all operands contiguous, none broadcast), compiled
// once per instruction-set level (core/isa.h) into a table of plain function pointers, as the
// host reduction's are (collectives/reduce_table.h): relu and its gradient, the arithmetic
// binary ops, batch norm's per-channel multiply-add, its statistics' sums and its input
// gradient, the f16/bf16 <-> f32 conversions, and one plane of the CNNs' 2x2, stride-2 max
// pool with its maxima's positions, and of its backward.
// The ops (tensor/ops/elementwise.cpp, norm.cpp, pool.cpp, cpu/copy.cpp) call through the table of
// the level in use for the flat case and keep their generic loops for the rest. Every level gives
// the baseline's bits (products are not fused: -ffp-contract=off; the selects are the scalar
// kernels'; f16/bf16 round as core's conversions); tests/tensor/test_flat_loops.cpp checks each
// level this machine has against the baseline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/isa.h"

namespace ringlet::tensor::cpu {

// The binary ops with a flat loop, in kernels::BinaryOp's order (pow has none).
inline constexpr std::size_t kFlatBinaryOps = 4;  // add sub mul div
inline constexpr std::size_t kFlatSelectOps = 2;  // maximum minimum
// Index 0 is f32, 1 is f64.
inline constexpr std::size_t kFlatDTypes = 2;
// T's row (float or double).
template <class T>
inline constexpr std::size_t kFlatRow = std::is_same_v<T, float> ? 0 : 1;
// The 2x2 pool's position of a window that passes no gradient (after relu: its value is 0).
inline constexpr std::uint8_t kNoGradient = 4;

struct FlatLoops {
  using Map1 = void (*)(void* out, const void* x, std::int64_t n);
  using Map2 = void (*)(void* out, const void* a, const void* b, std::int64_t n);
  using Affine = void (*)(void* out, const void* x, std::int64_t n, double scale, double shift);
  Map1 relu[kFlatDTypes];                        // out = x > 0 ? x : 0
  Map2 relu_grad[kFlatDTypes];                   // (g, x): out = x > 0 ? g : 0
  Map2 arithmetic[kFlatDTypes][kFlatBinaryOps];  // out = a op b
  Map2 select[kFlatDTypes][kFlatSelectOps];      // a > b ? a : b, a < b ? a : b
  Affine affine[kFlatDTypes];  // out = x * scale + shift, scale and shift in the dtype
  // Batch norm's sums over a run of n values, in f64 with eight interleaved accumulators
  // (value i goes to accumulator i % 8 while 8 remain, the rest to a total, which then adds the
  // accumulators in order): sum v; sum (v - mean)^2; and, in one pass over dy and x (the
  // backward's), sum dy and sum dy * (x - mean), each in that order.
  using Sum = double (*)(const void* x, std::int64_t n);
  using SumDev = double (*)(const void* x, std::int64_t n, double mean);
  using SumsDy = void (*)(const void* dy, const void* x, std::int64_t n, double mean,
                          double* sum_dy, double* sum_dy_dev);
  Sum sum[kFlatDTypes];
  SumDev sum_sq_dev[kFlatDTypes];
  SumsDy sums_dy[kFlatDTypes];
  // Batch norm's input gradient on a run: dx = a * dy + b * (x - m) + k, a b m k in the dtype.
  using NormGrad = void (*)(void* dx, const void* dy, const void* x, std::int64_t n, double a,
                            double b, double m, double k);
  NormGrad norm_grad[kFlatDTypes];
  Map1 f32_to_f16, f16_to_f32, f32_to_bf16, bf16_to_f32;  // 16-bit values as std::uint16_t
  // One contiguous plane (rows of `width`) pooled by 2x2 windows with stride 2 and no padding
  // into out_h x out_w `values` and, in `position`, where each window's maximum is in it (0..3,
  // row by row): the first of tied maxima, a NaN winning over every number (PyTorch's rule).
  // With `relu`, of relu(plane) (relu's x > 0 ? x : 0): max pool after ReLU, without its
  // output; a window whose value is not > 0 then gets kNoGradient (relu passes none there).
  using Pool2x2 = void (*)(const void* plane, std::int64_t width, std::int64_t out_h,
                           std::int64_t out_w, bool relu, void* values, std::uint8_t* position);
  Pool2x2 max_pool_2x2[kFlatDTypes];
  // Its backward, one height x width plane of input gradient from the (height / 2) x
  // (width / 2) gradient of the pooled values and their positions: each window's gradient at
  // its position (added to +0, so a -0 comes out +0 as adding into zeros gives), zeros at the
  // other three, in an odd last column and row, and everywhere in a kNoGradient window.
  using Unpool2x2 = void (*)(void* plane_grad, std::int64_t height, std::int64_t width,
                             const void* grad, const std::uint8_t* position);
  Unpool2x2 max_unpool_2x2[kFlatDTypes];
};

// Each level's table; the avx2 and avx512 ones exist only in x86-64 builds.
const FlatLoops& flat_loops_baseline();
const FlatLoops& flat_loops_avx2();
const FlatLoops& flat_loops_avx512();

// The table of `isa`, which must be supported on this CPU (ValueError naming what is missing).
const FlatLoops& flat_loops(core::Isa isa);
// The table of the level in use (core::active_isa()).
const FlatLoops& flat_loops();

}  // namespace ringlet::tensor::cpu
