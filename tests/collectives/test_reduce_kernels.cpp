// collectives/reduce_kernels and collectives/types: every dtype x op against a per-element
// reference, at sizes 0, 1, 7, 1000, 4097 (past the 256-element f16/bf16 block, not a multiple
// of any vector width) with dst and src offset by different element counts, so vector loops
// run with every peel / remainder; reduce_pair (out of place) against reduce_into; NaN
// propagation of min/max; divide_by; error messages. These run at the level in use
// (RINGLET_ISA or the best this CPU has); the last cases compare every level this CPU runs with
// the baseline, bit for bit.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "collectives/reduce_kernels.h"
#include "collectives/types.h"
#include "core/dtype.h"
#include "core/error.h"

using namespace ringlet::collectives;
using ringlet::core::bf16_to_float;
using ringlet::core::float_to_bf16;
using ringlet::core::float_to_half;
using ringlet::core::half_to_float;

namespace {

constexpr ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                             ReduceOp::avg};
constexpr ReduceOp kBitwiseOps[] = {ReduceOp::band, ReduceOp::bor, ReduceOp::bxor};

// Every op of a dtype: the arithmetic ones, and the bitwise ones for integers.
std::vector<ReduceOp> ops_for(DType dtype) {
  std::vector<ReduceOp> ops(std::begin(kOps), std::end(kOps));
  if (!ringlet::core::is_floating(dtype))
    ops.insert(ops.end(), std::begin(kBitwiseOps), std::end(kBitwiseOps));
  return ops;
}
constexpr std::size_t kSizes[] = {0, 1, 7, 1000, 4097};
// (dst offset, src offset) in elements: aligned, and misaligned by different amounts.
constexpr std::size_t kOffsets[][2] = {{0, 0}, {1, 0}, {0, 3}, {1, 1}, {3, 2}};

// The reference: one element at a time, written for clarity. Integers wrap (two's
// complement), min/max on floats return NaN when either operand is NaN, avg is sum.
template <class T>
T reference(ReduceOp op, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: return a + b;
      case ReduceOp::prod: return a * b;
      case ReduceOp::min:
        return (std::isnan(a) || std::isnan(b)) ? std::numeric_limits<T>::quiet_NaN()
                                                : std::min(a, b);
      case ReduceOp::max:
        return (std::isnan(a) || std::isnan(b)) ? std::numeric_limits<T>::quiet_NaN()
                                                : std::max(a, b);
      default: break;  // the bitwise ops are for integers
    }
  } else {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
      case ReduceOp::prod: return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
      case ReduceOp::min: return std::min(a, b);
      case ReduceOp::max: return std::max(a, b);
      case ReduceOp::band: return static_cast<T>(a & b);
      case ReduceOp::bor: return static_cast<T>(a | b);
      case ReduceOp::bxor: return static_cast<T>(a ^ b);
    }
  }
  return T{};
}

template <class T>
bool same(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return (std::isnan(a) && std::isnan(b)) || a == b;
  } else {
    return a == b;
  }
}

template <class T>
T random_value(std::mt19937& rng) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(std::uniform_real_distribution<double>(-100.0, 100.0)(rng));
  } else {
    // The full range, so sums and products overflow and must wrap.
    return static_cast<T>(rng());
  }
}

// Runs every op x size x offset for a native element type; `same` is exact equality, since
// a vectorized add/mul/min/max is the same IEEE operation as the scalar one.
template <class T>
void check_native(DType dtype) {
  std::mt19937 rng(1234);
  for (ReduceOp op : ops_for(dtype)) {
    for (std::size_t n : kSizes) {
      for (const auto& offset : kOffsets) {
        std::vector<T> dst(n + 4), src(n + 4);
        for (auto& v : dst) v = random_value<T>(rng);
        for (auto& v : src) v = random_value<T>(rng);
        std::vector<T> expected = dst;
        T* d = dst.data() + offset[0];
        const T* s = src.data() + offset[1];
        for (std::size_t i = 0; i < n; ++i) expected[offset[0] + i] = reference(op, d[i], s[i]);
        reduce_into(d, s, n, dtype, op);
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < dst.size(); ++i) wrong += !same(dst[i], expected[i]);
        INFO(dtype, " ", reduce_op_name(op), " n=", n, " offsets ", offset[0], ",", offset[1]);
        CHECK(wrong == 0);  // also: nothing outside [d, d + n) was written
      }
    }
  }
}

using ToFloat = float (*)(std::uint16_t);
using FromFloat = std::uint16_t (*)(float);

// f16/bf16: the result must be exactly "widen both, combine in f32, round once", and within
// the stated tolerance of the f64 result: one ulp relative (f16: 2^-10, bf16: 2^-7; round to
// nearest is half an ulp, the rest covers rounding twice, f64 -> f32 -> 16 bit), plus f16's
// subnormal spacing 2^-24 as absolute tolerance near zero.
void check_16bit(DType dtype, ToFloat to_float, FromFloat from_float, double rtol, double atol) {
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (ReduceOp op : kOps) {
    for (std::size_t n : kSizes) {
      for (const auto& offset : kOffsets) {
        std::vector<std::uint16_t> dst(n + 4), src(n + 4);
        for (auto& v : dst) v = from_float(dist(rng));
        for (auto& v : src) v = from_float(dist(rng));
        const std::vector<std::uint16_t> before = dst;
        std::vector<std::uint16_t> expected = dst;
        std::uint16_t* d = dst.data() + offset[0];
        const std::uint16_t* s = src.data() + offset[1];
        for (std::size_t i = 0; i < n; ++i) {
          expected[offset[0] + i] = from_float(reference(op, to_float(d[i]), to_float(s[i])));
        }
        reduce_into(d, s, n, dtype, op);
        std::size_t wrong = 0, out_of_tolerance = 0;
        for (std::size_t i = 0; i < dst.size(); ++i) wrong += dst[i] != expected[i];
        for (std::size_t i = 0; i < n; ++i) {
          const double exact =
              reference<double>(op, to_float(before[offset[0] + i]), to_float(s[i]));
          const double got = to_float(d[i]);
          out_of_tolerance += !(std::fabs(got - exact) <= rtol * std::fabs(exact) + atol);
        }
        INFO(dtype, " ", reduce_op_name(op), " n=", n, " offsets ", offset[0], ",", offset[1]);
        CHECK(wrong == 0);
        CHECK(out_of_tolerance == 0);
      }
    }
  }
}

template <class T>
std::string error_of(T&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("reduce_into f32 every op, size and alignment") { check_native<float>(DType::f32); }
TEST_CASE("reduce_into f64 every op, size and alignment") { check_native<double>(DType::f64); }
TEST_CASE("reduce_into i32 every op (wrapping)") { check_native<std::int32_t>(DType::i32); }
TEST_CASE("reduce_into i64 every op (wrapping)") { check_native<std::int64_t>(DType::i64); }
TEST_CASE("reduce_into u8 every op (wrapping)") { check_native<std::uint8_t>(DType::u8); }

TEST_CASE("the bitwise ops are refused for floating dtypes, naming the op, at every count") {
  float a[2] = {1, 2}, b[2] = {3, 4};
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (ReduceOp op : kBitwiseOps) {
      const std::string expected = std::string(reduce_op_name(op)) + " is for the integer dtypes";
      for (std::size_t n : {0, 2}) {
        CHECK_THROWS_WITH_AS(reduce_into(a, b, n, dtype, op), doctest::Contains(expected.c_str()),
                             ringlet::core::DTypeError);
      }
    }
  }
}

TEST_CASE("reduce_into f16: widen, combine in f32, round once") {
  check_16bit(DType::f16, half_to_float, float_to_half, 0x1p-10, 0x1p-24);
}
TEST_CASE("reduce_into bf16: widen, combine in f32, round once") {
  check_16bit(DType::bf16, bf16_to_float, float_to_bf16, 0x1p-7, 0.0);
}

// The kernels convert f16/bf16 with their own branch-free (vectorizable) code; it must agree
// bit for bit with core's conversions. Every 16-bit pattern meets a permutation of all of them
// under every op, and is divided by 3 and 7 (inexact quotients exercise rounding, subnormals
// and overflow). NaNs only need to stay NaN: which NaN operand's sign survives is up to the
// hardware and the compiler's operand order.
TEST_CASE("reduce_pair (dst = a op b) equals reduce_into on a copy of a, every dtype and op") {
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64}) {
    const std::size_t es = ringlet::core::dtype_size(dtype);
    for (ReduceOp op : kOps) {
      for (std::size_t n : kSizes) {
        INFO(dtype, " ", reduce_op_name(op), " n=", n);
        std::mt19937 gen(static_cast<unsigned>(n * 7 + static_cast<int>(op)));
        std::vector<unsigned char> a(n * es + 8), b(n * es + 8);
        for (auto& byte : a) byte = static_cast<unsigned char>(gen() % 64);  // finite values
        for (auto& byte : b) byte = static_cast<unsigned char>(gen() % 64);
        std::vector<unsigned char> expected = a, got(n * es + 8, 0xee);
        reduce_into(expected.data(), b.data(), n, dtype, op);
        const std::vector<unsigned char> a_before = a;
        reduce_pair(got.data(), a.data(), b.data(), n, dtype, op);
        CHECK(std::vector<unsigned char>(got.begin(), got.begin() + n * es) ==
              std::vector<unsigned char>(expected.begin(), expected.begin() + n * es));
        CHECK(a == a_before);  // the first operand is only read
      }
    }
  }
}

TEST_CASE("f16/bf16 kernels agree with core's conversions on every 16-bit value") {
  struct Format {
    DType dtype;
    ToFloat to_float;
    FromFloat from_float;
  };
  for (const Format& format : {Format{DType::f16, half_to_float, float_to_half},
                               Format{DType::bf16, bf16_to_float, float_to_bf16}}) {
    const auto same_bits = [&](std::uint16_t got, std::uint16_t want) {
      const bool nan_got = std::isnan(format.to_float(got));
      const bool nan_want = std::isnan(format.to_float(want));
      return nan_want ? nan_got : got == want;
    };
    std::vector<std::uint16_t> all(65536), permuted(65536);
    for (std::uint32_t i = 0; i < 65536; ++i) {
      all[i] = static_cast<std::uint16_t>(i);
      permuted[i] = static_cast<std::uint16_t>(i * 40503u);  // odd multiplier: a bijection
    }
    for (ReduceOp op : kOps) {
      std::vector<std::uint16_t> dst = all;
      reduce_into(dst.data(), permuted.data(), dst.size(), format.dtype, op);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < dst.size(); ++i) {
        const float r = reference(op, format.to_float(all[i]), format.to_float(permuted[i]));
        wrong += !same_bits(dst[i], format.from_float(r));
      }
      INFO(format.dtype, " ", reduce_op_name(op));
      CHECK(wrong == 0);
    }
    for (int divisor : {3, 7}) {
      std::vector<std::uint16_t> dst = all;
      divide_by(dst.data(), dst.size(), format.dtype, divisor);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < dst.size(); ++i) {
        const float q = format.to_float(all[i]) / static_cast<float>(divisor);
        wrong += !same_bits(dst[i], format.from_float(q));
      }
      INFO(format.dtype, " / ", divisor);
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("min/max propagate NaN from either side, also inside vector loops") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (ReduceOp op : {ReduceOp::min, ReduceOp::max}) {
    for (std::size_t n : {std::size_t{4}, std::size_t{1000}}) {
      // NaNs at positions hit by the vector body and by the scalar remainder.
      std::vector<float> a(n, 1.0f), b(n, 2.0f);
      a[0] = nan;
      b[1] = nan;
      a[2] = nan;
      b[2] = nan;
      a[n - 1] = nan;
      std::vector<double> a64(a.begin(), a.end()), b64(b.begin(), b.end());
      std::vector<std::uint16_t> a16(n), b16(n), abf(n), bbf(n);
      for (std::size_t i = 0; i < n; ++i) {
        a16[i] = float_to_half(a[i]);
        b16[i] = float_to_half(b[i]);
        abf[i] = float_to_bf16(a[i]);
        bbf[i] = float_to_bf16(b[i]);
      }
      reduce_into(a.data(), b.data(), n, DType::f32, op);
      reduce_into(a64.data(), b64.data(), n, DType::f64, op);
      reduce_into(a16.data(), b16.data(), n, DType::f16, op);
      reduce_into(abf.data(), bbf.data(), n, DType::bf16, op);
      const float finite = op == ReduceOp::min ? 1.0f : 2.0f;
      INFO(reduce_op_name(op), " n=", n);
      for (std::size_t i = 0; i < n; ++i) {
        const bool want_nan = i <= 2 || i == n - 1;
        CHECK(std::isnan(a[i]) == want_nan);
        CHECK(std::isnan(a64[i]) == want_nan);
        CHECK(std::isnan(half_to_float(a16[i])) == want_nan);
        CHECK(std::isnan(bf16_to_float(abf[i])) == want_nan);
        if (!want_nan) {
          CHECK(a[i] == finite);
          CHECK(a64[i] == finite);
          CHECK(half_to_float(a16[i]) == finite);
          CHECK(bf16_to_float(abf[i]) == finite);
        }
      }
    }
  }
}

TEST_CASE("avg sums; divide_by then gives the exact mean of integer-valued floats") {
  const int world = 4;
  std::vector<float> acc(4097, 0.0f);
  for (int r = 0; r < world; ++r) {
    std::vector<float> contribution(acc.size());
    for (std::size_t i = 0; i < acc.size(); ++i) contribution[i] = static_cast<float>(i + r);
    reduce_into(acc.data(), contribution.data(), acc.size(), DType::f32, ReduceOp::avg);
  }
  divide_by(acc.data(), acc.size(), DType::f32, world);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < acc.size(); ++i) wrong += acc[i] != static_cast<float>(i) + 1.5f;
  CHECK(wrong == 0);
}

TEST_CASE("divide_by every dtype; integers truncate toward zero") {
  std::vector<float> f32 = {6.0f, -3.0f, 1.0f};
  divide_by(f32.data(), f32.size(), DType::f32, 2);
  CHECK(f32 == std::vector<float>{3.0f, -1.5f, 0.5f});

  std::vector<double> f64 = {6.0, -3.0, 1.0};
  divide_by(f64.data(), f64.size(), DType::f64, 4);
  CHECK(f64 == std::vector<double>{1.5, -0.75, 0.25});

  // f16 / bf16 across several scratch blocks, with exact halves.
  std::vector<std::uint16_t> h(1000), bf(1000);
  for (std::size_t i = 0; i < h.size(); ++i) {
    h[i] = float_to_half(static_cast<float>(i % 100) - 50.0f);
    bf[i] = float_to_bf16(static_cast<float>(i % 100) - 50.0f);
  }
  divide_by(h.data(), h.size(), DType::f16, 2);
  divide_by(bf.data(), bf.size(), DType::bf16, 2);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < h.size(); ++i) {
    const float want = (static_cast<float>(i % 100) - 50.0f) / 2.0f;
    wrong += half_to_float(h[i]) != want;
    wrong += bf16_to_float(bf[i]) != want;
  }
  CHECK(wrong == 0);

  std::vector<std::int32_t> i32 = {7, -7, 8, std::numeric_limits<std::int32_t>::min()};
  divide_by(i32.data(), i32.size(), DType::i32, 2);
  CHECK(i32 == std::vector<std::int32_t>{3, -3, 4, std::numeric_limits<std::int32_t>::min() / 2});

  std::vector<std::int64_t> i64 = {7, -7, 9};
  divide_by(i64.data(), i64.size(), DType::i64, 3);
  CHECK(i64 == std::vector<std::int64_t>{2, -2, 3});

  std::vector<std::uint8_t> u8 = {255, 10, 3};
  divide_by(u8.data(), u8.size(), DType::u8, 4);
  CHECK(u8 == std::vector<std::uint8_t>{63, 2, 0});
  std::vector<std::uint8_t> u8_big = {255, 10};
  divide_by(u8_big.data(), u8_big.size(), DType::u8, 256);  // must not wrap 256 to 0
  CHECK(u8_big == std::vector<std::uint8_t>{0, 0});

  divide_by(nullptr, 0, DType::f32, 3);  // nothing to do
}

TEST_CASE("bad dtype, op or divisor: typed errors that name the culprit") {
  float a[2] = {1, 2}, b[2] = {3, 4};
  const auto bad_dtype = static_cast<DType>(99);
  const auto bad_op = static_cast<ReduceOp>(42);
  CHECK_THROWS_AS(reduce_into(a, b, 2, bad_dtype, ReduceOp::sum), ringlet::core::DTypeError);
  CHECK(error_of([&] { reduce_into(a, b, 2, bad_dtype, ReduceOp::sum); }).find("99") !=
        std::string::npos);
  // Also for count 0, so that ranks with an empty chunk fail like the others.
  CHECK_THROWS_AS(reduce_into(a, b, 0, bad_dtype, ReduceOp::sum), ringlet::core::DTypeError);
  CHECK_THROWS_AS(reduce_into(a, b, 2, DType::f32, bad_op), ringlet::core::ValueError);
  CHECK(error_of([&] { reduce_into(a, b, 0, DType::f32, bad_op); }).find("42") !=
        std::string::npos);
  CHECK_THROWS_AS(divide_by(a, 2, bad_dtype, 2), ringlet::core::DTypeError);
  CHECK_THROWS_AS(divide_by(a, 2, DType::f32, 0), ringlet::core::ValueError);
  CHECK_THROWS_AS(divide_by(a, 2, DType::i32, -1), ringlet::core::ValueError);
  CHECK_THROWS_AS(reduce_into(nullptr, b, 2, DType::f32, ReduceOp::sum), ringlet::core::ValueError);
}

TEST_CASE("reduce op names round-trip; unknown names list the choices") {
  for (ReduceOp op : kOps) CHECK(parse_reduce_op(reduce_op_name(op)) == op);
  for (ReduceOp op : kBitwiseOps) CHECK(parse_reduce_op(reduce_op_name(op)) == op);
  CHECK(parse_reduce_op("MAX") == ReduceOp::max);
  CHECK_THROWS_AS(parse_reduce_op("mean"), ringlet::core::ValueError);
  const std::string message = error_of([] { parse_reduce_op("mean"); });
  CHECK(message.find("'mean'") != std::string::npos);
  CHECK(message.find("sum, prod, min, max, avg") != std::string::npos);
  CHECK(std::string(op_kind_name(OpKind::reduce_scatter)) == "reduce_scatter");
  CHECK(std::string(op_kind_name(OpKind::recv)) == "recv");
}

// Every instruction-set level this CPU runs (core/isa.h) against the baseline, bit for bit:
// random bit patterns (so NaNs, infinities, subnormals and -0 of every float type), every
// dtype x op, in place and out of place, sizes around every vector width, misaligned starts,
// and every f16/bf16 bit pattern (each against a permutation of all of them). Also NaNs must come
// out with the same bits, except where both operands are NaN: which one's sign and payload survive
// is up to the compiler's operand order, so there the result only needs to be NaN.
namespace {

using ringlet::core::Isa;

bool is_nan(DType dtype, const unsigned char* p) {
  switch (dtype) {
    case DType::f32: {
      float x;
      std::memcpy(&x, p, 4);
      return std::isnan(x);
    }
    case DType::f64: {
      double x;
      std::memcpy(&x, p, 8);
      return std::isnan(x);
    }
    case DType::f16:
    case DType::bf16: {
      std::uint16_t x;
      std::memcpy(&x, p, 2);
      return std::isnan(dtype == DType::f16 ? half_to_float(x) : bf16_to_float(x));
    }
    default: return false;
  }
}

// Elements of got and want that differ; where loose[i] (both operands NaN) both being NaN is
// enough.
std::size_t differing(DType dtype, const std::vector<unsigned char>& got,
                      const std::vector<unsigned char>& want, const std::vector<bool>& loose) {
  const std::size_t es = ringlet::core::dtype_size(dtype);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i * es < got.size(); ++i) {
    const unsigned char* g = got.data() + i * es;
    const unsigned char* w = want.data() + i * es;
    const bool same = std::memcmp(g, w, es) == 0 ||
                      (i < loose.size() && loose[i] && is_nan(dtype, g) && is_nan(dtype, w));
    wrong += !same;
  }
  return wrong;
}

constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                DType::i32, DType::i64, DType::u8};

// dst = a op b at `isa` and at the baseline, in place (a is dst) and out of place.
void compare_with_baseline(Isa isa, DType dtype, ReduceOp op, std::size_t n, std::size_t offset,
                           std::mt19937& rng) {
  const std::size_t es = ringlet::core::dtype_size(dtype);
  std::vector<unsigned char> a((n + 4) * es), b((n + 4) * es);
  for (auto& byte : a) byte = static_cast<unsigned char>(rng());
  for (auto& byte : b) byte = static_cast<unsigned char>(rng());
  unsigned char* const at = a.data() + offset * es;
  const unsigned char* const bt = b.data() + (3 - offset) * es;
  std::vector<bool> loose_in(n + 4, false), loose_out(n + 4, false);
  for (std::size_t i = 0; i < n; ++i) {
    const bool both = is_nan(dtype, at + i * es) && is_nan(dtype, bt + i * es);
    loose_in[offset + i] = both;
    loose_out[i] = both;
  }
  for (const bool in_place : {true, false}) {
    std::vector<unsigned char> want = a, got = a;
    std::vector<unsigned char> want_out(a.size(), 0xee), got_out(a.size(), 0xee);
    unsigned char* want_dst = in_place ? want.data() + offset * es : want_out.data();
    unsigned char* got_dst = in_place ? got.data() + offset * es : got_out.data();
    reduce_pair(want_dst, in_place ? want_dst : at, bt, n, dtype, op, Isa::baseline);
    reduce_pair(got_dst, in_place ? got_dst : at, bt, n, dtype, op, isa);
    INFO(ringlet::core::isa_name(isa), " ", dtype, " ", reduce_op_name(op), " n=", n, " offset ",
         offset, in_place ? " in place" : " out of place");
    CHECK(differing(dtype, got, want, loose_in) == 0);
    CHECK(differing(dtype, got_out, want_out, loose_out) == 0);
  }
}

}  // namespace

TEST_CASE("every instruction-set level gives the baseline's bits, every dtype x op") {
  const auto levels = ringlet::core::supported_isas();
  REQUIRE(levels.front() == Isa::baseline);
  MESSAGE("levels this CPU runs: ", levels.size());
  std::mt19937 rng(2024);
  for (const Isa isa : levels) {
    if (isa == Isa::baseline) continue;
    for (const DType dtype : kAllDTypes) {
      for (const ReduceOp op : ops_for(dtype)) {
        for (const std::size_t n : {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 64, 255, 257, 1000, 4097}) {
          for (const std::size_t offset : {0, 1, 3}) {
            compare_with_baseline(isa, dtype, op, n, offset, rng);
          }
        }
      }
    }
  }
}

TEST_CASE("every instruction-set level: all f16/bf16 pairs and divisions as the baseline") {
  std::vector<std::uint16_t> all(65536), permuted(65536);
  for (std::uint32_t i = 0; i < 65536; ++i) {
    all[i] = static_cast<std::uint16_t>(i);
    permuted[i] = static_cast<std::uint16_t>(i * 40503u);
  }
  const auto as_bytes = [](const std::vector<std::uint16_t>& v) {
    std::vector<unsigned char> bytes(v.size() * 2);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    return bytes;
  };
  for (const Isa isa : ringlet::core::supported_isas()) {
    if (isa == Isa::baseline) continue;
    for (const DType dtype : {DType::f16, DType::bf16}) {
      for (const ReduceOp op : kOps) {
        std::vector<std::uint16_t> want(all.size()), got(all.size());
        reduce_pair(want.data(), all.data(), permuted.data(), all.size(), dtype, op, Isa::baseline);
        reduce_pair(got.data(), all.data(), permuted.data(), all.size(), dtype, op, isa);
        std::vector<bool> loose(all.size());
        for (std::size_t i = 0; i < all.size(); ++i) {
          loose[i] = is_nan(dtype, reinterpret_cast<const unsigned char*>(&all[i])) &&
                     is_nan(dtype, reinterpret_cast<const unsigned char*>(&permuted[i]));
        }
        INFO(ringlet::core::isa_name(isa), " ", dtype, " ", reduce_op_name(op));
        CHECK(differing(dtype, as_bytes(got), as_bytes(want), loose) == 0);
      }
    }
    for (const DType dtype : kAllDTypes) {
      for (const int divisor : {3, 7, 300}) {
        const std::size_t es = ringlet::core::dtype_size(dtype);
        std::vector<unsigned char> want(4099 * es), got;
        std::mt19937 rng(static_cast<unsigned>(divisor));
        for (auto& byte : want) byte = static_cast<unsigned char>(rng());
        got = want;
        divide_by(want.data(), 4099, dtype, divisor, Isa::baseline);
        divide_by(got.data(), 4099, dtype, divisor, isa);
        INFO(ringlet::core::isa_name(isa), " ", dtype, " / ", divisor);
        CHECK(differing(dtype, got, want, {}) == 0);
      }
    }
  }
}

TEST_CASE("a level this CPU cannot run is refused, naming what it lacks") {
  for (const Isa isa : {Isa::avx2, Isa::avx512}) {
    if (ringlet::core::isa_supported(isa)) continue;
    float a[1] = {1}, b[1] = {2};
    const std::string message =
        error_of([&] { reduce_pair(a, a, b, 1, DType::f32, ReduceOp::sum, isa); });
    CHECK(message.find("cannot run") != std::string::npos);
  }
  CHECK_THROWS_AS(ringlet::core::parse_isa("sse9", "--isa"), ringlet::core::ValueError);
}
