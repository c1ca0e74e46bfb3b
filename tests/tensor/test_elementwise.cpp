// Elementwise ops: values, broadcasting, in-place variants, errors, and finite-difference
// gradients for every differentiable op and argument (broadcast, size-1, zero-size and
// non-contiguous operands).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "gradcheck.h"

using namespace ringlet;
using namespace ringlet::tensor;
using core::DType;
using ringlet::testing::gradcheck;
using ringlet::testing::make_input;

namespace {
std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }
}  // namespace

TEST_CASE("binary ops broadcast like NumPy") {
  const Tensor a = from_vector({1, 2, 3}, {3, 1});
  const Tensor b = from_vector({10, 20}, {1, 2});
  CHECK(values(a + b) == std::vector<float>{11, 21, 12, 22, 13, 23});
  CHECK(values(a - b) == std::vector<float>{-9, -19, -8, -18, -7, -17});
  CHECK(values(a * b) == std::vector<float>{10, 20, 20, 40, 30, 60});
  CHECK(values(b / a).at(5) == doctest::Approx(20.0 / 3));
  CHECK(values(pow(a, 2.0)) == std::vector<float>{1, 4, 9});
  CHECK(values(pow(a, from_vector({2}, {1}))) == std::vector<float>{1, 4, 9});
  CHECK(values(maximum(a, from_vector({2}, {}))) == std::vector<float>{2, 2, 3});
  CHECK(values(minimum(a, from_vector({2}, {}))) == std::vector<float>{1, 2, 2});
  CHECK((a + b).shape() == Shape{3, 2});
  CHECK(values(a * 2.0 + 1.0) == std::vector<float>{3, 5, 7});
  CHECK(values(2.0 * a + 1.0) == std::vector<float>{3, 5, 7});
  CHECK(values(1.0 + a) == std::vector<float>{2, 3, 4});
  CHECK(values(10.0 - a) == std::vector<float>{9, 8, 7});
  Tensor acc = zeros({3, 1});
  acc += a;
  acc *= 3.0;
  acc -= a;
  acc /= from_vector({2}, {});
  acc += 0.5;
  CHECK(values(acc) == std::vector<float>{1.5, 2.5, 3.5});
  CHECK((zeros({0, 3}) + ones({3})).shape() == Shape{0, 3});
  const Tensor ints = from_vector({1, 2, 3}, {3}, DType::i64);
  CHECK((ints + ints).to_vector<std::int64_t>() == std::vector<std::int64_t>{2, 4, 6});
}

TEST_CASE("unary ops") {
  const Tensor x = from_vector({-2, -0.5, 0, 0.5, 2}, {5}, DType::f64);
  const auto v = [](const Tensor& t) { return t.to_vector<double>(); };
  CHECK(v(relu(x)) == std::vector<double>{0, 0, 0, 0.5, 2});
  CHECK(v(abs(x)) == std::vector<double>{2, 0.5, 0, 0.5, 2});
  CHECK(v(neg(x)) == std::vector<double>{2, 0.5, -0.0, -0.5, -2});
  CHECK(v(clamp(x, -1, 1)) == std::vector<double>{-1, -0.5, 0, 0.5, 1});
  CHECK(v(sigmoid(x))[4] == doctest::Approx(1 / (1 + std::exp(-2.0))));
  CHECK(v(tanh(x))[0] == doctest::Approx(std::tanh(-2.0)));
  CHECK(v(exp(x))[4] == doctest::Approx(std::exp(2.0)));
  CHECK(v(log(exp(x)))[1] == doctest::Approx(-0.5));
  CHECK(v(sqrt(abs(x)))[4] == doctest::Approx(std::sqrt(2.0)));
}

TEST_CASE("piecewise gradients mask the incoming gradient, inf and nan included (as PyTorch)") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor g = from_vector({inf, nan, 3, 4, -inf}, {5}, DType::f64);
  const auto grad_of = [&](auto op) {
    Tensor x = from_vector({-2, -0.5, 0, 0.5, 2}, {5}, DType::f64).requires_grad_();
    op(x).backward(g);
    return x.grad().to_vector<double>();
  };
  const auto relu_grad = grad_of([](const Tensor& x) { return relu(x); });
  CHECK(relu_grad[0] == 0);
  CHECK(relu_grad[1] == 0);
  CHECK(relu_grad[2] == 0);  // 0 at the kink
  CHECK(relu_grad[3] == 4);
  CHECK(relu_grad[4] == -inf);
  const auto clamp_grad = grad_of([](const Tensor& x) { return clamp(x, -1, 1); });
  CHECK(clamp_grad[0] == 0);
  CHECK(std::isnan(clamp_grad[1]));
  CHECK(clamp_grad[3] == 4);
  CHECK(clamp_grad[4] == 0);
  const auto abs_grad = grad_of([](const Tensor& x) { return abs(x); });
  CHECK(abs_grad[0] == -inf);
  CHECK(abs_grad[2] == 0);
  CHECK(abs_grad[3] == 4);
}

TEST_CASE("comparisons and where") {
  const Tensor a = from_vector({1, 2, 3}, {3});
  const Tensor b = from_vector({2, 2, 2}, {3});
  CHECK(eq(a, b).dtype() == DType::u8);
  CHECK(eq(a, b).to_vector<int>() == std::vector<int>{0, 1, 0});
  CHECK(ne(a, b).to_vector<int>() == std::vector<int>{1, 0, 1});
  CHECK(lt(a, b).to_vector<int>() == std::vector<int>{1, 0, 0});
  CHECK(le(a, b).to_vector<int>() == std::vector<int>{1, 1, 0});
  CHECK(gt(a, b).to_vector<int>() == std::vector<int>{0, 0, 1});
  CHECK(ge(a, b).to_vector<int>() == std::vector<int>{0, 1, 1});
  CHECK(values(where(gt(a, b), a, b)) == std::vector<float>{2, 2, 3});
  CHECK_THROWS_WITH_AS(where(a, a, b), doctest::Contains("condition must be u8"), core::DTypeError);
}

TEST_CASE("in-place variants") {
  Tensor a = from_vector({1, 2, 3, 4}, {2, 2});
  add_(a, from_vector({10, 20}, {2}));
  CHECK(values(a) == std::vector<float>{11, 22, 13, 24});
  mul_(a, 2.0);
  CHECK(values(a) == std::vector<float>{22, 44, 26, 48});
  sub_(a, ones({1}));
  div_(a, full({2, 2}, 0.5));
  CHECK(values(a) == std::vector<float>{42, 86, 50, 94});
  Tensor t = a.transpose(0, 1);  // in place through a non-contiguous view
  add_(t, 1.0);
  CHECK(values(a) == std::vector<float>{43, 87, 51, 95});
  neg_(a);
  relu_(a);
  CHECK(values(a) == std::vector<float>(4, 0.0f));
  Tensor c = from_vector({-3, 0.5, 3}, {3});
  clamp_(c, -1, 1);
  CHECK(values(c) == std::vector<float>{-1, 0.5, 1});
  copy_(c, from_vector({7}, {1}));
  CHECK(values(c) == std::vector<float>{7, 7, 7});
  add_scaled_(c, ones({3}), -2.0);
  CHECK(values(c) == std::vector<float>{5, 5, 5});
  zero_(c);
  CHECK(values(c) == std::vector<float>{0, 0, 0});
  CHECK_THROWS_WITH_AS(add_(c, ones({2, 3})), doctest::Contains("does not broadcast"),
                       core::ShapeError);
  Tensor leaf = ones({2});
  leaf.requires_grad_();
  CHECK_THROWS_WITH_AS(mul_(leaf, 2.0), doctest::Contains("requires grad"), core::AutogradError);
  {
    NoGradGuard no_grad;
    mul_(leaf, 2.0);  // optimizer-style update
  }
  CHECK(values(leaf) == std::vector<float>{2, 2});
}

TEST_CASE("errors name the op and both operands") {
  CHECK_THROWS_WITH_AS(add(zeros({2, 3}), zeros({4})),
                       doctest::Contains("add: shapes [2, 3] and [4] cannot be broadcast"),
                       core::ShapeError);
  CHECK_THROWS_WITH_AS(mul(zeros({2}), zeros({2}, DType::f64)),
                       doctest::Contains("mul: dtypes differ: f32 [2] and f64 [2]"),
                       core::DTypeError);
  CHECK_THROWS_WITH_AS(div(zeros({2}, DType::i64), zeros({2}, DType::i64)),
                       doctest::Contains("div: dtype i64 is not supported"), core::DTypeError);
}

TEST_CASE("gradients of binary ops (finite differences, f64)") {
  const Tensor a = make_input({3, 4}, 11);
  const Tensor b = make_input({3, 4}, 12);
  const Tensor row = make_input({4}, 13);
  const Tensor col = make_input({3, 1}, 14);
  const Tensor pos = make_input({3, 4}, 15, 0.5, 2.0);
  const Tensor far = make_input({3, 4}, 16, 1.0, 2.0);  // away from b for division
  gradcheck("add", [](auto& in) { return add(in[0], in[1]); }, {a, b});
  gradcheck("add broadcast", [](auto& in) { return add(in[0], in[1]); }, {a, row});
  gradcheck("sub broadcast", [](auto& in) { return sub(in[0], in[1]); }, {col, row});
  gradcheck("mul broadcast", [](auto& in) { return mul(in[0], in[1]); }, {a, col});
  gradcheck("div", [](auto& in) { return div(in[0], in[1]); }, {a, far});
  gradcheck("pow tensor", [](auto& in) { return pow(in[0], in[1]); }, {pos, b});
  gradcheck("maximum", [](auto& in) { return maximum(in[0], in[1]); }, {a, b});
  gradcheck("minimum", [](auto& in) { return minimum(in[0], in[1]); }, {a, row});
  gradcheck("scalar ops", [](auto& in) { return div(sub(mul(add(in[0], 1.0), 3.0), 2.0), 4.0); },
            {a});
  const Tensor cond = gt(make_input({3, 4}, 17), zeros({}, DType::f64));
  gradcheck("where", [cond](auto& in) { return where(cond, in[0], in[1]); }, {a, row});
}

TEST_CASE("gradients of unary ops (finite differences, f64)") {
  // Inputs kept away from kinks (0 for relu/abs, the clamp bounds) where FD is undefined.
  const Tensor x = make_input({2, 5}, 21, 0.1, 1.0);
  const Tensor s = make_input({2, 5}, 22);
  gradcheck("neg", [](auto& in) { return neg(in[0]); }, {s});
  gradcheck("exp", [](auto& in) { return exp(in[0]); }, {s});
  gradcheck("log", [](auto& in) { return log(in[0]); }, {x});
  gradcheck("sqrt", [](auto& in) { return sqrt(in[0]); }, {x});
  gradcheck("abs", [](auto& in) { return abs(sub(in[0], 0.55)); }, {x});
  gradcheck("relu", [](auto& in) { return relu(sub(in[0], 0.55)); }, {x});
  gradcheck("sigmoid", [](auto& in) { return sigmoid(in[0]); }, {s});
  gradcheck("tanh", [](auto& in) { return tanh(in[0]); }, {s});
  gradcheck("clamp", [](auto& in) { return clamp(in[0], 0.33, 0.77); }, {x});
  gradcheck("pow scalar", [](auto& in) { return pow(in[0], 2.5); }, {x});
}

TEST_CASE("gradients with size-1, zero-size and non-contiguous operands") {
  Tensor nc = make_input({4, 3}, 31).transpose(0, 1).detach();
  nc.requires_grad_();
  const Tensor one = make_input({1, 1}, 32);
  gradcheck("mul non-contiguous x size-1", [](auto& in) { return mul(in[0], in[1]); }, {nc, one});
  gradcheck("tanh non-contiguous", [](auto& in) { return tanh(in[0]); }, {nc});
  const Tensor z = make_input({0, 4}, 33);
  const Tensor r = make_input({4}, 34);
  Tensor out = add(z, r);
  CHECK(out.shape() == Shape{0, 4});
  out.backward(zeros({0, 4}, DType::f64));
  CHECK(z.grad().shape() == Shape{0, 4});
  CHECK(r.grad().to_vector<double>() == std::vector<double>(4, 0.0));
}
