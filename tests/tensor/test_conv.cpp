// conv2d: forward against a direct six-loop reference in f64 (strides, padding, dilation,
// non-square kernels, 1x1, size-1 dims, an empty batch, the CNN's shapes in f32),
// finite-difference gradients for input, weight and bias (contiguous and non-contiguous
// inputs), f32 gradients against f64 ones, gradients computed only where needed, and errors.
#include <doctest/doctest.h>

#include <cmath>

#include "gradcheck.h"

using namespace ringlet;
using namespace ringlet::tensor;
using ringlet::testing::gradcheck;
using ringlet::testing::make_input;

namespace {

Conv2dOptions conv_options(std::int64_t stride, std::int64_t pad, std::int64_t dilation) {
  Conv2dOptions o;
  o.stride = {stride, stride};
  o.padding = {pad, pad};
  o.dilation = {dilation, dilation};
  return o;
}

// out[n, o, y, x] = b[o] + sum_{c, i, j} in[n, c, y*s - p + i*d, x*s - p + j*d] * w[o, c, i, j]
std::vector<double> reference_conv(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                   const Conv2dOptions& opt, Shape& out_shape) {
  const auto x = input.to_vector<double>();
  const auto w = weight.to_vector<double>();
  const auto b = bias.defined() ? bias.to_vector<double>() : std::vector<double>();
  const std::int64_t n_ = input.size(0), c_ = input.size(1), h = input.size(2), wd = input.size(3);
  const std::int64_t o_ = weight.size(0), kh = weight.size(2), kw = weight.size(3);
  const std::int64_t oh =
      (h + 2 * opt.padding[0] - opt.dilation[0] * (kh - 1) - 1) / opt.stride[0] + 1;
  const std::int64_t ow =
      (wd + 2 * opt.padding[1] - opt.dilation[1] * (kw - 1) - 1) / opt.stride[1] + 1;
  out_shape = {n_, o_, oh, ow};
  std::vector<double> out(static_cast<std::size_t>(n_ * o_ * oh * ow));
  for (std::int64_t n = 0; n < n_; ++n)
    for (std::int64_t o = 0; o < o_; ++o)
      for (std::int64_t y = 0; y < oh; ++y)
        for (std::int64_t xx = 0; xx < ow; ++xx) {
          double total = b.empty() ? 0.0 : b[o];
          for (std::int64_t c = 0; c < c_; ++c)
            for (std::int64_t i = 0; i < kh; ++i)
              for (std::int64_t j = 0; j < kw; ++j) {
                const std::int64_t iy = y * opt.stride[0] - opt.padding[0] + i * opt.dilation[0];
                const std::int64_t ix = xx * opt.stride[1] - opt.padding[1] + j * opt.dilation[1];
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                total += x[((n * c_ + c) * h + iy) * wd + ix] * w[((o * c_ + c) * kh + i) * kw + j];
              }
          out[((n * o_ + o) * oh + y) * ow + xx] = total;
        }
  return out;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double atol,
                 double rtol) {
  REQUIRE(got.size() == want.size());
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::abs(got[i] - want[i]) > atol + rtol * std::abs(want[i])) {
      if (++bad <= 3) FAIL_CHECK("element ", i, ": got ", got[i], ", want ", want[i]);
    }
  }
  CHECK(bad == 0);
}

struct Case {
  Shape input, weight;
  bool bias;
  Conv2dOptions options;
};

const std::vector<Case> kCases = {
    {{2, 3, 5, 5}, {4, 3, 3, 3}, true, conv_options(1, 0, 1)},
    {{2, 3, 5, 5}, {4, 3, 3, 3}, true, conv_options(1, 1, 1)},
    {{1, 2, 7, 6}, {3, 2, 3, 2}, false, conv_options(2, 1, 1)},
    {{2, 2, 7, 7}, {2, 2, 3, 3}, true, conv_options(1, 2, 2)},
    {{3, 1, 6, 5}, {2, 1, 1, 1}, true, conv_options(1, 0, 1)},
    {{1, 1, 1, 1}, {1, 1, 1, 1}, true, conv_options(1, 0, 1)},
    {{2, 2, 1, 4}, {3, 2, 1, 3}, true, conv_options(1, 0, 1)},
    {{1, 2, 3, 3}, {1, 2, 3, 3}, true, conv_options(1, 1, 1)},
    {{2, 3, 8, 9}, {2, 3, 2, 3}, true, Conv2dOptions{{3, 2}, {1, 0}, {2, 1}}},
    // C*kH*kW >= 64: one GEMM over the whole batch instead of one per image.
    {{2, 8, 4, 4}, {3, 8, 3, 3}, true, conv_options(1, 1, 1)},
    {{3, 8, 6, 5}, {2, 8, 3, 3}, false, conv_options(2, 2, 2)},
};

}  // namespace

TEST_CASE("conv2d forward matches the direct reference (f64)") {
  std::uint64_t seed = 10;
  for (const Case& k : kCases) {
    CAPTURE(shape_str(k.input));
    CAPTURE(shape_str(k.weight));
    const Tensor x = make_input(k.input, seed++).detach();
    const Tensor w = make_input(k.weight, seed++).detach();
    const Tensor b = k.bias ? make_input({k.weight[0]}, seed++).detach() : Tensor();
    Shape want_shape;
    const auto want = reference_conv(x, w, b, k.options, want_shape);
    const Tensor out = conv2d(x, w, b, k.options);
    CHECK(out.shape() == want_shape);
    check_close(out.to_vector<double>(), want, 1e-12, 1e-12);
  }
}

TEST_CASE("conv2d forward on the CNN's shapes (f32)") {
  Generator gen(3);
  for (const auto& [in, wt] : std::vector<std::pair<Shape, Shape>>{
           {{4, 1, 28, 28}, {32, 1, 3, 3}}, {{4, 32, 14, 14}, {64, 32, 3, 3}}}) {
    const Tensor x = uniform(in, -1, 1, gen);
    const Tensor w = uniform(wt, -0.2, 0.2, gen);
    const Tensor b = uniform({wt[0]}, -0.2, 0.2, gen);
    Shape want_shape;
    const auto want = reference_conv(x, w, b, conv_options(1, 1, 1), want_shape);
    const Tensor out = conv2d(x, w, b, conv_options(1, 1, 1));
    CHECK(out.dtype() == DType::f32);
    CHECK(out.shape() == want_shape);
    check_close(out.to_vector<double>(), want, 1e-5, 1e-4);
  }
}

TEST_CASE("conv2d gradients for input, weight and bias (finite differences)") {
  std::uint64_t seed = 100;
  for (const Case& k : kCases) {
    CAPTURE(shape_str(k.input));
    CAPTURE(shape_str(k.weight));
    const Tensor x = make_input(k.input, seed++);
    const Tensor w = make_input(k.weight, seed++);
    const Tensor b = k.bias ? make_input({k.weight[0]}, seed++) : Tensor();
    const Conv2dOptions opt = k.options;
    CHECK(gradcheck("conv2d", [opt](auto& in) { return conv2d(in[0], in[1], in[2], opt); },
                    {x, w, b}) == 0);
  }
}

TEST_CASE("conv2d on non-contiguous inputs") {
  // A non-contiguous leaf: [N, C, W, H] storage seen as [N, C, H, W].
  const Tensor x = make_input({2, 3, 6, 5}, 1).transpose(2, 3).detach().requires_grad_();
  REQUIRE_FALSE(x.is_contiguous());
  const Tensor w = make_input({2, 3, 3, 3}, 2);
  const Tensor b = make_input({2}, 3);
  Shape want_shape;
  const auto want = reference_conv(x, w, b, conv_options(1, 1, 1), want_shape);
  check_close(conv2d(x, w, b, conv_options(1, 1, 1)).to_vector<double>(), want, 1e-12, 1e-12);
  CHECK(gradcheck("conv2d transposed leaf",
                  [](auto& in) { return conv2d(in[0], in[1], in[2], conv_options(2, 1, 1)); },
                  {x, w, b}) == 0);
  // A permuted view of an NHWC leaf, gradients flowing back through the permute.
  const Tensor nhwc = make_input({2, 5, 4, 3}, 4);
  CHECK(
      gradcheck("conv2d permuted view",
                [](auto& in) {
                  return conv2d(permute(in[0], {0, 3, 1, 2}), in[1], in[2], conv_options(1, 1, 1));
                },
                {nhwc, w, b}) == 0);
}

TEST_CASE("conv2d f32 gradients agree with f64") {
  // 4 channels: one GEMM per image; 8 channels (72 rows): one GEMM over the batch.
  for (const std::int64_t channels : {4, 8}) {
    CAPTURE(channels);
    const Tensor x64 = make_input({3, channels, 9, 9}, 5);
    const Tensor w64 = make_input({6, channels, 3, 3}, 6);
    const Tensor b64 = make_input({6}, 7);
    const Tensor x32 = x64.detach().to(DType::f32).requires_grad_();
    const Tensor w32 = w64.detach().to(DType::f32).requires_grad_();
    const Tensor b32 = b64.detach().to(DType::f32).requires_grad_();
    Generator gen(8);
    const Tensor v = randn({3, 6, 9, 9}, gen, DType::f64);
    conv2d(x64, w64, b64, conv_options(1, 1, 1)).backward(v);
    conv2d(x32, w32, b32, conv_options(1, 1, 1)).backward(v.to(DType::f32));
    check_close(x32.grad().to_vector<double>(), x64.grad().to_vector<double>(), 1e-4, 1e-4);
    check_close(w32.grad().to_vector<double>(), w64.grad().to_vector<double>(), 1e-4, 1e-4);
    check_close(b32.grad().to_vector<double>(), b64.grad().to_vector<double>(), 1e-4, 1e-4);
  }
}

TEST_CASE("conv2d computes only the gradients that are needed") {
  const Tensor x = make_input({2, 1, 6, 6}, 9).detach();  // like a first layer's images
  const Tensor w = make_input({3, 1, 3, 3}, 10);
  const Tensor b = make_input({3}, 11).detach();
  const Tensor out = conv2d(x, w, b, conv_options(1, 1, 1));
  REQUIRE(out.requires_grad());
  sum(out).backward();
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(b.grad().defined());
  REQUIRE(w.grad().defined());
  // With d(out) = 1 every output channel gets the same weight gradient, and the centre tap of
  // a padded 3x3 kernel sees every input pixel exactly once.
  const auto g = w.grad().to_vector<double>();
  for (int o = 1; o < 3; ++o) {
    for (int t = 0; t < 9; ++t) CHECK(g[o * 9 + t] == doctest::Approx(g[t]));
  }
  CHECK(g[4] == doctest::Approx(sum(x).item()));

  // A frozen weight: only the input gradient, and the columns are not kept for it.
  const Tensor frozen = make_input({3, 1, 3, 3}, 12).detach();
  const Tensor xg = make_input({2, 1, 6, 6}, 13);
  CHECK(gradcheck("conv2d input only",
                  [frozen](auto& in) { return conv2d(in[0], frozen, {}, conv_options(1, 1, 1)); },
                  {xg}) == 0);
  Tensor late = make_input({3, 1, 3, 3}, 14).detach();
  const Tensor y = conv2d(xg, late, {}, conv_options(1, 1, 1));
  late.requires_grad_();
  CHECK_THROWS_WITH_AS(sum(y).backward(), doctest::Contains("started requiring grad"),
                       core::AutogradError);
  // No grad mode: no graph at all.
  NoGradGuard no_grad;
  CHECK_FALSE(conv2d(x, w, b, conv_options(1, 1, 1)).requires_grad());
}

TEST_CASE("conv2d with an empty batch") {
  const Tensor x = make_input({0, 2, 5, 5}, 12);
  const Tensor w = make_input({3, 2, 3, 3}, 13);
  const Tensor b = make_input({3}, 14);
  const Tensor out = conv2d(x, w, b, conv_options(1, 1, 1));
  CHECK(out.shape() == Shape{0, 3, 5, 5});
  out.backward(zeros({0, 3, 5, 5}, DType::f64));
  CHECK(x.grad().shape() == Shape{0, 2, 5, 5});
  CHECK(w.grad().to_vector<double>() == std::vector<double>(54, 0.0));
  CHECK(b.grad().to_vector<double>() == std::vector<double>(3, 0.0));
}

TEST_CASE("conv2d errors name the op and the shapes") {
  const Tensor x = zeros({2, 3, 5, 5});
  const Tensor w = zeros({4, 3, 3, 3});
  CHECK_THROWS_WITH_AS(conv2d(zeros({3, 5, 5}), w), doctest::Contains("input must be 4-D"),
                       core::ShapeError);
  CHECK_THROWS_WITH_AS(conv2d(x, zeros({4, 3, 3})),
                       doctest::Contains("weight must be 4-D [O, C, kH, kW] (input [2, 3, 5, 5], "
                                         "weight [4, 3, 3])"),
                       core::ShapeError);
  CHECK_THROWS_WITH_AS(conv2d(x, zeros({4, 2, 3, 3})),
                       doctest::Contains("input has 3 channels but the weight expects 2"),
                       core::ShapeError);
  CHECK_THROWS_WITH_AS(conv2d(x, w, zeros({3})), doctest::Contains("bias must have shape [4]"),
                       core::ShapeError);
  CHECK_THROWS_WITH_AS(conv2d(x, zeros({4, 3, 6, 3})),
                       doctest::Contains("conv2d: kernel (dilated size 6x3) is larger than the "
                                         "padded input (5x5)"),
                       core::ShapeError);
  CHECK_THROWS_WITH_AS(conv2d(x, w, {}, conv_options(1, 0, 3)),
                       doctest::Contains("larger than the padded input"), core::ShapeError);
  CHECK_NOTHROW(conv2d(x, zeros({4, 3, 6, 3}), {}, conv_options(1, 1, 1)));
  CHECK_THROWS_WITH_AS(conv2d(x, w, {}, conv_options(0, 0, 1)),
                       doctest::Contains("stride and dilation must be >= 1"), core::ValueError);
  CHECK_THROWS_WITH_AS(conv2d(x, w, {}, conv_options(1, -1, 1)), doctest::Contains("padding >= 0"),
                       core::ValueError);
  CHECK_THROWS_WITH_AS(conv2d(x, zeros({4, 3, 3, 3}, DType::f64)),
                       doctest::Contains("dtypes differ (input f32, weight f64)"),
                       core::DTypeError);
  CHECK_THROWS_WITH_AS(conv2d(zeros({2, 3, 5, 5}, DType::i64), zeros({4, 3, 3, 3}, DType::i64)),
                       doctest::Contains("conv2d: dtype i64 is not supported"), core::DTypeError);
}
