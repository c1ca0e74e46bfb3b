// Storage, creation, dtypes and printing.
#include <doctest/doctest.h>

#include "device/cuda/device_runtime.h"
#include "tensor/ops.h"

using namespace ringlet;
using namespace ringlet::tensor;
using core::DType;

TEST_CASE("creation fills and reports metadata") {
  const Tensor z = zeros({2, 3});
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.strides() == Shape{3, 1});
  CHECK(z.numel() == 6);
  CHECK(z.dtype() == DType::f32);
  CHECK(z.device() == Device::cpu());
  CHECK(z.to_vector<double>() == std::vector<double>(6, 0.0));
  CHECK(ones({4}, DType::i64).to_vector<std::int64_t>() == std::vector<std::int64_t>(4, 1));
  CHECK(full({2}, 2.5, DType::f64).to_vector<double>() == std::vector<double>{2.5, 2.5});
  CHECK(arange(5).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  CHECK(arange(1.0, 2.0, 0.25, DType::f64).to_vector<double>() ==
        std::vector<double>{1.0, 1.25, 1.5, 1.75});
  CHECK(scalar_tensor(3.0).dim() == 0);
  CHECK(scalar_tensor(3.0).item() == 3.0);
  const float raw[] = {1.f, 2.f, 3.f, 4.f};
  CHECK(from_data(raw, {2, 2}).to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  CHECK(empty({0, 5}).numel() == 0);
}

TEST_CASE("views share storage") {
  Tensor a = arange(0.0, 6.0, 1.0);
  Tensor v = a.view({2, 3});
  CHECK(v.storage() == a.storage());
  fill_(v, 7.0);
  CHECK(a.to_vector<float>() == std::vector<float>(6, 7.0f));
}

TEST_CASE("random tensors are reproducible from an explicit generator") {
  Generator g1(42), g2(42), g3(43);
  const auto a = randn({100}, g1).to_vector<float>();
  CHECK(a == randn({100}, g2).to_vector<float>());
  CHECK(a != randn({100}, g3).to_vector<float>());
  Generator g(5);
  const auto u = rand({10000}, g, DType::f64).to_vector<double>();
  double mean = 0;
  for (double x : u) {
    REQUIRE(x >= 0.0);
    REQUIRE(x < 1.0);
    mean += x / u.size();
  }
  CHECK(mean == doctest::Approx(0.5).epsilon(0.02));
  const auto n = randn({20000}, g, DType::f64).to_vector<double>();
  double m = 0, s = 0;
  for (double x : n) m += x / n.size();
  for (double x : n) s += (x - m) * (x - m) / n.size();
  CHECK(m == doctest::Approx(0.0).epsilon(0.03));
  CHECK(s == doctest::Approx(1.0).epsilon(0.03));
  const auto r = randint(3, 7, {1000}, g).to_vector<std::int64_t>();
  for (auto x : r) {
    REQUIRE(x >= 3);
    REQUIRE(x < 7);
  }
  Generator saved(9);
  saved.normal();
  const std::string state = saved.state();
  const double next = saved.normal();
  Generator restored(0);
  restored.set_state(state);
  CHECK(restored.normal() == next);
}

TEST_CASE("dtype conversions, f16 and bf16 as storage") {
  const Tensor x = from_vector({1.5, -2.25, 3.0, 65504.0}, {4}, DType::f32);
  const Tensor h = x.to(DType::f16);
  CHECK(h.dtype() == DType::f16);
  CHECK(h.nbytes() == 8);
  CHECK(h.to(DType::f32).to_vector<float>() == x.to_vector<float>());
  const Tensor b = from_vector({1.0, 3.140625}, {2}).to(DType::bf16);
  CHECK(b.to(DType::f64).to_vector<double>() == std::vector<double>{1.0, 3.140625});
  CHECK(from_vector({2.7, -1.2}, {2}).to(DType::i64).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{2, -1});
  CHECK_THROWS_WITH_AS(exp(h), doctest::Contains("exp: dtype f16 is not supported"),
                       core::DTypeError);
}

TEST_CASE("printing shows values, shape and dtype, and truncates") {
  const Tensor t = from_vector({1, 2, 3, 4}, {2, 2});
  const std::string s = t.str();
  CHECK(s.find("[[1, 2],") != std::string::npos);
  CHECK(s.find("shape=[2, 2]") != std::string::npos);
  CHECK(s.find("dtype=f32") != std::string::npos);
  const std::string big = arange(5000).str();
  CHECK(big.find("[0, 1, 2, ..., 4997, 4998, 4999]") != std::string::npos);
  CHECK(big.size() < 200);
  CHECK(Tensor().str() == "tensor(undefined)");
}

TEST_CASE("creation errors name what is wrong") {
  CHECK_THROWS_WITH_AS(from_vector({1, 2, 3}, {2, 2}),
                       doctest::Contains("3 values for shape [2, 2]"), core::ShapeError);
  CHECK_THROWS_WITH_AS(empty({2, -1}), doctest::Contains("negative size"), core::ShapeError);
  Generator g(1);
  CHECK_THROWS_WITH_AS(randint(5, 5, {1}, g), doctest::Contains("empty range"), core::ValueError);
  CHECK_THROWS_WITH_AS(zeros({2}).data<double>(), doctest::Contains("dtype f32"), core::DTypeError);
  CHECK_THROWS_WITH_AS(zeros({2, 2}).item(), doctest::Contains("one-element"), core::ShapeError);
}

TEST_CASE("CUDA placement fails clearly when unavailable") {
  if (device::cuda::built_with_cuda() && device::cuda::device_count() > 0)
    return;  // covered by test_cuda
  CHECK_THROWS_AS(zeros({2}).to(Device::cuda(0)), core::Error);
}
