// tensor/cpu/flat_loops.h: the baseline level's loops compute what the scalar kernels (and
// core's f16/bf16 conversions) compute, every other level this CPU runs gives the baseline's
// bits (sizes around each vector width, misaligned starts, NaN, infinities, signed zeros and
// subnormals among the values), batch norm's sums keep their eight-accumulator order at every
// level, every level's 2x2 max pool follows the window rule (ties, signed zeros and NaNs in
// the windows; row widths around the vector's 8 outputs) and its backward the positions' rule
// (odd heights and widths, gradients that are -0 or NaN), and the ops take them exactly where
// every operand is flat (contiguous, out's shape and a dtype with loops; in place and at a
// storage offset too) and agree there with the strided kernels.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/isa.h"
#include "tensor/cpu/flat_loops.h"
#include "tensor/cpu/flat_ops.h"
#include "tensor/kernels/elementwise.h"
#include "tensor/ops/creation.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/movement.h"
#include "tensor/tensor.h"

using ringlet::core::Isa;
using ringlet::tensor::Tensor;
using ringlet::tensor::cpu::flat_loops;
using ringlet::tensor::cpu::FlatLoops;
using ringlet::tensor::cpu::kNoGradient;
namespace kernels = ringlet::tensor::kernels;

namespace {

constexpr std::size_t kSizes[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 64, 255, 257, 1000, 4097};

// Random values with the awkward ones mixed in.
template <class T>
std::vector<T> values(std::size_t n, std::mt19937& rng) {
  using L = std::numeric_limits<T>;
  const T special[] = {T(0),           -T(0),           L::infinity(),   -L::infinity(),
                       L::quiet_NaN(), -L::quiet_NaN(), L::denorm_min(), -L::denorm_min(),
                       L::min(),       L::max(),        -L::max(),       T(1)};
  std::uniform_real_distribution<double> uniform(-3, 3);
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = rng() % 5 == 0 ? special[rng() % std::size(special)] : static_cast<T>(uniform(rng));
  }
  return v;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  return a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// The same values: the same bits, or NaN on both sides (which NaN an operation on two NaNs
// returns depends on the order the compiler gave its operands, in the scalar reference too).
template <class T>
bool same_values(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const bool both_nan = std::isnan(a[i]) && std::isnan(b[i]);
    if (!both_nan && std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return false;
  }
  return true;
}

// Runs one loop of `loops` over values starting at `offset` (a misaligned start) and returns
// the outputs. fn(out, x, y, n) calls the loop.
template <class T, class Fn>
std::vector<T> run(std::size_t n, std::size_t offset, unsigned seed, Fn fn) {
  std::mt19937 rng(seed);
  const std::vector<T> x = values<T>(n + offset, rng), y = values<T>(n + offset, rng);
  std::vector<T> out(n + offset, T(7));
  fn(out.data() + offset, x.data() + offset, y.data() + offset, static_cast<std::int64_t>(n));
  return out;
}

// Every loop of one dtype row, through `loops`, on the same inputs for every level.
template <class T>
std::vector<std::vector<T>> row_outputs(const FlatLoops& loops, std::size_t n, std::size_t offset) {
  const std::size_t d = std::is_same_v<T, float> ? 0 : 1;
  std::vector<std::vector<T>> outs;
  unsigned seed = static_cast<unsigned>(n * 31 + offset);
  outs.push_back(run<T>(n, offset, ++seed, [&](T* o, const T* x, const T*, std::int64_t k) {
    loops.relu[d](o, x, k);
  }));
  outs.push_back(run<T>(n, offset, ++seed, [&](T* o, const T* g, const T* x, std::int64_t k) {
    loops.relu_grad[d](o, g, x, k);
  }));
  for (std::size_t op = 0; op < ringlet::tensor::cpu::kFlatBinaryOps; ++op) {
    outs.push_back(run<T>(n, offset, ++seed, [&](T* o, const T* a, const T* b, std::int64_t k) {
      loops.arithmetic[d][op](o, a, b, k);
    }));
  }
  for (std::size_t op = 0; op < ringlet::tensor::cpu::kFlatSelectOps; ++op) {
    outs.push_back(run<T>(n, offset, ++seed, [&](T* o, const T* a, const T* b, std::int64_t k) {
      loops.select[d][op](o, a, b, k);
    }));
  }
  outs.push_back(run<T>(n, offset, ++seed, [&](T* o, const T* x, const T*, std::int64_t k) {
    loops.affine[d](o, x, k, 0.7310585786300049, -1.25);
  }));
  outs.push_back(run<T>(n, offset, ++seed, [&](T* o, const T* g, const T* x, std::int64_t k) {
    loops.norm_grad[d](o, g, x, k, 0.7310585786300049, -0.375, 0.125, 2.5);
  }));
  return outs;
}

// Batch norm's sums through `loops` on finite values: sum, squared deviations, and in one pass
// sum dy and dy times deviations.
template <class T>
std::vector<double> norm_sums(const FlatLoops& loops, std::size_t n, std::size_t offset) {
  const std::size_t d = std::is_same_v<T, float> ? 0 : 1;
  std::mt19937 rng(static_cast<unsigned>(n * 7 + offset));
  std::vector<T> x = values<T>(n + offset, rng), dy = values<T>(n + offset, rng);
  for (auto* v : {&x, &dy}) {
    for (T& e : *v) e = std::isfinite(e) ? e : T(1.25);
  }
  const auto k = static_cast<std::int64_t>(n);
  double sum_dy, sum_dy_dev;
  loops.sums_dy[d](dy.data() + offset, x.data() + offset, k, -0.75, &sum_dy, &sum_dy_dev);
  return {loops.sum[d](x.data() + offset, k), loops.sum_sq_dev[d](x.data() + offset, k, 0.3125),
          sum_dy, sum_dy_dev};
}

// The sums' order by its definition (FlatLoops::Sum): value i to accumulator i % 8 while 8
// remain, the rest to the total, then the accumulators added to it in order.
double eight_lane_sum(const std::vector<double>& terms) {
  double lanes[8] = {}, total = 0;
  const std::size_t whole = terms.size() / 8 * 8;
  for (std::size_t i = 0; i < whole; ++i) lanes[i % 8] += terms[i];
  for (std::size_t i = whole; i < terms.size(); ++i) total += terms[i];
  for (const double lane : lanes) total += lane;
  return total;
}

// The floats the conversions round: random bit patterns (NaN payloads, subnormals, every
// exponent), bf16 halfway cases (and one ulp either side), and the specials.
std::vector<float> narrowing_inputs() {
  std::mt19937 rng(5);
  std::vector<float> floats(70001);
  for (std::size_t i = 0; i < floats.size(); ++i) {
    const std::uint32_t bits = i % 3 == 0 ? rng() : (rng() & 0xffff0000u) | 0x8000u | (i % 2);
    std::memcpy(&floats[i], &bits, 4);
  }
  std::mt19937 rng2(6);
  const std::vector<float> specials = values<float>(4099, rng2);
  floats.insert(floats.end(), specials.begin(), specials.end());
  return floats;
}

// The 16-bit conversions through `loops`: every 16-bit value widened (f16, bf16), then
// narrowing_inputs() rounded each way (f16, bf16).
std::vector<std::vector<std::uint32_t>> cast_outputs(const FlatLoops& loops) {
  std::vector<std::uint16_t> all(65536);
  for (std::uint32_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  const std::vector<float> floats = narrowing_inputs();
  std::vector<std::vector<std::uint32_t>> outs;
  for (FlatLoops::Map1 widen : {loops.f16_to_f32, loops.bf16_to_f32}) {
    std::vector<float> wide(all.size());
    widen(wide.data(), all.data(), static_cast<std::int64_t>(all.size()));
    outs.emplace_back(all.size());
    std::memcpy(outs.back().data(), wide.data(), wide.size() * 4);
  }
  for (FlatLoops::Map1 narrow : {loops.f32_to_f16, loops.f32_to_bf16}) {
    std::vector<std::uint16_t> half(floats.size());
    narrow(half.data(), floats.data(), static_cast<std::int64_t>(floats.size()));
    outs.emplace_back(half.begin(), half.end());
  }
  return outs;
}

}  // namespace

namespace {

// Every binary loop of one dtype row of the baseline against kernels::BinaryFn.
template <class T>
void check_binary_row(const FlatLoops& loops, std::size_t d) {
  using kernels::BinaryFn;
  using kernels::BinaryOp;
  std::mt19937 rng(12);
  const std::vector<T> x = values<T>(1001, rng), y = values<T>(1001, rng);
  const auto check = [&](FlatLoops::Map2 fn, auto reference, const char* name) {
    std::vector<T> out(x.size()), want(x.size());
    fn(out.data(), x.data(), y.data(), static_cast<std::int64_t>(x.size()));
    for (std::size_t i = 0; i < x.size(); ++i) want[i] = reference(x[i], y[i]);
    CHECK_MESSAGE(same_values(out, want),
                  (std::string(name) + (sizeof(T) == 4 ? " on f32" : " on f64")));
  };
  check(loops.arithmetic[d][0], BinaryFn<T, BinaryOp::add>{}, "add");
  check(loops.arithmetic[d][1], BinaryFn<T, BinaryOp::sub>{}, "sub");
  check(loops.arithmetic[d][2], BinaryFn<T, BinaryOp::mul>{}, "mul");
  check(loops.arithmetic[d][3], BinaryFn<T, BinaryOp::div>{}, "div");
  check(loops.select[d][0], BinaryFn<T, BinaryOp::maximum>{}, "maximum");
  check(loops.select[d][1], BinaryFn<T, BinaryOp::minimum>{}, "minimum");
}

// relu, its gradient and the multiply-add of one dtype row against the scalar kernels.
template <class T>
void check_unary_row(const FlatLoops& loops, std::size_t d) {
  std::mt19937 rng(11);
  const std::vector<T> x = values<T>(1001, rng), g = values<T>(1001, rng);
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<T> out(x.size()), want(x.size());
  loops.relu[d](out.data(), x.data(), n);
  for (std::size_t i = 0; i < x.size(); ++i) {
    want[i] = kernels::UnaryFn<T, kernels::UnaryOp::relu>{}(x[i]);
  }
  CHECK(same_bits(out, want));
  loops.relu_grad[d](out.data(), g.data(), x.data(), n);
  for (std::size_t i = 0; i < x.size(); ++i) {
    want[i] = kernels::UnaryGradFn<T, kernels::UnaryOp::relu>{}(g[i], x[i], T(0));
  }
  CHECK(same_bits(out, want));
  loops.affine[d](out.data(), x.data(), n, 0.1, 2.5);
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = x[i] * static_cast<T>(0.1) + T(2.5);
  CHECK(same_bits(out, want));
}

}  // namespace

TEST_CASE("baseline flat loops compute the scalar kernels' values") {
  const FlatLoops& loops = flat_loops(Isa::baseline);
  check_binary_row<float>(loops, 0);
  check_binary_row<double>(loops, 1);
  check_unary_row<float>(loops, 0);
  check_unary_row<double>(loops, 1);
  // The conversions: core's out-of-line ones are the reference, over every 16-bit value and
  // every float cast_outputs rounds.
  const auto casts = cast_outputs(loops);
  std::size_t wrong = 0;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float f16 = ringlet::core::half_to_float(static_cast<std::uint16_t>(h));
    const float bf16 = ringlet::core::bf16_to_float(static_cast<std::uint16_t>(h));
    wrong += std::memcmp(&casts[0][h], &f16, 4) != 0;
    wrong += std::memcmp(&casts[1][h], &bf16, 4) != 0;
  }
  CHECK(wrong == 0);
  const std::vector<float> floats = narrowing_inputs();
  for (std::size_t i = 0; i < floats.size(); ++i) {
    wrong += casts[2][i] != ringlet::core::float_to_half(floats[i]);
    wrong += casts[3][i] != ringlet::core::float_to_bf16(floats[i]);
  }
  CHECK(wrong == 0);
}

TEST_CASE("batch norm's sums follow their eight-accumulator order at every level") {
  for (const Isa isa : ringlet::core::supported_isas()) {
    for (const std::size_t n : kSizes) {
      for (const std::size_t offset : {0, 1}) {
        INFO(ringlet::core::isa_name(isa), " n=", n, " offset ", offset);
        const auto got = norm_sums<float>(flat_loops(isa), n, offset);
        std::mt19937 rng(static_cast<unsigned>(n * 7 + offset));
        std::vector<float> x = values<float>(n + offset, rng), dy = values<float>(n + offset, rng);
        for (auto* v : {&x, &dy}) {
          for (float& e : *v) e = std::isfinite(e) ? e : 1.25f;
        }
        std::vector<double> plain(n), square(n), grad(n), product(n);
        for (std::size_t i = 0; i < n; ++i) {
          const double v = x[offset + i];
          plain[i] = v;
          square[i] = (v - 0.3125) * (v - 0.3125);
          grad[i] = dy[offset + i];
          product[i] = static_cast<double>(dy[offset + i]) * (v + 0.75);
        }
        CHECK(got[0] == eight_lane_sum(plain));
        CHECK(got[1] == eight_lane_sum(square));
        CHECK(got[2] == eight_lane_sum(grad));
        CHECK(got[3] == eight_lane_sum(product));
        const auto got64 = norm_sums<double>(flat_loops(isa), n, offset);
        const auto want64 = norm_sums<double>(flat_loops(Isa::baseline), n, offset);
        CHECK(same_bits(got64, want64));
      }
    }
  }
}

TEST_CASE("every instruction-set level's flat loops give the baseline's bits") {
  const auto levels = ringlet::core::supported_isas();
  REQUIRE(levels.front() == Isa::baseline);
  MESSAGE("levels this CPU runs: ", levels.size(), " (each compared with the baseline)");
  const FlatLoops& base = flat_loops(Isa::baseline);
  for (const Isa isa : levels) {
    if (isa == Isa::baseline) continue;
    const FlatLoops& level = flat_loops(isa);
    for (const std::size_t n : kSizes) {
      for (const std::size_t offset : {0, 1, 3}) {
        INFO(ringlet::core::isa_name(isa), " n=", n, " offset ", offset);
        const auto want32 = row_outputs<float>(base, n, offset);
        const auto got32 = row_outputs<float>(level, n, offset);
        for (std::size_t k = 0; k < want32.size(); ++k)
          CHECK_MESSAGE(same_bits(got32[k], want32[k]), "f32 loop ", k);
        const auto want64 = row_outputs<double>(base, n, offset);
        const auto got64 = row_outputs<double>(level, n, offset);
        for (std::size_t k = 0; k < want64.size(); ++k)
          CHECK_MESSAGE(same_bits(got64[k], want64[k]), "f64 loop ", k);
      }
    }
    const auto want = cast_outputs(base), got = cast_outputs(level);
    for (std::size_t k = 0; k < want.size(); ++k) {
      INFO(ringlet::core::isa_name(isa), " conversion ", k);
      CHECK(same_bits(got[k], want[k]));
    }
  }
}

TEST_CASE(
    "the ops take the flat loops where every operand is flat, and agree with the strided kernels") {
  namespace cpu = ringlet::tensor::cpu;
  using ringlet::core::DType;
  ringlet::tensor::Generator gen(3);
  const Tensor a = ringlet::tensor::randn({33, 65}, gen), b = ringlet::tensor::randn({33, 65}, gen);
  const Tensor at = a.transpose(0, 1), bt = b.transpose(0, 1);
  Tensor out = Tensor::empty({65, 33});
  // Taken: contiguous operands of out's shape and dtype, also in place and at a storage offset.
  CHECK(cpu::flat_binary(kernels::BinaryOp::sub, out, at.contiguous(), bt.contiguous()));
  const Tensor strided = ringlet::tensor::sub(at, bt).contiguous();  // the strided kernel
  CHECK(std::memcmp(out.raw_data(), strided.raw_data(), out.nbytes()) == 0);
  Tensor inplace = at.contiguous();
  CHECK(cpu::flat_binary(kernels::BinaryOp::sub, inplace, inplace, bt.contiguous()));
  CHECK(std::memcmp(inplace.raw_data(), strided.raw_data(), out.nbytes()) == 0);
  const Tensor rows = ringlet::tensor::narrow(a, 0, 5, 20),
               rows_b = ringlet::tensor::narrow(b, 0, 5, 20);
  REQUIRE(rows.offset() > 0);
  Tensor rows_out = Tensor::empty({20, 65});
  CHECK(cpu::flat_binary(kernels::BinaryOp::maximum, rows_out, rows, rows_b));
  const Tensor rows_want = ringlet::tensor::maximum(rows.transpose(0, 1), rows_b.transpose(0, 1))
                               .transpose(0, 1)
                               .contiguous();
  CHECK(std::memcmp(rows_out.raw_data(), rows_want.raw_data(), rows_out.nbytes()) == 0);
  Tensor empty = Tensor::empty({0, 65});
  CHECK(cpu::flat_relu(empty, Tensor::empty({0, 65})));
  CHECK(cpu::flat_relu(out, at.contiguous()));
  const Tensor relu_strided = ringlet::tensor::relu(at).contiguous();
  CHECK(std::memcmp(out.raw_data(), relu_strided.raw_data(), out.nbytes()) == 0);
  CHECK(cpu::flat_relu_grad(out, bt.contiguous(), at.contiguous()));
  // Not taken: a strided or broadcast operand, pow, integers, mixed dtypes.
  CHECK_FALSE(cpu::flat_binary(kernels::BinaryOp::add, out, at, bt.contiguous()));
  CHECK_FALSE(cpu::flat_binary(kernels::BinaryOp::add, out, at.contiguous(),
                               ringlet::tensor::full({65, 1}, 2.0)));
  CHECK_FALSE(cpu::flat_binary(kernels::BinaryOp::pow, out, at.contiguous(), bt.contiguous()));
  const Tensor ints = ringlet::tensor::full({65, 33}, 3.0, DType::i32);
  Tensor ints_out = Tensor::empty({65, 33}, DType::i32);
  CHECK_FALSE(cpu::flat_binary(kernels::BinaryOp::add, ints_out, ints, ints));
  CHECK_FALSE(cpu::flat_relu(ints_out, ints));
  CHECK_FALSE(cpu::flat_cast(Tensor::empty({65, 33}, DType::f64), at.contiguous()));
  // Casts: the flat loop against the strided conversion, both ways.
  for (const auto dtype : {DType::f16, DType::bf16}) {
    INFO(dtype);
    Tensor narrow16 = Tensor::empty({65, 33}, dtype);
    CHECK(cpu::flat_cast(narrow16, at.contiguous()));
    const Tensor strided_cast = at.to(dtype).contiguous();
    CHECK(std::memcmp(narrow16.raw_data(), strided_cast.raw_data(), narrow16.nbytes()) == 0);
    Tensor wide = Tensor::empty({65, 33});
    CHECK(cpu::flat_cast(wide, narrow16));
    const Tensor back_strided =
        narrow16.transpose(0, 1).to(DType::f32).transpose(0, 1).contiguous();
    CHECK(std::memcmp(wide.raw_data(), back_strided.raw_data(), wide.nbytes()) == 0);
  }
}

namespace {

// The 2x2 stride-2 max pool by its rule, one window at a time: the first maximum row by row,
// the last NaN where there is one (PyTorch's `val > max || isnan(val)` scan), as its position
// in the window. The caller applies relu to the plane first for the fused form (a NaN stays
// NaN), which gives kNoGradient where the value is <= 0 (a NaN passes the gradient).
template <class T>
void reference_pool(const std::vector<T>& plane, std::int64_t width, std::int64_t out_h,
                    std::int64_t out_w, bool relu, std::vector<T>& values,
                    std::vector<std::uint8_t>& position) {
  for (std::int64_t oy = 0; oy < out_h; ++oy) {
    for (std::int64_t ox = 0; ox < out_w; ++ox) {
      const std::int64_t corner = 2 * oy * width + 2 * ox;
      const std::int64_t in_window[4] = {corner, corner + 1, corner + width, corner + width + 1};
      int k = 0;
      for (int j = 1; j < 4; ++j) {
        if (plane[in_window[j]] > plane[in_window[k]] || std::isnan(plane[in_window[j]])) k = j;
      }
      const T value = plane[in_window[k]];
      values[oy * out_w + ox] = value;
      position[oy * out_w + ox] =
          relu && value <= T(0) ? kNoGradient : static_cast<std::uint8_t>(k);
    }
  }
}

// Values on a coarse grid (so windows hold ties, -0 beside +0 too) with the awkward ones; without
// NaNs too, since a NaN sends a vector's 8 windows to the scalar rule.
template <class T>
std::vector<T> pool_values(std::size_t n, std::mt19937& rng, bool nans) {
  std::vector<T> v = values<T>(n, rng);
  for (auto& x : v) {
    if (rng() % 2 == 0 && std::isfinite(x)) x = std::round(x * 2) / 2;
    if (!nans && std::isnan(x)) x = T(0.5);
  }
  return v;
}

template <class T>
void check_pool_level(const FlatLoops& loops, std::size_t d, std::mt19937& rng, bool nans,
                      bool relu) {
  for (const std::int64_t width : {2, 3, 4, 5, 14, 15, 16, 17, 28, 31, 33}) {
    for (const std::int64_t height : {2, 3, 28}) {
      const std::int64_t out_h = height / 2, out_w = width / 2;
      const auto plane = pool_values<T>(static_cast<std::size_t>(width * height), rng, nans);
      const auto outputs = static_cast<std::size_t>(out_h * out_w);
      std::vector<T> want(outputs), got(outputs);
      std::vector<std::uint8_t> want_at(outputs), got_at(outputs, 99);
      std::vector<T> pooled = plane;
      if (relu) {  // relu_loop's select, as the relu op gives it: NaN stays NaN
        for (T& v : pooled) v = v > T(0) || std::isnan(v) ? v : T(0);
      }
      reference_pool(pooled, width, out_h, out_w, relu, want, want_at);
      loops.max_pool_2x2[d](plane.data(), width, out_h, out_w, relu, got.data(), got_at.data());
      INFO("width ", width, " height ", height, nans ? " with NaNs" : " without NaNs",
           relu ? ", relu first" : "");
      CHECK(same_bits(got, want));
      CHECK(got_at == want_at);
    }
  }
}

}  // namespace

TEST_CASE(
    "max pool 2x2, also after relu: every level gives the rule's values (bit for bit) and "
    "indices") {
  std::mt19937 rng(11);
  for (const Isa isa : ringlet::core::supported_isas()) {
    INFO(ringlet::core::isa_name(isa));
    for (const bool nans : {true, false}) {
      for (const bool relu : {false, true}) {
        check_pool_level<float>(flat_loops(isa), 0, rng, nans, relu);
        check_pool_level<double>(flat_loops(isa), 1, rng, nans, relu);
      }
    }
  }
}

namespace {

// The pool's backward by its rule: a zero plane, each window's gradient + 0 at its position.
template <class T>
std::vector<T> reference_unpool(std::int64_t height, std::int64_t width, const std::vector<T>& grad,
                                const std::vector<std::uint8_t>& position) {
  std::vector<T> plane(static_cast<std::size_t>(height * width), T(0));
  const std::int64_t out_w = width / 2;
  for (std::size_t i = 0; i < grad.size(); ++i) {
    const std::int64_t oy = static_cast<std::int64_t>(i) / out_w,
                       ox = static_cast<std::int64_t>(i) % out_w;
    const int k = position[i];
    if (k == kNoGradient) continue;
    plane[(2 * oy + k / 2) * width + 2 * ox + k % 2] += grad[i];
  }
  return plane;
}

template <class T>
void check_unpool_level(const FlatLoops& loops, std::size_t d, std::mt19937& rng) {
  for (const std::int64_t width : {2, 3, 4, 5, 14, 15, 16, 17, 28, 31, 33}) {
    for (const std::int64_t height : {2, 3, 28}) {
      const auto outputs = static_cast<std::size_t>((height / 2) * (width / 2));
      std::vector<T> grad = values<T>(outputs, rng);  // NaNs, infinities, -0 among them
      std::vector<std::uint8_t> position(outputs);
      for (auto& k : position) k = static_cast<std::uint8_t>(rng() % 5);  // kNoGradient too
      const auto want = reference_unpool(height, width, grad, position);
      std::vector<T> got(want.size(), T(7));  // every element must be written
      loops.max_unpool_2x2[d](got.data(), height, width, grad.data(), position.data());
      INFO("width ", width, " height ", height);
      CHECK(same_bits(got, want));
    }
  }
}

}  // namespace

TEST_CASE("the max pool's backward: every level writes the positions' rule, bit for bit") {
  std::mt19937 rng(12);
  for (const Isa isa : ringlet::core::supported_isas()) {
    INFO(ringlet::core::isa_name(isa));
    check_unpool_level<float>(flat_loops(isa), 0, rng);
    check_unpool_level<double>(flat_loops(isa), 1, rng);
  }
}

TEST_CASE("a level this CPU cannot run is refused by the tensor loops too") {
  std::size_t refused = 0;
  for (const Isa isa : {Isa::avx2, Isa::avx512}) {
    if (ringlet::core::isa_supported(isa)) continue;
    ++refused;
    CHECK_THROWS_WITH_AS(flat_loops(isa), doctest::Contains("cannot run"),
                         ringlet::core::ValueError);
  }
  MESSAGE("levels this CPU lacks: ", refused);
}
