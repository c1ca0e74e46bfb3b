// tensor/cpu/flat_loops.h: the baseline level's loops compute what the scalar kernels (and
// core's f16/bf16 conversions) compute, every other level this CPU runs gives the baseline's
// bits (sizes around each vector width, misaligned starts, NaN, infinities, signed zeros and
// subnormals among the values), and the ops reach them (a tensor relu, add and cast run the
// level in use and agree with the strided kernel on the same values).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/isa.h"
#include "tensor/cpu/flat_loops.h"
#include "tensor/kernels/elementwise.h"
#include "tensor/ops/creation.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/movement.h"
#include "tensor/tensor.h"

using ringlet::core::Isa;
using ringlet::tensor::Tensor;
using ringlet::tensor::cpu::flat_loops;
using ringlet::tensor::cpu::FlatLoops;
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
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
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
  return outs;
}

// The 16-bit conversions through `loops`: every 16-bit value widened, and floats (random bit
// patterns, halfway cases and the specials) rounded each way.
std::vector<std::vector<std::uint32_t>> cast_outputs(const FlatLoops& loops) {
  std::vector<std::uint16_t> all(65536);
  for (std::uint32_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  std::mt19937 rng(5);
  std::vector<float> floats(70001);
  for (std::size_t i = 0; i < floats.size(); ++i) {
    const std::uint32_t bits = i % 3 == 0 ? rng() : (rng() & 0xffff0000u) | 0x8000u | (i % 2);
    std::memcpy(&floats[i], &bits, 4);
  }
  std::mt19937 rng2(6);
  const std::vector<float> specials = values<float>(4099, rng2);
  floats.insert(floats.end(), specials.begin(), specials.end());
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

TEST_CASE("baseline flat loops compute the scalar kernels' values") {
  const FlatLoops& loops = flat_loops(Isa::baseline);
  std::mt19937 rng(11);
  const std::vector<float> x = values<float>(1001, rng), g = values<float>(1001, rng);
  std::vector<float> out(x.size()), want(x.size());
  loops.relu[0](out.data(), x.data(), 1001);
  for (std::size_t i = 0; i < x.size(); ++i)
    want[i] = kernels::UnaryFn<float, kernels::UnaryOp::relu>{}(x[i]);
  CHECK(same_bits(out, want));
  loops.relu_grad[0](out.data(), g.data(), x.data(), 1001);
  for (std::size_t i = 0; i < x.size(); ++i) {
    want[i] = kernels::UnaryGradFn<float, kernels::UnaryOp::relu>{}(g[i], x[i], 0.0f);
  }
  CHECK(same_bits(out, want));
  loops.arithmetic[0][3](out.data(), x.data(), g.data(), 1001);
  for (std::size_t i = 0; i < x.size(); ++i) {
    want[i] = kernels::BinaryFn<float, kernels::BinaryOp::div>{}(x[i], g[i]);
  }
  CHECK(same_bits(out, want));
  loops.select[0][0](out.data(), x.data(), g.data(), 1001);
  for (std::size_t i = 0; i < x.size(); ++i) {
    want[i] = kernels::BinaryFn<float, kernels::BinaryOp::maximum>{}(x[i], g[i]);
  }
  CHECK(same_bits(out, want));
  loops.affine[0](out.data(), x.data(), 1001, 0.1, 2.5);
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = x[i] * 0.1f + 2.5f;
  CHECK(same_bits(out, want));
  // The conversions: core's out-of-line ones are the reference.
  const auto casts = cast_outputs(loops);
  std::size_t wrong = 0;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float f16 = ringlet::core::half_to_float(static_cast<std::uint16_t>(h));
    const float bf16 = ringlet::core::bf16_to_float(static_cast<std::uint16_t>(h));
    wrong += std::memcmp(&casts[0][h], &f16, 4) != 0;
    wrong += std::memcmp(&casts[1][h], &bf16, 4) != 0;
  }
  CHECK(wrong == 0);
  // ... and rounding each float of the set that cast_outputs narrows.
  std::mt19937 rng2(6);
  const std::vector<float> some = values<float>(4099, rng2);
  std::vector<std::uint16_t> f16(some.size()), bf16(some.size());
  loops.f32_to_f16(f16.data(), some.data(), static_cast<std::int64_t>(some.size()));
  loops.f32_to_bf16(bf16.data(), some.data(), static_cast<std::int64_t>(some.size()));
  for (std::size_t i = 0; i < some.size(); ++i) {
    wrong += f16[i] != ringlet::core::float_to_half(some[i]);
    wrong += bf16[i] != ringlet::core::float_to_bf16(some[i]);
  }
  CHECK(wrong == 0);
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

TEST_CASE("the ops take the flat loops and agree with their strided kernels") {
  // A transposed view takes the strided kernel; its contiguous copy the flat loop.
  ringlet::tensor::Generator gen(3);
  const Tensor a = ringlet::tensor::randn({33, 65}, gen), b = ringlet::tensor::randn({33, 65}, gen);
  const Tensor at = a.transpose(0, 1), bt = b.transpose(0, 1);
  const Tensor flat_sum = ringlet::tensor::add(at.contiguous(), bt.contiguous());
  const Tensor strided_sum = ringlet::tensor::add(at, bt).contiguous();
  CHECK(std::memcmp(flat_sum.raw_data(), strided_sum.raw_data(), flat_sum.nbytes()) == 0);
  const Tensor flat_relu = ringlet::tensor::relu(at.contiguous());
  const Tensor strided_relu = ringlet::tensor::relu(at).contiguous();
  CHECK(std::memcmp(flat_relu.raw_data(), strided_relu.raw_data(), flat_relu.nbytes()) == 0);
  for (const auto dtype : {ringlet::core::DType::f16, ringlet::core::DType::bf16}) {
    const Tensor flat_cast = at.contiguous().to(dtype);
    const Tensor strided_cast = at.to(dtype).contiguous();
    INFO(dtype);
    CHECK(std::memcmp(flat_cast.raw_data(), strided_cast.raw_data(), flat_cast.nbytes()) == 0);
    const Tensor back_flat = flat_cast.to(ringlet::core::DType::f32);
    const Tensor back_strided =
        flat_cast.transpose(0, 1).to(ringlet::core::DType::f32).transpose(0, 1).contiguous();
    CHECK(std::memcmp(back_flat.raw_data(), back_strided.raw_data(), back_flat.nbytes()) == 0);
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
