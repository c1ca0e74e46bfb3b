// Reductions and softmax: values against xtensor (sum, mean, var, max/min, argmax over every
// dim combination, contiguous and permuted inputs) or hand-computed references, edge cases
// (empty dims, size-1, NaN, ties, integer dtypes), error paths, and finite-difference
// gradients for every differentiable op.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xreducer.hpp>
#include <xtensor/xsort.hpp>
#pragma GCC diagnostic pop

#include "gradcheck.h"

using namespace ringlet;
using namespace ringlet::tensor;
using core::DType;
using ringlet::testing::gradcheck;
using ringlet::testing::make_input;

namespace {

using XArray = xt::xarray<double>;

XArray to_xt(const Tensor& t) {
  const std::vector<double> values = t.to_vector<double>();
  std::vector<std::size_t> shape(t.shape().begin(), t.shape().end());
  XArray out = xt::adapt(values, shape);
  return out;
}

// got has `shape` (want's own shape when not given) and, element by element in row-major order,
// |got - want| <= tol * (1 + |want|), NaN matching NaN.
void check_close(const Tensor& got, const XArray& want, double tol, const std::string& what,
                 std::optional<std::vector<std::size_t>> shape = std::nullopt) {
  INFO(what);
  if (!shape) shape.emplace(want.shape().begin(), want.shape().end());
  const std::vector<std::size_t> got_shape(got.shape().begin(), got.shape().end());
  CHECK(got_shape == *shape);
  const auto values = got.to_vector<double>();
  REQUIRE(values.size() == want.size());
  std::size_t i = 0;
  for (const double w : want) {
    if (std::isnan(w)) {
      CHECK(std::isnan(values[i]));
    } else {
      CHECK(std::abs(values[i] - w) <= tol * (1 + std::abs(w)));
    }
    ++i;
  }
}

// Positive, sorted axes for a dim list (empty = all) of a rank-`ndim` tensor.
std::vector<std::size_t> axes_of(const Shape& dims, std::int64_t ndim) {
  std::vector<std::size_t> axes;
  for (std::int64_t d = 0; d < ndim; ++d) {
    bool hit = dims.empty();
    for (auto dim : dims) hit = hit || (dim + ndim) % ndim == d;
    if (hit) axes.push_back(static_cast<std::size_t>(d));
  }
  return axes;
}

// The keepdim shape of reducing `axes` of `shape`.
std::vector<std::size_t> kept_shape(const Shape& shape, const std::vector<std::size_t>& axes,
                                    bool keepdim) {
  std::vector<std::size_t> out;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    const bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!reduced) out.push_back(static_cast<std::size_t>(shape[d]));
    if (reduced && keepdim) out.push_back(1);
  }
  return out;
}

const std::vector<Shape> kDimLists = {{}, {0}, {1}, {2}, {-1}, {0, 2}, {-3, -1}, {1, 2}, {2, 0, 1}};

// Inputs of shape [2, 3, 4]: contiguous and a permuted (non-contiguous) view.
std::vector<Tensor> sample_inputs(DType dtype) {
  Generator gen(7);
  const Tensor base = uniform({2, 3, 4}, -2, 2, gen, dtype);
  const Tensor other = uniform({3, 4, 2}, -2, 2, gen, dtype);
  return {base, other.permute({2, 0, 1})};
}

}  // namespace

TEST_CASE("sum, mean and var match xtensor over every dim list") {
  for (const DType dtype : {DType::f32, DType::f64}) {
    const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;
    for (const Tensor& x : sample_inputs(dtype)) {
      const XArray xa = to_xt(x);
      for (const Shape& dims : kDimLists) {
        const auto axes = axes_of(dims, x.dim());
        for (const bool keepdim : {false, true}) {
          const std::string what = "dims " + shape_str(dims) + (keepdim ? " keepdim" : "");
          const auto shape = kept_shape(x.shape(), axes, keepdim);
          // Assigned, not xt::eval'ed: eval of a reducer picks a wrong static rank in
          // xtensor 0.24.
          const XArray s = xt::sum(xa, axes);
          check_close(sum(x, dims, keepdim), s, tol, "sum " + what, shape);
          const double n = static_cast<double>(xa.size() / s.size());
          check_close(mean(x, dims, keepdim), s / n, tol, "mean " + what, shape);
          const XArray mu = xt::sum(xa, axes, xt::keep_dims) / n;
          const XArray sq = xt::sum(xt::square(xa - mu), axes);
          check_close(var(x, dims, true, keepdim), sq / (n - 1), tol, "var " + what, shape);
          check_close(var(x, dims, false, keepdim), sq / n, tol, "var biased " + what, shape);
          CHECK(sum(x, dims, keepdim).dtype() == dtype);
        }
      }
    }
  }
}

TEST_CASE("sum and mean edge cases: empty dims, 0-d, integers") {
  const Tensor empty = zeros({2, 0, 3});
  CHECK(sum(empty, {1}).shape() == Shape{2, 3});
  CHECK(sum(empty, {1}).to_vector<float>() == std::vector<float>(6, 0.0f));
  CHECK(sum(empty).item() == 0.0);
  CHECK(sum(empty, {0}).shape() == Shape{0, 3});
  CHECK(std::isnan(mean(empty).item()));
  CHECK(std::isnan(mean(empty, {1}).to_vector<double>()[0]));
  CHECK(std::isnan(var(from_vector({3}, {1}), {}, true).item()));  // no degrees of freedom
  CHECK(var(from_vector({3}, {1}), {}, false).item() == 0.0);

  const Tensor scalar = scalar_tensor(4.5, DType::f64);
  CHECK(sum(scalar).item() == 4.5);
  CHECK(sum(scalar, {0}).shape() == Shape{});
  CHECK(sum(scalar, {-1}, true).shape() == Shape{});
  CHECK(mean(scalar, {0}).item() == 4.5);

  const Tensor bytes = from_vector({200, 100, 1, 0, 255, 7}, {2, 3}, DType::u8);
  CHECK(sum(bytes).dtype() == DType::i64);
  CHECK(sum(bytes).item() == 563);  // no u8 overflow
  CHECK(sum(bytes, {1}).to_vector<std::int64_t>() == std::vector<std::int64_t>{301, 262});
  const Tensor longs = from_vector({-5, 9, 3}, {3}, DType::i64);
  CHECK(sum(longs, {0}, true).to_vector<std::int64_t>() == std::vector<std::int64_t>{7});
}

TEST_CASE("max, min and argmax match xtensor over each dim") {
  for (const Tensor& x : sample_inputs(DType::f64)) {
    const XArray xa = to_xt(x);
    CHECK(max(x).item() == xt::amax(xa)());
    CHECK(min(x).item() == xt::amin(xa)());
    CHECK(max(x).shape() == Shape{});
    for (std::int64_t dim = -3; dim < 3; ++dim) {
      const std::size_t axis = static_cast<std::size_t>((dim + 3) % 3);
      for (const bool keepdim : {false, true}) {
        const auto shape = kept_shape(x.shape(), {axis}, keepdim);
        const XArray hi = xt::amax(xa, {axis});
        const XArray lo = xt::amin(xa, {axis});
        const XArray hi_at = xt::argmax(xa, axis);
        const XArray lo_at = xt::argmin(xa, axis);
        const auto [values, indices] = max(x, dim, keepdim);
        CHECK(indices.dtype() == DType::i64);
        check_close(values, hi, 0, "max values", shape);
        check_close(indices, hi_at, 0, "max indices", shape);
        check_close(min(x, dim, keepdim).first, lo, 0, "min values", shape);
        check_close(min(x, dim, keepdim).second, lo_at, 0, "min indices", shape);
        check_close(argmax(x, dim, keepdim), hi_at, 0, "argmax", shape);
      }
    }
  }
}

TEST_CASE("max/min: ties pick the first, NaN propagates, integer dtypes work") {
  const Tensor ties = from_vector({1, 3, 3, 0, 0, -1}, {2, 3});
  CHECK(max(ties, 1).second.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0});
  CHECK(min(ties, 1).second.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 2});
  CHECK(argmax(ties, 0).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 0, 0});

  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor with_nan = from_vector({1, nan, 5, 2}, {2, 2}, DType::f64);
  CHECK(std::isnan(max(with_nan).item()));
  CHECK(std::isnan(min(with_nan).item()));
  const auto [v, i] = max(with_nan, 1);
  CHECK(std::isnan(v.to_vector<double>()[0]));
  CHECK(i.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0});

  const Tensor ints = from_vector({4, -7, 9, 9, 0, 2}, {3, 2}, DType::i32);
  CHECK(max(ints).item() == 9);
  CHECK(min(ints).item() == -7);
  CHECK(max(ints, 0).first.dtype() == DType::i32);
  CHECK(max(ints, 0).first.to_vector<std::int32_t>() == std::vector<std::int32_t>{9, 9});
  CHECK(argmax(ints, 1).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 0, 1});
  const Tensor bytes = from_vector({3, 250, 17}, {3}, DType::u8);
  CHECK(argmax(bytes, 0).item() == 1);

  const Tensor scalar = scalar_tensor(2.0);
  CHECK(max(scalar, 0).first.shape() == Shape{});
  CHECK(argmax(scalar, -1).item() == 0);
  CHECK(max(zeros({3, 1}), 1).first.shape() == Shape{3});
  CHECK(max(zeros({0, 4}), 1).first.shape() == Shape{0});  // no lanes, nothing to reduce
}

TEST_CASE("softmax and log_softmax") {
  const Tensor x = from_vector({1, 2, 3, -1, 0, 1000}, {2, 3}, DType::f64);
  const auto p = softmax(x, 1).to_vector<double>();
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  CHECK(p[0] == doctest::Approx(std::exp(1.0) / z));
  CHECK(p[2] == doctest::Approx(std::exp(3.0) / z));
  CHECK(p[5] == doctest::Approx(1.0));  // stable: exp(1000) is never formed
  CHECK(p[3] == 0.0);
  const auto lp = log_softmax(x, -1).to_vector<double>();
  CHECK(lp[0] == doctest::Approx(1.0 - std::log(z)));
  CHECK(lp[3] == doctest::Approx(-1001.0));
  CHECK(std::isfinite(lp[4]));

  // Along dim 0 of a permuted input: every lane sums to one, output is contiguous.
  Generator gen(3);
  const Tensor y = uniform({4, 3, 5}, -3, 3, gen, DType::f32).permute({1, 2, 0});
  const Tensor s = softmax(y, 0);
  CHECK(s.is_contiguous());
  check_close(sum(s, {0}), xt::ones<double>({5, 4}), 1e-6, "softmax lanes sum to one");
  const auto yv = y.to_vector<double>();  // [3, 5, 4] in row-major order
  std::vector<double> want(yv.size()), log_want(yv.size());
  for (std::size_t lane = 0; lane < 20; ++lane) {
    double z = 0;
    for (std::size_t i = 0; i < 3; ++i) z += std::exp(yv[i * 20 + lane]);
    for (std::size_t i = 0; i < 3; ++i) {
      want[i * 20 + lane] = std::exp(yv[i * 20 + lane]) / z;
      log_want[i * 20 + lane] = yv[i * 20 + lane] - std::log(z);
    }
  }
  check_close(s, xt::adapt(want, {3, 5, 4}), 1e-5, "softmax over dim 0");
  check_close(log_softmax(y, 0), xt::adapt(log_want, {3, 5, 4}), 1e-5, "log_softmax over dim 0");

  CHECK(softmax(zeros({2, 0}), 1).shape() == Shape{2, 0});
  CHECK(softmax(scalar_tensor(5.0), 0).item() == 1.0);
}

TEST_CASE("reductions reject bad dims, dtypes and empty inputs") {
  const Tensor x = zeros({2, 3});
  CHECK_THROWS_WITH_AS(sum(x, {2}), doctest::Contains("sum: dim 2 is out of range"),
                       core::ValueError);
  CHECK_THROWS_WITH_AS(mean(x, {1, -1}), doctest::Contains("mean: dim -1 appears more than once"),
                       core::ValueError);
  CHECK_THROWS_WITH_AS(max(zeros({0, 3})), doctest::Contains("shape [0, 3] is empty"),
                       core::ValueError);
  CHECK_THROWS_WITH_AS(min(zeros({2, 0}), 1),
                       doctest::Contains("dim 1 of the input of shape [2, 0]"), core::ValueError);
  CHECK_THROWS_WITH_AS(argmax(x, -3), doctest::Contains("argmax: dim -3"), core::ValueError);
  const Tensor ints = zeros({2, 3}, DType::i64);
  CHECK_THROWS_WITH_AS(mean(ints), doctest::Contains("mean: dtype i64 is not supported"),
                       core::DTypeError);
  CHECK_THROWS_WITH_AS(var(ints), doctest::Contains("var: dtype i64"), core::DTypeError);
  CHECK_THROWS_WITH_AS(softmax(ints, 0), doctest::Contains("softmax: dtype i64"), core::DTypeError);
  CHECK_THROWS_WITH_AS(log_softmax(zeros({2}, DType::f16), 0),
                       doctest::Contains("log_softmax: dtype f16"), core::DTypeError);
  CHECK_THROWS_WITH_AS(softmax(x, 5), doctest::Contains("softmax: dim 5"), core::ValueError);
}

TEST_CASE("gradcheck: sum, mean, var over dim lists") {
  const std::vector<Tensor> inputs = {
      make_input({2, 3, 4}, 1),
      make_input({3, 2, 4}, 2).transpose(0, 1).detach().requires_grad_(),
      make_input({2, 1, 4}, 3),
  };
  for (const Tensor& x : inputs) {
    for (const Shape& dims : kDimLists) {
      for (const bool keepdim : {false, true}) {
        const std::string what = shape_str(x.shape()) + " dims " + shape_str(dims);
        gradcheck("sum " + what, [&](const auto& in) { return sum(in[0], dims, keepdim); }, {x});
        gradcheck("mean " + what, [&](const auto& in) { return mean(in[0], dims, keepdim); }, {x});
        if (x.size(1) == 1 && dims == Shape{1}) continue;  // n = 1: NaN, nothing to compare
        gradcheck("var " + what, [&](const auto& in) { return var(in[0], dims, true, keepdim); },
                  {x});
        gradcheck("var biased " + what,
                  [&](const auto& in) { return var(in[0], dims, false, keepdim); }, {x});
      }
    }
  }
  // Zero-size: the gradient of an empty input is empty; summing over an empty dim gives zeros.
  const Tensor empty = make_input({2, 0, 3}, 4);
  gradcheck("sum over empty dim", [](const auto& in) { return sum(in[0], {1}); }, {empty});
  Tensor out = sum(empty, {1});
  out.backward(ones({2, 3}, DType::f64));
  CHECK(empty.grad().shape() == Shape{2, 0, 3});
  gradcheck("sum 0-d", [](const auto& in) { return sum(in[0] * 3.0); }, {make_input({}, 5)});
}

TEST_CASE("gradcheck: max/min over a dim route the gradient to the selected element") {
  const std::vector<Tensor> inputs = {
      make_input({3, 4}, 11),
      make_input({4, 2, 3}, 12).permute({1, 2, 0}).detach().requires_grad_(),
      make_input({1, 5}, 13),
  };
  for (const Tensor& x : inputs) {
    for (std::int64_t dim = -x.dim(); dim < x.dim(); ++dim) {
      for (const bool keepdim : {false, true}) {
        const std::string what = shape_str(x.shape()) + " dim " + std::to_string(dim);
        gradcheck("max " + what, [&](const auto& in) { return max(in[0], dim, keepdim).first; },
                  {x});
        gradcheck("min " + what, [&](const auto& in) { return min(in[0], dim, keepdim).first; },
                  {x});
      }
    }
    gradcheck("max all " + shape_str(x.shape()), [](const auto& in) { return max(in[0]); }, {x});
    gradcheck("min all " + shape_str(x.shape()), [](const auto& in) { return min(in[0]); }, {x});
  }
}

TEST_CASE("full max/min split the gradient evenly between ties") {
  Tensor x = from_vector({1, 3, 3, -2, 3, 0}, {2, 3}, DType::f64).requires_grad_();
  max(x).backward(scalar_tensor(6.0, DType::f64));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 2, 2, 0, 2, 0});
  Tensor y = from_vector({-2, 1, -2}, {3}, DType::f64).requires_grad_();
  min(y).backward();
  CHECK(y.grad().to_vector<double>() == std::vector<double>{0.5, 0, 0.5});
  // Over a dim, only the first of the tied elements gets the gradient.
  Tensor z = from_vector({5, 5, 1}, {3}, DType::f64).requires_grad_();
  max(z, 0).first.backward();
  CHECK(z.grad().to_vector<double>() == std::vector<double>{1, 0, 0});
}

TEST_CASE("gradcheck: softmax and log_softmax over each dim") {
  const std::vector<Tensor> inputs = {
      make_input({3, 5}, 21, -3, 3),
      make_input({4, 3, 2}, 22, -3, 3).permute({2, 0, 1}).detach().requires_grad_(),
      make_input({2, 1}, 23),
      make_input({}, 24),
  };
  for (const Tensor& x : inputs) {
    for (std::int64_t dim = x.dim() ? -x.dim() : 0; dim < std::max<std::int64_t>(x.dim(), 1);
         ++dim) {
      const std::string what = shape_str(x.shape()) + " dim " + std::to_string(dim);
      gradcheck("softmax " + what, [&](const auto& in) { return softmax(in[0], dim); }, {x});
      gradcheck("log_softmax " + what, [&](const auto& in) { return log_softmax(in[0], dim); },
                {x});
    }
  }
  gradcheck("softmax empty", [](const auto& in) { return softmax(in[0], 0); },
            {make_input({0, 3}, 25)});
}

TEST_CASE("reductions compose in a graph and accumulate into leaves") {
  Tensor x = make_input({3, 4}, 31);
  gradcheck("mean(softmax) + var(max)",
            [](const auto& in) {
              return mean(log_softmax(in[0], 1), {0}) * 2.0 +
                     var(max(in[0], 0).first, {}, true, true);
            },
            {x});
}
