// max_pool2d / avg_pool2d: values and indices against direct f64 loops over kernel, stride and
// padding variants (3-D and 4-D inputs, size-1 dims, an empty batch), tie and NaN rules,
// finite-difference gradients (contiguous and non-contiguous inputs), errors, and the fused
// relu_max_pool2d against the two ops (Sequential's use of it: test_nn_modules).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gradcheck.h"

using namespace ringlet;
using namespace ringlet::tensor;
using ringlet::testing::gradcheck;
using ringlet::testing::make_input;

namespace {

Pool2dOptions pool_options(std::array<std::int64_t, 2> kernel, std::array<std::int64_t, 2> stride,
                           std::array<std::int64_t, 2> padding) {
  Pool2dOptions o;
  o.kernel = kernel;
  o.stride = stride;
  o.padding = padding;
  return o;
}

struct Reference {
  Shape shape;
  std::vector<double> max, avg;
  std::vector<std::int64_t> argmax;
};

// Pools every H*W plane directly: padding is -inf for max and counts as zero for avg.
Reference reference_pool(const Tensor& input, const Pool2dOptions& o) {
  const auto x = input.to_vector<double>();
  const std::int64_t h = input.size(-2), w = input.size(-1);
  const std::int64_t planes = input.numel() / (h * w);
  const std::int64_t kh = o.kernel[0], kw = o.kernel[1];
  const std::int64_t sh = o.stride[0] ? o.stride[0] : kh, sw = o.stride[1] ? o.stride[1] : kw;
  const std::int64_t oh = (h + 2 * o.padding[0] - kh) / sh + 1;
  const std::int64_t ow = (w + 2 * o.padding[1] - kw) / sw + 1;
  Reference r;
  r.shape = input.shape();
  r.shape[r.shape.size() - 2] = oh;
  r.shape[r.shape.size() - 1] = ow;
  for (std::int64_t p = 0; p < planes; ++p)
    for (std::int64_t y = 0; y < oh; ++y)
      for (std::int64_t xx = 0; xx < ow; ++xx) {
        double best = -std::numeric_limits<double>::infinity(), total = 0;
        std::int64_t at = -1;
        for (std::int64_t i = 0; i < kh; ++i)
          for (std::int64_t j = 0; j < kw; ++j) {
            const std::int64_t iy = y * sh - o.padding[0] + i, ix = xx * sw - o.padding[1] + j;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
            const double v = x[(p * h + iy) * w + ix];
            total += v;
            if (at < 0 || v > best) {
              best = v;
              at = iy * w + ix;
            }
          }
        r.max.push_back(best);
        r.argmax.push_back(at);
        r.avg.push_back(total / static_cast<double>(kh * kw));
      }
  return r;
}

struct Case {
  Shape input;
  Pool2dOptions options;
};

const std::vector<Case> kCases = {
    {{2, 3, 4, 4}, pool_options({2, 2}, {0, 0}, {0, 0})},
    {{2, 3, 5, 5}, pool_options({2, 2}, {2, 2}, {0, 0})},  // odd size: last row/col dropped
    {{1, 2, 7, 6}, pool_options({3, 3}, {2, 2}, {1, 1})},
    {{2, 1, 5, 5}, pool_options({3, 3}, {1, 1}, {1, 1})},
    {{1, 2, 6, 7}, pool_options({2, 3}, {1, 2}, {1, 1})},
    {{3, 5, 6}, pool_options({2, 2}, {1, 1}, {0, 0})},  // 3-D [C, H, W]
    {{2, 2, 1, 5}, pool_options({1, 2}, {1, 1}, {0, 1})},
    {{1, 1, 1, 1}, pool_options({1, 1}, {1, 1}, {0, 0})},
};

}  // namespace

TEST_CASE("max_pool2d and avg_pool2d match direct loops") {
  std::uint64_t seed = 1;
  for (const Case& k : kCases) {
    CAPTURE(shape_str(k.input));
    const Tensor x = make_input(k.input, seed++).detach();
    const Reference want = reference_pool(x, k.options);
    const auto [values, indices] = max_pool2d_with_indices(x, k.options);
    CHECK(values.shape() == want.shape);
    CHECK(indices.shape() == want.shape);
    CHECK(indices.dtype() == DType::i64);
    CHECK(values.to_vector<double>() == want.max);
    CHECK(indices.to_vector<std::int64_t>() == want.argmax);
    CHECK(max_pool2d(x, k.options).to_vector<double>() == want.max);
    const Tensor avg = avg_pool2d(x, k.options);
    CHECK(avg.shape() == want.shape);
    const auto got = avg.to_vector<double>();
    REQUIRE(got.size() == want.avg.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want.avg[i]));
  }
}

TEST_CASE("pooling known values in f32") {
  const Tensor x = arange(0.0, 16.0, 1.0).view({1, 1, 4, 4});
  const auto [values, indices] = max_pool2d_with_indices(x, pool_options({2, 2}, {0, 0}, {0, 0}));
  CHECK(values.to_vector<float>() == std::vector<float>{5, 7, 13, 15});
  CHECK(indices.to_vector<std::int64_t>() == std::vector<std::int64_t>{5, 7, 13, 15});
  CHECK(avg_pool2d(x, pool_options({2, 2}, {0, 0}, {0, 0})).to_vector<float>() ==
        std::vector<float>{2.5f, 4.5f, 10.5f, 12.5f});
  // count_include_pad: the corner window of a padded 3x3 kernel holds 4 real values of 9.
  const Tensor padded = avg_pool2d(x, pool_options({3, 3}, {2, 2}, {1, 1}));
  CHECK(padded.shape() == Shape{1, 1, 2, 2});
  CHECK(padded.to_vector<float>()[0] == doctest::Approx((0 + 1 + 4 + 5) / 9.0));
}

TEST_CASE("max_pool2d ties pick the first maximum and NaN propagates") {
  const Tensor x = ones({1, 1, 2, 4}, DType::f64).requires_grad_();
  const auto [values, indices] = max_pool2d_with_indices(x, pool_options({2, 2}, {0, 0}, {0, 0}));
  CHECK(indices.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 2});
  sum(values).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{1, 0, 1, 0, 0, 0, 0, 0});

  // A tie that is not in the first position: the first of the tied maxima wins.
  const Tensor later = from_vector({0, 2, 1, 2, 0, 1, 2, 2}, {1, 2, 2, 2}, DType::f32);
  CHECK(max_pool2d_with_indices(later, pool_options({2, 2}, {0, 0}, {0, 0}))
            .second.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 2});

  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor y = from_vector({1, nan, 3, 2}, {1, 1, 2, 2}, DType::f64);
  const auto [v, i] = max_pool2d_with_indices(y, pool_options({2, 2}, {0, 0}, {0, 0}));
  CHECK(std::isnan(v.item()));
  CHECK(i.to_vector<std::int64_t>() == std::vector<std::int64_t>{1});

  // The same rules on the general path (3x3 windows, stride 1, padding 1).
  const Pool2dOptions padded = pool_options({3, 3}, {1, 1}, {1, 1});
  CHECK(max_pool2d_with_indices(ones({1, 1, 3, 3}), padded).second.to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{0, 0, 1, 0, 0, 1, 3, 3, 4});
  const auto [pv, pi] = max_pool2d_with_indices(y, padded);
  for (double e : pv.to_vector<double>()) CHECK(std::isnan(e));
  CHECK(pi.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 1, 1, 1});
}

TEST_CASE("pooling gradients (finite differences)") {
  std::uint64_t seed = 50;
  for (const Case& k : kCases) {
    CAPTURE(shape_str(k.input));
    const Tensor x = make_input(k.input, seed++);
    const Pool2dOptions opt = k.options;
    CHECK(gradcheck("max_pool2d", [opt](auto& in) { return max_pool2d(in[0], opt); }, {x}) == 0);
    CHECK(gradcheck("avg_pool2d", [opt](auto& in) { return avg_pool2d(in[0], opt); }, {x}) == 0);
  }
}

TEST_CASE("pooling non-contiguous inputs") {
  const Tensor x = make_input({2, 3, 7, 6}, 7).transpose(2, 3).detach().requires_grad_();
  REQUIRE_FALSE(x.is_contiguous());
  const Pool2dOptions opt = pool_options({3, 2}, {2, 1}, {1, 1});
  const Reference want = reference_pool(x, opt);
  CHECK(max_pool2d(x, opt).to_vector<double>() == want.max);
  CHECK(gradcheck("max_pool2d transposed", [opt](auto& in) { return max_pool2d(in[0], opt); },
                  {x}) == 0);
  CHECK(gradcheck("avg_pool2d transposed", [opt](auto& in) { return avg_pool2d(in[0], opt); },
                  {x}) == 0);
  const Tensor nhwc = make_input({2, 4, 4, 3}, 8);
  CHECK(gradcheck(
            "max_pool2d permuted view",
            [](auto& in) {
              return max_pool2d(permute(in[0], {0, 3, 1, 2}), pool_options({2, 2}, {0, 0}, {0, 0}));
            },
            {nhwc}) == 0);
}

namespace {

// A tensor's values as their bits (f32 or f64), so -0 and NaN payloads count.
std::vector<std::uint64_t> bits_of(const Tensor& t) {
  const Tensor c = t.detach().contiguous();
  const auto es = core::dtype_size(c.dtype());
  const auto* p = static_cast<const unsigned char*>(c.raw_data());
  std::vector<std::uint64_t> out(static_cast<std::size_t>(c.numel()));
  for (std::size_t i = 0; i < out.size(); ++i) std::memcpy(&out[i], p + i * es, es);
  return out;
}

// Values on a grid of halves (ties), -0 every 7th, a NaN every 53rd, the rest of both signs.
Tensor awkward_input(const Shape& shape, DType dtype, std::uint64_t seed) {
  std::vector<double> v = make_input(shape, seed).to_vector<double>();
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = std::round(v[i] * 4) / 2;
    if (i % 7 == 0) v[i] = -0.0;
    if (i % 53 == 3) v[i] = std::numeric_limits<double>::quiet_NaN();
  }
  return from_vector(v, shape, DType::f64).to(dtype).requires_grad_();
}

}  // namespace

TEST_CASE("relu_max_pool2d gives max_pool2d(relu(x))'s values and gradients, bit for bit") {
  const Pool2dOptions fused_kind = pool_options({2, 2}, {0, 0}, {0, 0});
  const Pool2dOptions other = pool_options({3, 3}, {2, 2}, {1, 1});  // runs the two ops
  std::uint64_t seed = 70;
  for (const DType dtype : {DType::f32, DType::f64}) {
    for (const Shape& shape :
         {Shape{2, 3, 8, 8}, Shape{4, 5, 14, 14}, Shape{1, 2, 7, 9}, Shape{3, 28, 28}}) {
      for (const Pool2dOptions& opt : {fused_kind, other}) {
        CAPTURE(dtype);
        CAPTURE(shape_str(shape));
        CAPTURE(opt.kernel[0]);
        const Tensor x = awkward_input(shape, dtype, seed++);
        const Tensor x2 = x.detach().clone().requires_grad_();
        const Tensor fused = relu_max_pool2d(x, opt);
        const Tensor apart = max_pool2d(relu(x2), opt);
        CHECK(bits_of(fused) == bits_of(apart));
        REQUIRE(fused.grad_fn() != nullptr);
        CHECK(fused.grad_fn()->name() ==
              (opt.kernel[0] == 2 ? "relu_max_pool2d" : apart.grad_fn()->name()));
        // Gradients with -0 among them: max_pool2d's sum into zeros makes those +0.
        std::vector<double> g = make_input(fused.shape(), seed++).to_vector<double>();
        for (std::size_t i = 0; i < g.size(); i += 5) g[i] = -0.0;
        const Tensor grad = from_vector(g, fused.shape(), DType::f64).to(dtype);
        fused.backward(grad);
        apart.backward(grad);
        CHECK(bits_of(x.grad()) == bits_of(x2.grad()));
      }
    }
  }
}

TEST_CASE("pooling an empty batch") {
  const Tensor x = make_input({0, 2, 4, 4}, 9);
  const Tensor out = max_pool2d(x, pool_options({2, 2}, {0, 0}, {0, 0}));
  CHECK(out.shape() == Shape{0, 2, 2, 2});
  out.backward(zeros({0, 2, 2, 2}, DType::f64));
  CHECK(x.grad().shape() == Shape{0, 2, 4, 4});
  CHECK(avg_pool2d(x, pool_options({2, 2}, {0, 0}, {0, 0})).shape() == Shape{0, 2, 2, 2});
}

TEST_CASE("pooling errors") {
  const Tensor x = zeros({2, 3, 4, 4});
  CHECK_THROWS_WITH_AS(max_pool2d(zeros({4, 4}), {}),
                       doctest::Contains("max_pool2d: input must be 3-D [C, H, W] or 4-D [N, C, "
                                         "H, W], got shape [4, 4]"),
                       core::ShapeError);
  CHECK_THROWS_WITH_AS(avg_pool2d(zeros({1, 2, 3, 4, 4}), {}),
                       doctest::Contains("avg_pool2d: input must be 3-D"), core::ShapeError);
  CHECK_THROWS_WITH_AS(max_pool2d(x, pool_options({2, 2}, {0, 0}, {2, 0})),
                       doctest::Contains("at most half the kernel size"), core::ValueError);
  CHECK_THROWS_WITH_AS(avg_pool2d(x, pool_options({3, 3}, {1, 1}, {-1, 0})),
                       doctest::Contains("padding must be >= 0"), core::ValueError);
  CHECK_THROWS_WITH_AS(max_pool2d(x, pool_options({5, 2}, {0, 0}, {0, 0})),
                       doctest::Contains("kernel 5x2 is larger than the padded input 4x4 (input "
                                         "shape [2, 3, 4, 4])"),
                       core::ShapeError);
  CHECK_NOTHROW(max_pool2d(x, pool_options({5, 2}, {0, 0}, {1, 0})));
  CHECK_THROWS_WITH_AS(max_pool2d(x, pool_options({0, 2}, {0, 0}, {0, 0})),
                       doctest::Contains("kernel size must be >= 1"), core::ValueError);
  CHECK_THROWS_WITH_AS(max_pool2d(x, pool_options({2, 2}, {-1, 1}, {0, 0})),
                       doctest::Contains("stride must be >= 1"), core::ValueError);
  CHECK_THROWS_WITH_AS(max_pool2d(zeros({2, 3, 0, 4}), {}),
                       doctest::Contains("only the batch dim may be empty"), core::ShapeError);
  CHECK_THROWS_WITH_AS(max_pool2d(zeros({2, 3, 4, 4}, DType::i32), {}),
                       doctest::Contains("max_pool2d: dtype i32 is not supported"),
                       core::DTypeError);
}
