// Losses (cross_entropy with label smoothing, nll_loss, mse_loss) and indexing (gather,
// index_select): values against hand-computed and by-definition references, edge cases (no
// samples, one class, repeated indices, non-contiguous inputs), every validation error, and
// finite-difference gradients for every differentiable argument.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "gradcheck.h"

using namespace ringlet;
using namespace ringlet::tensor;
using core::DType;
using ringlet::testing::gradcheck;
using ringlet::testing::make_input;

namespace {

// Per-sample cross-entropy by its definition, in double:
// (1 - eps) * (lse - x[t]) + eps / C * sum_j (lse - x[j]).
std::vector<double> reference_cross_entropy(const Tensor& logits, const Tensor& target,
                                            double eps) {
  const auto x = logits.to_vector<double>();
  const auto t = target.to_vector<std::int64_t>();
  const std::size_t n = static_cast<std::size_t>(logits.size(0));
  const std::size_t c = static_cast<std::size_t>(logits.size(1));
  std::vector<double> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    double z = 0;
    for (std::size_t j = 0; j < c; ++j) z += std::exp(x[i * c + j]);
    const double lse = std::log(z);
    double smooth = 0;
    for (std::size_t j = 0; j < c; ++j) smooth += lse - x[i * c + j];
    out[i] = (1 - eps) * (lse - x[i * c + static_cast<std::size_t>(t[i])]) + eps / c * smooth;
  }
  return out;
}

double total(const std::vector<double>& v) {
  double s = 0;
  for (const double x : v) s += x;
  return s;
}

Tensor labels(std::int64_t n, std::int64_t classes, std::uint64_t seed) {
  Generator gen(seed);
  return randint(0, classes, {n}, gen);
}

}  // namespace

TEST_CASE("cross_entropy: hand-computed values") {
  const Tensor logits = from_vector({1, 2, 3}, {1, 3}, DType::f64);
  const Tensor target = from_vector({0}, {1}, DType::i64);
  // log(e + e^2 + e^3) - 1
  CHECK(cross_entropy(logits, target).item() == doctest::Approx(2.4076059644443806));
  // 0.9 * 2.40760596 + 0.1 / 3 * (3 * 3.40760596 - 6)
  CHECK(cross_entropy(logits, target, Reduction::mean, 0.1).item() ==
        doctest::Approx(2.3076059644443806));
  CHECK(cross_entropy(logits, target, Reduction::mean, 1.0).item() ==
        doctest::Approx(3.4076059644443806 - 2.0));
  // Huge logits stay finite (the row max is subtracted before exponentiating).
  const Tensor big = from_vector({1000, 0, -1000, 1000}, {2, 2});
  const auto losses = cross_entropy(big, from_vector({0, 0}, {2}, DType::i64), Reduction::none);
  CHECK(losses.to_vector<float>() == std::vector<float>{0, 2000});
}

TEST_CASE("cross_entropy and nll_loss match their definitions for every reduction") {
  for (const DType dtype : {DType::f32, DType::f64}) {
    const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;
    Generator gen(1);
    const Tensor contiguous_logits = uniform({6, 5}, -3, 3, gen, dtype);
    const Tensor transposed_logits = uniform({5, 6}, -3, 3, gen, dtype).transpose(0, 1);
    const Tensor target = labels(6, 5, 2);
    for (const Tensor& logits : {contiguous_logits, transposed_logits}) {
      for (const double eps : {0.0, 0.25}) {
        INFO("eps " << eps << " contiguous " << logits.is_contiguous());
        const auto want = reference_cross_entropy(logits, target, eps);
        const auto none = cross_entropy(logits, target, Reduction::none, eps);
        CHECK(none.shape() == Shape{6});
        CHECK(none.dtype() == dtype);
        const auto got = none.to_vector<double>();
        for (std::size_t i = 0; i < want.size(); ++i) {
          CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol));
        }
        CHECK(cross_entropy(logits, target, Reduction::sum, eps).item() ==
              doctest::Approx(total(want)).epsilon(tol));
        CHECK(cross_entropy(logits, target, Reduction::mean, eps).item() ==
              doctest::Approx(total(want) / 6).epsilon(tol));
        CHECK(cross_entropy(logits, target, Reduction::mean, eps).shape() == Shape{});
      }
      // Without smoothing, cross_entropy is nll_loss of log_softmax.
      const Tensor log_probs = log_softmax(logits, 1);
      for (const Reduction r : {Reduction::none, Reduction::sum, Reduction::mean}) {
        const auto a = cross_entropy(logits, target, r).to_vector<double>();
        const auto b = nll_loss(log_probs, target, r).to_vector<double>();
        REQUIRE(a.size() == b.size());
        for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]));
      }
    }
  }
  // nll_loss picks -input[i, target[i]].
  const Tensor lp = from_vector({-1, -2, -3, -4}, {2, 2});
  const Tensor t = from_vector({1, 0}, {2}, DType::i64);
  CHECK(nll_loss(lp, t, Reduction::none).to_vector<float>() == std::vector<float>{2, 3});
  CHECK(nll_loss(lp, t, Reduction::sum).item() == 5);
  CHECK(nll_loss(lp, t).item() == 2.5);
}

TEST_CASE("losses with no samples or one class") {
  const Tensor none = zeros({0, 4});
  const Tensor no_labels = zeros({0}, DType::i64);
  CHECK(cross_entropy(none, no_labels, Reduction::none).shape() == Shape{0});
  CHECK(cross_entropy(none, no_labels, Reduction::sum).item() == 0.0);
  CHECK(std::isnan(cross_entropy(none, no_labels).item()));  // 0 / 0, as PyTorch
  CHECK(std::isnan(nll_loss(none, no_labels).item()));
  const Tensor one_class = from_vector({3, -7}, {2, 1});
  CHECK(cross_entropy(one_class, zeros({2}, DType::i64), Reduction::sum, 0.3).item() == 0.0);
  CHECK(std::isnan(mse_loss(zeros({0, 2}), zeros({0, 2})).item()));
  CHECK(mse_loss(zeros({0, 2}), zeros({0, 2}), Reduction::none).shape() == Shape{0, 2});
}

TEST_CASE("mse_loss values") {
  const Tensor x = from_vector({1, 2, 3, 4}, {2, 2}, DType::f64);
  const Tensor y = from_vector({0, 2, 5, 1}, {2, 2}, DType::f64);
  CHECK(mse_loss(x, y, Reduction::none).to_vector<double>() == std::vector<double>{1, 0, 4, 9});
  CHECK(mse_loss(x, y, Reduction::sum).item() == 14);
  CHECK(mse_loss(x, y).item() == 3.5);
  // x^T = [[1, 3], [2, 4]] against [[0, 2], [5, 1]]: differences 1, 1, -3, 3.
  CHECK(mse_loss(x.transpose(0, 1), y, Reduction::sum).item() == 20);
}

TEST_CASE("losses reject bad targets, shapes and options") {
  const Tensor logits = zeros({2, 5});
  CHECK_THROWS_WITH_AS(cross_entropy(logits, zeros({2})),
                       doctest::Contains("target must hold i64 class indices, got dtype f32"),
                       core::DTypeError);
  CHECK_THROWS_WITH_AS(
      cross_entropy(logits, zeros({3}, DType::i64)),
      doctest::Contains("target of shape [3] does not match input of shape [2, 5]"),
      core::ShapeError);
  CHECK_THROWS_WITH_AS(cross_entropy(logits, from_vector({0, 5}, {2}, DType::i64)),
                       doctest::Contains("cross_entropy: target[1] = 5 is out of range for 5 "
                                         "classes"),
                       core::ValueError);
  CHECK_THROWS_WITH_AS(cross_entropy(logits, from_vector({-1, 0}, {2}, DType::i64)),
                       doctest::Contains("target[0] = -1 is out of range"), core::ValueError);
  CHECK_THROWS_WITH_AS(cross_entropy(logits, zeros({2}, DType::i64), Reduction::mean, 1.5),
                       doctest::Contains("label_smoothing must be in [0, 1], got 1.5"),
                       core::ValueError);
  CHECK_THROWS_WITH_AS(cross_entropy(zeros({2, 3, 4}), zeros({2}, DType::i64)),
                       doctest::Contains("input must be [N, C], got shape [2, 3, 4]"),
                       core::ShapeError);
  CHECK_THROWS_WITH_AS(cross_entropy(zeros({2, 5}, DType::i64), zeros({2}, DType::i64)),
                       doctest::Contains("cross_entropy: dtype i64 is not supported"),
                       core::DTypeError);
  CHECK_THROWS_WITH_AS(nll_loss(logits, from_vector({7, 0}, {2}, DType::i64)),
                       doctest::Contains("nll_loss: target[0] = 7 is out of range for 5 classes"),
                       core::ValueError);
  CHECK_THROWS_WITH_AS(nll_loss(logits, zeros({2, 1}, DType::i64)),
                       doctest::Contains("target of shape [2, 1] does not match"),
                       core::ShapeError);
  CHECK_THROWS_WITH_AS(mse_loss(zeros({2, 3}), zeros({3, 2})),
                       doctest::Contains("input of shape [2, 3] and target of shape [3, 2] differ"),
                       core::ShapeError);
  CHECK_THROWS_WITH_AS(mse_loss(zeros({2}), zeros({2}, DType::f64)),
                       doctest::Contains("input dtype f32 and target dtype f64 differ"),
                       core::DTypeError);
}

TEST_CASE("gradcheck: cross_entropy and nll_loss") {
  const Tensor target = labels(4, 5, 3);
  const std::vector<Tensor> inputs = {
      make_input({4, 5}, 1, -2, 2),
      make_input({5, 4}, 2, -2, 2).transpose(0, 1).detach().requires_grad_(),
  };
  for (const Tensor& x : inputs) {
    for (const Reduction r : {Reduction::none, Reduction::sum, Reduction::mean}) {
      for (const double eps : {0.0, 0.2}) {
        const std::string what = "reduction " + std::to_string(static_cast<int>(r)) + " eps " +
                                 std::to_string(eps) + (x.is_contiguous() ? "" : " transposed");
        gradcheck("cross_entropy " + what,
                  [&](const auto& in) { return cross_entropy(in[0], target, r, eps); }, {x});
      }
      gradcheck("nll_loss", [&](const auto& in) { return nll_loss(in[0], target, r); }, {x});
    }
  }
  gradcheck("cross_entropy one sample",
            [](const auto& in) {
              return cross_entropy(in[0], from_vector({2}, {1}, DType::i64), Reduction::mean, 0.1);
            },
            {make_input({1, 3}, 4)});
  gradcheck("cross_entropy one class",
            [](const auto& in) { return cross_entropy(in[0], zeros({3}, DType::i64)); },
            {make_input({3, 1}, 5)});
  gradcheck(
      "cross_entropy no samples",
      [](const auto& in) { return cross_entropy(in[0], zeros({0}, DType::i64), Reduction::sum); },
      {make_input({0, 3}, 6)});
  gradcheck("nll_loss of log_softmax",
            [&](const auto& in) { return nll_loss(log_softmax(in[0], 1), target); },
            {make_input({4, 5}, 7)});
}

TEST_CASE("gradcheck: mse_loss in both arguments") {
  const std::vector<std::pair<Tensor, Tensor>> pairs = {
      {make_input({3, 4}, 1), make_input({3, 4}, 2)},
      {make_input({4, 3}, 3).transpose(0, 1).detach().requires_grad_(), make_input({3, 4}, 4)},
      {make_input({1}, 5), make_input({1}, 6)},
      {make_input({0, 2}, 7), make_input({0, 2}, 8)},
  };
  for (const auto& [x, y] : pairs) {
    for (const Reduction r : {Reduction::none, Reduction::sum, Reduction::mean}) {
      if (x.numel() == 0 && r == Reduction::mean) continue;  // NaN: nothing to compare
      gradcheck("mse_loss " + shape_str(x.shape()) + " " + std::to_string(static_cast<int>(r)),
                [r](const auto& in) { return mse_loss(in[0], in[1], r); }, {x, y});
    }
  }
  // A constant target gets no gradient.
  const Tensor x = make_input({2, 2}, 9);
  const Tensor y = zeros({2, 2}, DType::f64);
  gradcheck("mse_loss constant target", [](const auto& in) { return mse_loss(in[0], in[1]); },
            {x, y});
  CHECK_FALSE(y.grad().defined());
}

TEST_CASE("gather picks along a dim") {
  const Tensor x = from_vector({1, 2, 3, 4}, {2, 2});
  const Tensor index = from_vector({0, 0, 1, 0}, {2, 2}, DType::i64);
  CHECK(gather(x, 1, index).to_vector<float>() == std::vector<float>{1, 1, 4, 3});
  CHECK(gather(x, -1, index).to_vector<float>() == std::vector<float>{1, 1, 4, 3});
  const Tensor y = from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(gather(y, 0, from_vector({1, 0, 1}, {1, 3}, DType::i64)).to_vector<float>() ==
        std::vector<float>{4, 2, 6});
  // The index may be smaller than the input in the other dims.
  const Tensor small = gather(y, 1, from_vector({2}, {1, 1}, DType::i64));
  CHECK(small.shape() == Shape{1, 1});
  CHECK(small.item() == 3);
  // Non-contiguous input: y^T is [[1, 4], [2, 5], [3, 6]].
  CHECK(
      gather(y.transpose(0, 1), 1, from_vector({1, 0, 1}, {3, 1}, DType::i64)).to_vector<float>() ==
      std::vector<float>{4, 2, 6});
  const Tensor ints = from_vector({10, 20, 30}, {3}, DType::i64);
  CHECK(gather(ints, 0, from_vector({2, 2, 0}, {3}, DType::i64)).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{30, 30, 10});
  CHECK(gather(y, 1, zeros({2, 0}, DType::i64)).shape() == Shape{2, 0});
  CHECK(gather(scalar_tensor(7), 0, zeros({}, DType::i64)).item() == 7);
}

TEST_CASE("index_select takes whole slices") {
  const Tensor x = arange(0, 12, 1, DType::f32).reshape({3, 4});
  CHECK(index_select(x, 0, from_vector({2, 0, 2}, {3}, DType::i64)).to_vector<float>() ==
        std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11});
  CHECK(index_select(x, -1, from_vector({3, 1}, {2}, DType::i64)).to_vector<float>() ==
        std::vector<float>{3, 1, 7, 5, 11, 9});
  CHECK(index_select(x.transpose(0, 1), 0, from_vector({1}, {1}, DType::i64)).to_vector<float>() ==
        std::vector<float>{1, 5, 9});
  CHECK(index_select(x, 1, zeros({0}, DType::i64)).shape() == Shape{3, 0});
  CHECK(index_select(x, 0, from_vector({1}, {}, DType::i64)).shape() == Shape{1, 4});
  const Tensor bytes = from_vector({5, 6, 7}, {3}, DType::u8);
  CHECK(index_select(bytes, 0, from_vector({2, 1}, {2}, DType::i64)).to_vector<int>() ==
        std::vector<int>{7, 6});
}

TEST_CASE("indexing rejects bad indices") {
  const Tensor x = zeros({3, 2});
  CHECK_THROWS_WITH_AS(gather(x, 1, from_vector({0, 1, 5}, {3, 1}, DType::i64)),
                       doctest::Contains("gather: index 5 at position [2, 0] is out of range for "
                                         "dim 1 of size 2"),
                       core::ValueError);
  CHECK_THROWS_WITH_AS(gather(x, 0, from_vector({-1}, {1, 1}, DType::i64)),
                       doctest::Contains("index -1 at position [0, 0]"), core::ValueError);
  CHECK_THROWS_WITH_AS(gather(x, 0, zeros({1, 1}, DType::i32)),
                       doctest::Contains("gather: index must be i64, got dtype i32"),
                       core::DTypeError);
  CHECK_THROWS_WITH_AS(gather(x, 0, zeros({3}, DType::i64)),
                       doctest::Contains("index of shape [3] must have the rank of the input of "
                                         "shape [3, 2]"),
                       core::ShapeError);
  CHECK_THROWS_WITH_AS(gather(x, 0, zeros({1, 3}, DType::i64)),
                       doctest::Contains("is larger than the input of shape [3, 2] in dim 1"),
                       core::ShapeError);
  CHECK_THROWS_WITH_AS(gather(x, 2, zeros({1, 1}, DType::i64)),
                       doctest::Contains("gather: dim 2 is out of range"), core::ValueError);
  CHECK_THROWS_WITH_AS(index_select(x, 0, from_vector({0, 7}, {2}, DType::i64)),
                       doctest::Contains("index_select: index[1] = 7 is out of range for dim 0 "
                                         "of size 3"),
                       core::ValueError);
  CHECK_THROWS_WITH_AS(index_select(x, 1, zeros({2, 1}, DType::i64)),
                       doctest::Contains("index must be 1-D, got shape [2, 1]"), core::ShapeError);
  CHECK_THROWS_WITH_AS(index_select(x, 0, zeros({1})),
                       doctest::Contains("index_select: index must be i64, got dtype f32"),
                       core::DTypeError);
}

TEST_CASE("gradcheck: gather and index_select accumulate over repeated indices") {
  const Tensor idx2 = from_vector({0, 2, 2, 1, 0, 0}, {2, 3}, DType::i64);
  const std::vector<Tensor> inputs = {
      make_input({3, 3}, 1),
      make_input({3, 3}, 2).transpose(0, 1).detach().requires_grad_(),
  };
  for (const Tensor& x : inputs) {
    gradcheck("gather dim 0", [&](const auto& in) { return gather(in[0], 0, idx2); }, {x});
    gradcheck("gather dim 1", [&](const auto& in) { return gather(in[0], -1, idx2); }, {x});
    const Tensor picks = from_vector({2, 0, 2, 2}, {4}, DType::i64);
    gradcheck("index_select dim 0", [&](const auto& in) { return index_select(in[0], 0, picks); },
              {x});
    gradcheck("index_select dim 1", [&](const auto& in) { return index_select(in[0], 1, picks); },
              {x});
  }
  Generator gen(3);
  const Tensor idx3 = randint(0, 4, {2, 5, 3}, gen);
  gradcheck("gather 3-d dim 1", [&](const auto& in) { return gather(in[0], 1, idx3); },
            {make_input({2, 4, 3}, 4)});
  gradcheck("index_select empty",
            [](const auto& in) { return index_select(in[0], 0, zeros({0}, DType::i64)); },
            {make_input({3, 2}, 5)});
  // Every gathered element feeds the same input once per use: the gradient counts the uses.
  Tensor x = make_input({3}, 6);
  sum(gather(x, 0, from_vector({1, 1, 1, 2}, {4}, DType::i64))).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 3, 1});
}

TEST_CASE("flip reverses one dim, on views and empty dims; its gradient flips back") {
  const Tensor x = arange(0, 12, 1, DType::f32).reshape({2, 2, 3});
  CHECK(flip(x, -1).to_vector<float>() == std::vector<float>{2, 1, 0, 5, 4, 3, 8, 7, 6, 11, 10, 9});
  CHECK(flip(x, 0).to_vector<float>() == std::vector<float>{6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5});
  CHECK(flip(flip(x, 2), 2).to_vector<float>() == x.to_vector<float>());
  CHECK(flip(x.transpose(1, 2), 1).to_vector<float>() ==
        std::vector<float>{2, 5, 1, 4, 0, 3, 8, 11, 7, 10, 6, 9});
  CHECK(flip(zeros({2, 0}), 1).shape() == Shape{2, 0});
  CHECK_THROWS_WITH_AS(flip(x, 3), doctest::Contains("flip: dim 3 is out of range"),
                       core::ValueError);
  CHECK_THROWS_AS(flip(from_vector({1}, {}, DType::f32), 0), core::ShapeError);
  gradcheck("flip dim 1", [](const auto& in) { return flip(in[0], 1); }, {make_input({3, 4}, 7)});
  // A weighted sum: each input element's gradient is the weight its mirror position carries.
  Tensor v = make_input({3}, 8);
  sum(mul(flip(v, 0), from_vector({1, 10, 100}, {3}, DType::f64))).backward();
  CHECK(v.grad().to_vector<double>() == std::vector<double>{100, 10, 1});
}
