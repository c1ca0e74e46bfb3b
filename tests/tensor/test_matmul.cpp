// matmul and linear: values against a by-definition reference (1-D promotion, batch
// broadcasting) for contiguous, transposed and strided operands in f32 and f64, zero-size
// dims (k = 0 included), cpu::gemm's degenerate cases, error paths, and finite-difference
// gradients for every argument.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "gradcheck.h"
#include "tensor/cpu/blas.h"

using namespace ringlet;
using namespace ringlet::tensor;
using core::DType;
using ringlet::testing::gradcheck;
using ringlet::testing::make_input;

namespace {

struct Reference {
  Shape shape;
  std::vector<double> values;
};

// torch.matmul by definition, in double: 1-D operands promoted (and the added dim dropped),
// batch dims broadcast, C[b, i, j] = sum_p A[b, i, p] B[b, p, j].
Reference reference_matmul(const Tensor& a, const Tensor& b) {
  Shape as = a.shape(), bs = b.shape();
  if (as.size() == 1) as = {1, as[0]};
  if (bs.size() == 1) bs = {bs[0], 1};
  const std::int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  const Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  const std::size_t rank = std::max(a_batch.size(), b_batch.size());
  Shape batch(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t da = i + a_batch.size() < rank ? 1 : a_batch[i + a_batch.size() - rank];
    const std::int64_t db = i + b_batch.size() < rank ? 1 : b_batch[i + b_batch.size() - rank];
    batch[i] = da == 1 ? db : da;
  }
  // Row-major offset of a batch position in an operand with its own (right-aligned) batch dims.
  auto batch_offset = [&](const Shape& own, std::int64_t linear, std::int64_t matrix) {
    std::int64_t offset = 0, scale = matrix;
    for (std::size_t i = rank; i-- > 0;) {
      const std::int64_t index = linear % batch[i];
      linear /= batch[i];
      if (i + own.size() < rank) continue;
      const std::int64_t extent = own[i + own.size() - rank];
      if (extent != 1) offset += index * scale;
      scale *= extent;
    }
    return offset;
  };
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  Reference out;
  const std::int64_t batches = shape_numel(batch);
  out.values.assign(static_cast<std::size_t>(batches * m * n), 0.0);
  for (std::int64_t t = 0; t < batches; ++t) {
    const std::int64_t ao = batch_offset(a_batch, t, m * k), bo = batch_offset(b_batch, t, k * n);
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double total = 0;
        for (std::int64_t p = 0; p < k; ++p) total += av[ao + i * k + p] * bv[bo + p * n + j];
        out.values[(t * m + i) * n + j] = total;
      }
    }
  }
  out.shape = batch;
  if (a.dim() > 1) out.shape.push_back(m);
  if (b.dim() > 1) out.shape.push_back(n);
  return out;
}

void check_matches(const Tensor& got, const Reference& want, double tol, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == want.shape);
  const auto values = got.to_vector<double>();
  for (std::size_t i = 0; i < values.size(); ++i) {
    CHECK(std::abs(values[i] - want.values[i]) <= tol * (1 + std::abs(want.values[i])));
  }
}

struct Case {
  Shape a, b;
};

const std::vector<Case> kCases = {
    {{3}, {3}},          {{3}, {3, 4}},          {{2, 3}, {3}},
    {{2, 3}, {3, 4}},    {{5, 2, 3}, {5, 3, 4}}, {{2, 1, 2, 3}, {3, 3, 2}},
    {{4, 2, 3}, {3, 5}}, {{2, 3}, {4, 3, 5}},    {{3}, {2, 3, 4}},
    {{2, 4, 3}, {3}},    {{1, 2, 3}, {6, 3, 1}}, {{1, 1}, {1, 1}},
    {{2, 0}, {0, 3}},    {{0, 3}, {3, 2}},       {{3, 2}, {2, 0}},
    {{0, 2, 3}, {3, 4}}, {{2, 2, 0}, {2, 0, 3}}, {{0}, {0}},
};

enum class Layout { contiguous, transposed, strided };

// A tensor of `shape` whose last two dims are laid out as asked: row-major, column-major (a
// transpose of a contiguous tensor) or neither (every other column of a wider tensor).
Tensor make_operand(const Shape& shape, Layout layout, std::uint64_t seed, DType dtype) {
  Generator gen(seed);
  if (shape.size() < 2 || layout == Layout::contiguous) {
    return uniform(shape, -1, 1, gen, dtype);
  }
  Shape stored = shape;
  if (layout == Layout::transposed) {
    std::swap(stored[stored.size() - 1], stored[stored.size() - 2]);
    return uniform(stored, -1, 1, gen, dtype).transpose(-1, -2);
  }
  stored.back() *= 2;
  return slice(uniform(stored, -1, 1, gen, dtype), -1, 0, stored.back(), 2);
}

std::string describe(const Case& c, Layout la, Layout lb) {
  return shape_str(c.a) + " @ " + shape_str(c.b) + " layouts " +
         std::to_string(static_cast<int>(la)) + "/" + std::to_string(static_cast<int>(lb));
}

constexpr Layout kLayouts[] = {Layout::contiguous, Layout::transposed, Layout::strided};

Tensor as_leaf(const Tensor& t) { return t.detach().requires_grad_(); }

}  // namespace

TEST_CASE("matmul matches the definition for every shape and layout") {
  for (const DType dtype : {DType::f32, DType::f64}) {
    const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;
    for (const Case& c : kCases) {
      for (const Layout la : kLayouts) {
        for (const Layout lb : kLayouts) {
          const Tensor a = make_operand(c.a, la, 1, dtype);
          const Tensor b = make_operand(c.b, lb, 2, dtype);
          const Tensor out = matmul(a, b);
          CHECK(out.dtype() == dtype);
          check_matches(out, reference_matmul(a, b), tol, describe(c, la, lb));
        }
      }
    }
  }
}

TEST_CASE("matmul handles expanded operands and k = 0") {
  const Tensor row = from_vector({1, 2, 3}, {1, 3}, DType::f64);
  const Tensor rows = expand(row, {4, 3});  // row stride 0: copied before GEMM
  const Tensor b = from_vector({1, 0, 0, 1, 1, 1}, {3, 2}, DType::f64);
  CHECK(matmul(rows, b).to_vector<double>() == std::vector<double>{4, 5, 4, 5, 4, 5, 4, 5});
  const Tensor batched = expand(b, {2, 3, 2});  // batch stride 0
  check_matches(matmul(rows, batched), reference_matmul(rows, batched), 1e-12, "expanded batch");
  // k = 0: an empty sum, zeros of shape [m, n].
  const Tensor out = matmul(zeros({3, 0}), zeros({0, 2}));
  CHECK(out.shape() == Shape{3, 2});
  CHECK(out.to_vector<float>() == std::vector<float>(6, 0.0f));
  CHECK(matmul(zeros({0}), zeros({0})).item() == 0.0);
}

TEST_CASE("cpu::gemm: k = 0, single rows and transposes") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> c = {nan, nan, nan, nan};
  cpu::gemm(false, false, 2, 2, 0, 1.0, nullptr, 0, nullptr, 0, 0.0, c.data(), 2);
  CHECK(c == std::vector<double>{0, 0, 0, 0});  // beta = 0 overwrites, even NaN
  c = {1, 2, 3, 4};
  cpu::gemm(false, false, 2, 2, 0, 1.0, nullptr, 0, nullptr, 0, 2.0, c.data(), 2);
  CHECK(c == std::vector<double>{2, 4, 6, 8});
  // One row of A with a leading dimension OpenBLAS would reject (0): still valid.
  const std::vector<float> a = {1, 2};
  const std::vector<float> b = {1, 2, 3, 4};  // [[1, 2], [3, 4]]
  std::vector<float> out(2);
  cpu::gemm(false, false, 1, 2, 2, 1.0f, a.data(), 0, b.data(), 2, 0.0f, out.data(), 0);
  CHECK(out == std::vector<float>{7, 10});
  cpu::gemm(false, true, 1, 2, 2, 1.0f, a.data(), 2, b.data(), 2, 0.0f, out.data(), 2);
  CHECK(out == std::vector<float>{5, 11});
  cpu::gemm(true, false, 1, 2, 2, 1.0f, a.data(), 1, b.data(), 2, 0.0f, out.data(), 2);
  CHECK(out == std::vector<float>{7, 10});
  CHECK_THROWS_WITH_AS(
      cpu::gemm(false, false, 2, 2, 2, 1.0f, b.data(), 1, b.data(), 2, 0.0f, out.data(), 2),
      doctest::Contains("lda = 1 is less than the 2 columns"), core::ValueError);
}

TEST_CASE("linear matches x @ w^T + b") {
  const std::vector<Shape> x_shapes = {{4, 3}, {2, 5, 3}, {3}, {0, 3}};
  for (const DType dtype : {DType::f32, DType::f64}) {
    const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;
    for (const Shape& xs : x_shapes) {
      for (const Layout lw : {Layout::contiguous, Layout::transposed}) {
        const Tensor x = make_operand(xs, Layout::contiguous, 3, dtype);
        const Tensor w = make_operand({2, 3}, lw, 4, dtype);
        const Tensor b = make_operand({2}, Layout::contiguous, 5, dtype);
        const Reference xw = reference_matmul(x, w.transpose(0, 1));
        check_matches(linear(x, w), xw, tol, "no bias " + shape_str(xs));
        Reference with_bias = xw;
        const auto bv = b.to_vector<double>();
        for (std::size_t i = 0; i < with_bias.values.size(); ++i) with_bias.values[i] += bv[i % 2];
        check_matches(linear(x, w, b), with_bias, tol, "bias " + shape_str(xs));
      }
    }
  }
  // No input features: the output is the bias alone.
  const Tensor out = linear(zeros({2, 0}), zeros({3, 0}), from_vector({1, 2, 3}, {3}));
  CHECK(out.to_vector<float>() == std::vector<float>{1, 2, 3, 1, 2, 3});
  // A non-contiguous input (the transpose of a contiguous one).
  const Tensor xt = make_operand({3, 4}, Layout::contiguous, 6, DType::f64).transpose(0, 1);
  const Tensor w = make_operand({2, 3}, Layout::contiguous, 7, DType::f64);
  check_matches(linear(xt, w), reference_matmul(xt, w.transpose(0, 1)), 1e-12, "transposed x");
}

TEST_CASE("matmul and linear reject mismatched operands") {
  CHECK_THROWS_WITH_AS(matmul(zeros({2, 3}), zeros({4, 5})),
                       doctest::Contains("matmul: shapes [2, 3] and [4, 5] cannot be multiplied"),
                       core::ShapeError);
  CHECK_THROWS_WITH_AS(matmul(zeros({3}), zeros({4})), doctest::Contains("(3 != 4)"),
                       core::ShapeError);
  CHECK_THROWS_WITH_AS(matmul(zeros({2, 2, 3}), zeros({3, 3, 4})),
                       doctest::Contains("batch dims of shapes [2, 2, 3] and [3, 3, 4]"),
                       core::ShapeError);
  CHECK_THROWS_WITH_AS(
      matmul(zeros({2, 3}), zeros({3, 2}, DType::f64)),
      doctest::Contains("dtypes differ: f32 (shape [2, 3]) and f64 (shape [3, 2])"),
      core::DTypeError);
  CHECK_THROWS_WITH_AS(matmul(zeros({2, 3}, DType::i64), zeros({3, 2}, DType::i64)),
                       doctest::Contains("matmul: dtype i64 is not supported"), core::DTypeError);
  CHECK_THROWS_WITH_AS(matmul(scalar_tensor(1), zeros({3})),
                       doctest::Contains("need at least one dim, got shapes [] and [3]"),
                       core::ShapeError);
  CHECK_THROWS_WITH_AS(linear(zeros({2, 3}), zeros({3})),
                       doctest::Contains("linear: weight must be 2-D"), core::ShapeError);
  CHECK_THROWS_WITH_AS(
      linear(zeros({2, 4}), zeros({5, 3})),
      doctest::Contains("input of shape [2, 4] does not match weight of shape [5, 3]"),
      core::ShapeError);
  CHECK_THROWS_WITH_AS(linear(zeros({2, 3}), zeros({5, 3}), zeros({4})),
                       doctest::Contains("bias of shape [4] does not match"), core::ShapeError);
  CHECK_THROWS_WITH_AS(linear(zeros({2, 3}), zeros({5, 3}), zeros({5}, DType::f64)),
                       doctest::Contains("linear: dtypes differ"), core::DTypeError);
}

TEST_CASE("gradcheck: matmul over every shape and layout") {
  for (const Case& c : kCases) {
    for (const Layout la : kLayouts) {
      for (const Layout lb : kLayouts) {
        const Tensor a = as_leaf(make_operand(c.a, la, 11, DType::f64));
        const Tensor b = as_leaf(make_operand(c.b, lb, 12, DType::f64));
        gradcheck("matmul " + describe(c, la, lb),
                  [](const auto& in) { return matmul(in[0], in[1]); }, {a, b});
      }
    }
  }
  // Only one operand requires grad: the other's gradient is skipped.
  const Tensor a = make_input({2, 3, 4}, 13);
  const Tensor b = make_operand({4, 2}, Layout::contiguous, 14, DType::f64);
  gradcheck("matmul, constant right operand", [](const auto& in) { return matmul(in[0], in[1]); },
            {a, b});
  CHECK_FALSE(b.grad().defined());
}

TEST_CASE("gradcheck: linear over inputs, weight and bias") {
  const std::vector<Shape> x_shapes = {{4, 3}, {2, 5, 3}, {3}, {0, 3}, {1, 3}};
  for (const Shape& xs : x_shapes) {
    for (const Layout lw : {Layout::contiguous, Layout::transposed}) {
      const Tensor x = make_input(xs, 21);
      const Tensor w = as_leaf(make_operand({2, 3}, lw, 22, DType::f64));
      const Tensor b = make_input({2}, 23);
      gradcheck("linear " + shape_str(xs),
                [](const auto& in) { return linear(in[0], in[1], in[2]); }, {x, w, b});
      gradcheck("linear no bias " + shape_str(xs),
                [](const auto& in) { return linear(in[0], in[1]); }, {x, w});
    }
  }
  const Tensor xt = make_input({3, 4}, 24).transpose(0, 1).detach().requires_grad_();
  gradcheck("linear, transposed input", [](const auto& in) { return linear(in[0], in[1], in[2]); },
            {xt, make_input({2, 3}, 25), make_input({2}, 26)});
  gradcheck("linear, no input features", [](const auto& in) { return linear(in[0], in[1], in[2]); },
            {make_input({2, 0}, 27), make_input({3, 0}, 28), make_input({3}, 29)});
}
