// batch_norm: train/eval values against direct f64 loops, running-stat updates (momentum,
// unbiased variance, strided buffers), finite-difference gradients for input, weight and bias
// in both modes, f32 against f64, empty batches and errors. dropout: mask rate and scaling,
// seeds, gradients through the mask, p = 0 / p = 1 and errors.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "gradcheck.h"

using namespace ringlet;
using namespace ringlet::tensor;
using ringlet::testing::gradcheck;
using ringlet::testing::make_input;

namespace {

struct ChannelStats {
  std::vector<double> mean, biased_var;
};

// Mean and biased variance per channel of [N, C, *].
ChannelStats reference_stats(const Tensor& input) {
  const auto x = input.to_vector<double>();
  const std::int64_t n = input.size(0), c = input.size(1);
  const std::int64_t s = input.numel() / std::max<std::int64_t>(n * c, 1);
  ChannelStats r{std::vector<double>(c, 0.0), std::vector<double>(c, 0.0)};
  for (std::int64_t ch = 0; ch < c; ++ch) {
    for (std::int64_t b = 0; b < n; ++b)
      for (std::int64_t i = 0; i < s; ++i) r.mean[ch] += x[(b * c + ch) * s + i];
    r.mean[ch] /= static_cast<double>(n * s);
    for (std::int64_t b = 0; b < n; ++b)
      for (std::int64_t i = 0; i < s; ++i) {
        const double d = x[(b * c + ch) * s + i] - r.mean[ch];
        r.biased_var[ch] += d * d;
      }
    r.biased_var[ch] /= static_cast<double>(n * s);
  }
  return r;
}

std::vector<double> reference_normalize(const Tensor& input, const std::vector<double>& mean,
                                        const std::vector<double>& var,
                                        const std::vector<double>& w, const std::vector<double>& b,
                                        double eps) {
  const auto x = input.to_vector<double>();
  const std::int64_t c = input.size(1);
  const std::int64_t s = input.numel() / std::max<std::int64_t>(input.size(0) * c, 1);
  std::vector<double> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::int64_t ch = (static_cast<std::int64_t>(i) / s) % c;
    out[i] = (x[i] - mean[ch]) / std::sqrt(var[ch] + eps) * w[ch] + b[ch];
  }
  return out;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol).scale(1.0));
  }
}

}  // namespace

TEST_CASE("batch_norm training normalizes with batch statistics and updates running stats") {
  std::uint64_t seed = 1;
  for (const Shape& shape : std::vector<Shape>{{8, 3}, {4, 3, 5, 5}, {3, 2, 7}, {2, 4, 1, 1}}) {
    CAPTURE(shape_str(shape));
    const std::int64_t c = shape[1];
    const Tensor x = make_input(shape, seed++, -2.0, 3.0).detach();
    const Tensor w = make_input({c}, seed++).detach();
    const Tensor b = make_input({c}, seed++).detach();
    Tensor rm = make_input({c}, seed++).detach();
    Tensor rv = make_input({c}, seed++, 0.5, 2.0).detach();
    const auto rm0 = rm.to_vector<double>(), rv0 = rv.to_vector<double>();
    const double momentum = 0.3, eps = 1e-3;
    const Tensor out = batch_norm(x, rm, rv, w, b, true, momentum, eps);

    const ChannelStats stats = reference_stats(x);
    check_close(out.to_vector<double>(),
                reference_normalize(x, stats.mean, stats.biased_var, w.to_vector<double>(),
                                    b.to_vector<double>(), eps),
                1e-12);
    const double count = static_cast<double>(x.numel() / c);
    const auto rm1 = rm.to_vector<double>(), rv1 = rv.to_vector<double>();
    for (std::int64_t ch = 0; ch < c; ++ch) {
      CHECK(rm1[ch] == doctest::Approx(0.7 * rm0[ch] + 0.3 * stats.mean[ch]));
      CHECK(rv1[ch] ==
            doctest::Approx(0.7 * rv0[ch] + 0.3 * stats.biased_var[ch] * count / (count - 1)));
    }
  }
}

TEST_CASE("batch_norm running stats: defaults, repeated steps, strided buffers, no affine") {
  const Tensor x = from_vector({1, 10, 3, 20, 5, 30, 7, 40}, {4, 2}, DType::f64);
  // Strided buffers (every other element of a larger tensor) are updated through the view.
  const Tensor mean_store = zeros({4}, DType::f64), var_store = ones({4}, DType::f64);
  Tensor rm = slice(mean_store, 0, 0, 4, 2), rv = slice(var_store, 0, 0, 4, 2);
  REQUIRE_FALSE(rm.is_contiguous());
  batch_norm(x, rm, rv, {}, {}, true);
  batch_norm(x, rm, rv, {}, {}, true);
  // channel 0: mean 4, unbiased var 20/3; channel 1: mean 25, unbiased var 500/3.
  const double keep = 0.9 * 0.9;
  CHECK(mean_store.to_vector<double>()[0] == doctest::Approx(4 * (1 - keep)));
  CHECK(mean_store.to_vector<double>()[2] == doctest::Approx(25 * (1 - keep)));
  CHECK(var_store.to_vector<double>()[0] == doctest::Approx(keep + 20.0 / 3 * (1 - keep)));
  CHECK(var_store.to_vector<double>()[2] == doctest::Approx(keep + 500.0 / 3 * (1 - keep)));
  CHECK(mean_store.to_vector<double>()[1] == 0.0);  // untouched between the strided elements
  CHECK(var_store.to_vector<double>()[3] == 1.0);

  // Without running stats and affine parameters: plain standardization, mean 0, var 1.
  const Tensor y = batch_norm(x, {}, {}, {}, {}, true, 0.1, 0.0);
  const auto v = y.to_vector<double>();
  CHECK(v[0] + v[2] + v[4] + v[6] == doctest::Approx(0.0).scale(1.0));
  CHECK(v[0] * v[0] + v[2] * v[2] + v[4] * v[4] + v[6] * v[6] == doctest::Approx(4.0));
}

TEST_CASE("batch_norm eval uses the running stats and leaves them alone") {
  const Tensor x = make_input({3, 4, 2, 3}, 20).detach();
  const Tensor w = make_input({4}, 21).detach(), b = make_input({4}, 22).detach();
  Tensor rm = make_input({4}, 23).detach(), rv = make_input({4}, 24, 0.5, 2.0).detach();
  const auto rm0 = rm.to_vector<double>(), rv0 = rv.to_vector<double>();
  const Tensor out = batch_norm(x, rm, rv, w, b, false, 0.1, 1e-5);
  check_close(out.to_vector<double>(),
              reference_normalize(x, rm0, rv0, w.to_vector<double>(), b.to_vector<double>(), 1e-5),
              1e-12);
  CHECK(rm.to_vector<double>() == rm0);
  CHECK(rv.to_vector<double>() == rv0);
  // Eval accepts a single value per channel (training does not).
  CHECK(batch_norm(make_input({1, 4}, 25).detach(), rm, rv, w, b, false).shape() == Shape{1, 4});
}

TEST_CASE("batch_norm gradients (finite differences, train and eval)") {
  std::uint64_t seed = 40;
  for (const Shape& shape :
       std::vector<Shape>{{5, 3}, {2, 3, 2, 3}, {3, 2, 1, 1}, {1, 2, 1, 3}, {2, 1, 2, 2}}) {
    CAPTURE(shape_str(shape));
    const std::int64_t c = shape[1];
    const Tensor x = make_input(shape, seed++, -2.0, 2.0);
    const Tensor w = make_input({c}, seed++);
    const Tensor b = make_input({c}, seed++);
    const Tensor rm = make_input({c}, seed++).detach();
    const Tensor rv = make_input({c}, seed++, 0.5, 2.0).detach();
    CHECK(gradcheck("batch_norm train",
                    [rm, rv](auto& in) { return batch_norm(in[0], rm, rv, in[1], in[2], true); },
                    {x, w, b}) == 0);
    CHECK(gradcheck("batch_norm eval",
                    [rm, rv](auto& in) { return batch_norm(in[0], rm, rv, in[1], in[2], false); },
                    {x, w, b}) == 0);
    CHECK(gradcheck("batch_norm train, no affine",
                    [](auto& in) { return batch_norm(in[0], {}, {}, {}, {}, true); }, {x}) == 0);
  }
}

TEST_CASE("batch_norm on non-contiguous inputs") {
  const Tensor x = make_input({3, 4, 2, 5}, 60).transpose(1, 3).detach().requires_grad_();
  REQUIRE_FALSE(x.is_contiguous());  // [3, 5, 2, 4]: 5 channels
  const Tensor w = make_input({5}, 61), b = make_input({5}, 62);
  const ChannelStats stats = reference_stats(x);
  check_close(batch_norm(x, {}, {}, w, b, true).to_vector<double>(),
              reference_normalize(x, stats.mean, stats.biased_var, w.to_vector<double>(),
                                  b.to_vector<double>(), 1e-5),
              1e-12);
  CHECK(gradcheck("batch_norm transposed",
                  [](auto& in) { return batch_norm(in[0], {}, {}, in[1], in[2], true); },
                  {x, w, b}) == 0);
}

TEST_CASE("batch_norm f32 agrees with f64, forward and backward") {
  const Tensor x64 = make_input({8, 4, 6, 6}, 70, -3.0, 5.0);
  const Tensor w64 = make_input({4}, 71), b64 = make_input({4}, 72);
  const Tensor x32 = x64.detach().to(DType::f32).requires_grad_();
  const Tensor w32 = w64.detach().to(DType::f32).requires_grad_();
  const Tensor b32 = b64.detach().to(DType::f32).requires_grad_();
  Tensor rm32 = zeros({4}), rv32 = ones({4});
  Generator gen(73);
  const Tensor v = randn(x64.shape(), gen, DType::f64);
  const Tensor y64 = batch_norm(x64, {}, {}, w64, b64, true);
  const Tensor y32 = batch_norm(x32, rm32, rv32, w32, b32, true);
  CHECK(rm32.dtype() == DType::f32);
  check_close(y32.to_vector<double>(), y64.to_vector<double>(), 1e-5);
  y64.backward(v);
  y32.backward(v.to(DType::f32));
  check_close(x32.grad().to_vector<double>(), x64.grad().to_vector<double>(), 1e-4);
  check_close(w32.grad().to_vector<double>(), w64.grad().to_vector<double>(), 1e-4);
  check_close(b32.grad().to_vector<double>(), b64.grad().to_vector<double>(), 1e-4);
}

TEST_CASE(
    "batch_norm without a reducer (a channel's passes back to back) gives the bits of the "
    "reducer's schedule (every channel's sums first), forward and backward") {
  // A reducer that leaves the sums as they are: one rank's SyncBatchNorm, whose passes run
  // channel by channel in turn; the plain one runs each channel's passes together.
  int reductions = 0;
  const StatsReducer one_rank = [&](std::vector<double>&) { ++reductions; };
  for (const DType dtype : {DType::f32, DType::f64}) {
    for (const std::int64_t side : {3, 12}) {  // runs shorter and longer than a loop call's
      INFO(dtype, " side ", side);
      const Tensor base = make_input({5, 3, side, side}, 80, -2.0, 3.0).detach().to(dtype);
      Tensor outputs[2], grads[2][3];
      for (const int synced : {0, 1}) {
        const Tensor x = base.clone().requires_grad_();
        const Tensor w = make_input({3}, 81).detach().to(dtype).requires_grad_();
        const Tensor b = make_input({3}, 82).detach().to(dtype).requires_grad_();
        Tensor rm = zeros({3}, dtype), rv = ones({3}, dtype);
        outputs[synced] =
            batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5, synced ? one_rank : StatsReducer());
        Generator gen(83);
        outputs[synced].backward(randn(base.shape(), gen, dtype));
        grads[synced][0] = x.grad();
        grads[synced][1] = w.grad();
        grads[synced][2] = b.grad();
      }
      const auto same = [](const Tensor& a, const Tensor& b) {
        return a.nbytes() == b.nbytes() &&
               std::memcmp(a.contiguous().raw_data(), b.contiguous().raw_data(), a.nbytes()) == 0;
      };
      CHECK(same(outputs[0], outputs[1]));
      for (int i = 0; i < 3; ++i) CHECK(same(grads[0][i], grads[1][i]));
    }
  }
  CHECK(reductions == 2 * 2 * 3);  // the reducer's schedule ran: 2 forward sums, 1 backward
}

TEST_CASE("batch_norm with an empty batch leaves the running stats alone") {
  const Tensor x = make_input({0, 3, 2, 2}, 80);
  const Tensor w = make_input({3}, 81);
  Tensor rm = zeros({3}, DType::f64), rv = ones({3}, DType::f64);
  const Tensor out = batch_norm(x, rm, rv, w, {}, true);
  CHECK(out.shape() == Shape{0, 3, 2, 2});
  CHECK(rm.to_vector<double>() == std::vector<double>(3, 0.0));
  CHECK(rv.to_vector<double>() == std::vector<double>(3, 1.0));
  out.backward(zeros({0, 3, 2, 2}, DType::f64));
  CHECK(x.grad().shape() == Shape{0, 3, 2, 2});
  CHECK(w.grad().to_vector<double>() == std::vector<double>(3, 0.0));
}

TEST_CASE("batch_norm errors") {
  const Tensor x = zeros({4, 3, 2, 2});
  const Tensor c3 = ones({3});
  CHECK_THROWS_WITH_AS(batch_norm(zeros({4}), {}, {}, {}, {}, true),
                       doctest::Contains("batch_norm: input must be [N, C] or [N, C, H, W] "
                                         "(rank >= 2), got shape [4]"),
                       core::ShapeError);
  CHECK_THROWS_WITH_AS(batch_norm(x, {}, {}, ones({4}), {}, true),
                       doctest::Contains("weight must have shape [3] (the channels of input [4, "
                                         "3, 2, 2]), got [4]"),
                       core::ShapeError);
  CHECK_THROWS_WITH_AS(batch_norm(x, ones({2}), c3, {}, {}, true),
                       doctest::Contains("running_mean must have shape [3]"), core::ShapeError);
  CHECK_THROWS_WITH_AS(batch_norm(x, {}, {}, {}, {}, false),
                       doctest::Contains("eval mode needs running_mean and running_var"),
                       core::ValueError);
  CHECK_THROWS_WITH_AS(batch_norm(x, c3, {}, {}, {}, true),
                       doctest::Contains("both be given or both be undefined"), core::ValueError);
  CHECK_THROWS_WITH_AS(batch_norm(zeros({1, 3, 1, 1}), {}, {}, {}, {}, true),
                       doctest::Contains("expected more than 1 value per channel when training"),
                       core::ValueError);
  CHECK_THROWS_WITH_AS(batch_norm(x, {}, {}, ones({3}, DType::f64), {}, true),
                       doctest::Contains("weight has dtype f64 but the input has f32"),
                       core::DTypeError);
  CHECK_THROWS_WITH_AS(batch_norm(zeros({4, 3}, DType::u8), {}, {}, {}, {}, true),
                       doctest::Contains("batch_norm: dtype u8 is not supported"),
                       core::DTypeError);
}

TEST_CASE("dropout drops at rate p and scales survivors by 1 / (1 - p)") {
  const Tensor x = ones({200, 500});
  Generator gen(1);
  const double p = 0.3;
  const Tensor y = dropout(x, p, true, gen);
  const auto v = y.to_vector<float>();
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  std::size_t zeros_seen = 0, scaled_seen = 0;
  double total = 0;
  for (float e : v) {
    zeros_seen += e == 0.0f;
    scaled_seen += e == scale;
    total += e;
  }
  CHECK(zeros_seen + scaled_seen == v.size());
  // 100,000 draws: the zero fraction's standard deviation is ~0.0015.
  CHECK(static_cast<double>(zeros_seen) / v.size() == doctest::Approx(p).epsilon(0.03));
  CHECK(total / v.size() == doctest::Approx(1.0).epsilon(0.01));
}

TEST_CASE("dropout is deterministic for a seed and differs between seeds") {
  const Tensor x = make_input({16, 32}, 2).detach();
  Generator a(7), b(7), c(8);
  const auto ya = dropout(x, 0.5, true, a).to_vector<double>();
  CHECK(ya == dropout(x, 0.5, true, b).to_vector<double>());
  CHECK(ya != dropout(x, 0.5, true, c).to_vector<double>());
  // The generator advances: a second draw from the same generator differs.
  CHECK(ya != dropout(x, 0.5, true, a).to_vector<double>());
}

TEST_CASE("dropout gradients flow through the same mask") {
  const Tensor x = ones({10, 10}, DType::f64).requires_grad_();
  Generator gen(3);
  const Tensor y = dropout(x, 0.4, true, gen);
  sum(y).backward();
  CHECK(x.grad().to_vector<double>() == y.to_vector<double>());  // x = 1: y is the mask
  const Tensor z = make_input({3, 4, 5}, 4);
  CHECK(gradcheck("dropout",
                  [](auto& in) {
                    Generator g(5);
                    return dropout(in[0], 0.4, true, g);
                  },
                  {z}) == 0);
  // A non-contiguous input is masked in logical (row-major) order.
  const Tensor t = make_input({4, 6}, 6).transpose(0, 1).detach();
  Generator g1(9), g2(9);
  const auto from_view = dropout(t, 0.5, true, g1).to_vector<double>();
  CHECK(from_view == dropout(t.contiguous(), 0.5, true, g2).to_vector<double>());
}

TEST_CASE("dropout identity cases, p = 1 and errors") {
  const Tensor x = make_input({4, 5}, 10);
  Generator gen(1);
  CHECK(dropout(x, 0.5, false, gen).same(x));
  CHECK(dropout(x, 0.0, true, gen).same(x));
  const Tensor all = dropout(x, 1.0, true, gen);
  CHECK(all.to_vector<double>() == std::vector<double>(20, 0.0));
  sum(all).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>(20, 0.0));
  CHECK_THROWS_WITH_AS(dropout(x, 1.5, true, gen),
                       doctest::Contains("dropout: probability has to be between 0 and 1, got 1.5"),
                       core::ValueError);
  CHECK_THROWS_WITH_AS(dropout(x, -0.1, true, gen), doctest::Contains("between 0 and 1"),
                       core::ValueError);
  CHECK_THROWS_WITH_AS(dropout(zeros({3}, DType::i64), 0.5, true, gen),
                       doctest::Contains("dropout: dtype i64 is not supported"), core::DTypeError);
}
