// A seed means what it means in PyTorch: replays tests/golden/rng.json (make_rng_golden.py),
// which holds what torch's CPU generator gave after torch.manual_seed(s).
// - rand / uniform_ / randint / randperm exactly, f32 and f64; normal_ below 16 elements (scalar
//   Box-Muller) and above (the 16-wide fill with its redrawn tail) to 2e-6 relative, because
//   PyTorch's AVX2 fill takes log/sin/cos from vectorized approximations.
// - fmnist_cnn built with Generator(0) has train_fmnist.py's weights after torch.manual_seed(0).
// - DistributedSampler(60000, 2 replicas, seed 0) gives torch's indices for epochs 0 and 1.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "data/distributed_sampler.h"
#include "data/sampler.h"
#include "golden_data.h"
#include "nn/models.h"
#include "tensor/ops.h"

using namespace ringlet;
using namespace ringlet::testing;
using tensor::Tensor;

namespace {

const nlohmann::json& golden() {
  static const nlohmann::json j = load_golden("rng.json");
  return j;
}

// make_rng_golden.py's checksum: sum of (i + 1) * v mod 2^61 - 1 (no overflow for indices
// below 2^31).
std::uint64_t checksum(const std::vector<std::int64_t>& values) {
  constexpr std::uint64_t kMod = (std::uint64_t{1} << 61) - 1;
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    sum = (sum + (i + 1) * static_cast<std::uint64_t>(values[i])) % kMod;
  }
  return sum;
}

Tensor draw(const nlohmann::json& c) {
  const std::string kind = c.at("kind");
  tensor::Generator gen(c.at("seed").get<std::uint64_t>());
  const std::int64_t n = c.at("n");
  const core::DType dtype = golden_dtype(c.at("dtype").get<std::string>());
  if (kind == "rand") return tensor::rand({n}, gen, dtype);
  if (kind == "uniform") return tensor::uniform({n}, c.at("low"), c.at("high"), gen, dtype);
  if (kind == "normal") return tensor::normal({n}, c.at("mean"), c.at("std"), gen, dtype);
  if (kind == "randint") return tensor::randint(c.at("low"), c.at("high"), {n}, gen);
  if (kind == "randperm") {
    const auto perm = data::random_permutation(n, c.at("seed"));
    return tensor::from_data(perm.data(), {n});
  }
  throw std::runtime_error("rng.json: unknown kind " + kind);
}

}  // namespace

TEST_CASE("the golden file covers every kind of draw") {
  std::set<std::string> kinds;
  for (const auto& c : golden().at("draws")) kinds.insert(c.at("kind").get<std::string>());
  CHECK(kinds == std::set<std::string>{"rand", "uniform", "normal", "randint", "randperm"});
}

TEST_CASE("Generator(s) draws what torch.manual_seed(s) draws") {
  for (const auto& c : golden().at("draws")) {
    const std::string kind = c.at("kind");
    CAPTURE(c.dump());
    const Tensor got = draw(c).to(core::DType::f64);
    const auto expected = c.at("out").at("values").get<std::vector<double>>();
    REQUIRE(got.numel() == static_cast<std::int64_t>(expected.size()));
    const double* g = got.data<double>();
    const bool f32 = c.at("dtype") == "f32";  // f32 values are stored as shortest decimals
    for (std::size_t i = 0; i < expected.size(); ++i) {
      CAPTURE(i);
      if (kind == "normal") {
        CHECK(std::abs(g[i] - expected[i]) <= 2e-6 * std::max(1.0, std::abs(expected[i])));
      } else if (f32) {
        CHECK(static_cast<float>(g[i]) == static_cast<float>(expected[i]));  // bit for bit
      } else {
        CHECK(g[i] == expected[i]);
      }
    }
  }
}

TEST_CASE("random_permutation(60000, seed) is torch.randperm's") {
  const auto& j = golden().at("randperm_60000");
  const auto perm = data::random_permutation(60000, j.at("seed"));
  const auto head = j.at("head").get<std::vector<std::int64_t>>();
  const auto tail = j.at("tail").get<std::vector<std::int64_t>>();
  CHECK(std::vector<std::int64_t>(perm.begin(), perm.begin() + 16) == head);
  CHECK(std::vector<std::int64_t>(perm.end() - 4, perm.end()) == tail);
  CHECK(checksum(perm) == j.at("checksum").get<std::uint64_t>());
}

TEST_CASE("fmnist_cnn from Generator(0) has PyTorch's initial weights for seed 0") {
  tensor::Generator gen(0);
  const auto model = nn::fmnist_cnn(gen);
  const auto params = model->named_parameters();
  const auto& expected = golden().at("fmnist_cnn");
  REQUIRE(params.size() == expected.size());
  for (std::size_t k = 0; k < params.size(); ++k) {
    const auto& e = expected[k];
    const auto& name = params[k].first;
    const auto& p = params[k].second;
    CAPTURE(name);
    CHECK(name == e.at("name").get<std::string>());
    CHECK(p.shape() == e.at("shape").get<tensor::Shape>());
    const Tensor flat = p.contiguous().reshape({-1});
    const float* v = flat.data<float>();
    const auto head = e.at("head").get<std::vector<double>>();
    for (std::size_t i = 0; i < head.size(); ++i) CHECK(v[i] == static_cast<float>(head[i]));
    CHECK(v[flat.numel() - 1] == static_cast<float>(e.at("last").get<double>()));
    double sum = 0.0;
    for (std::int64_t i = 0; i < flat.numel(); ++i) sum += v[i];
    CHECK(sum == doctest::Approx(e.at("sum").get<double>()).epsilon(1e-9));
  }
}

TEST_CASE("DistributedSampler(seed 0) gives torch's indices for epochs 0 and 1") {
  for (const auto& e : golden().at("distributed_sampler")) {
    CAPTURE(e.dump());
    data::DistributedSampler sampler(60000, 2, e.at("rank"), true, 0);
    sampler.set_epoch(e.at("epoch"));
    const auto indices = sampler.indices();
    CHECK(static_cast<std::int64_t>(indices.size()) == e.at("length").get<std::int64_t>());
    const auto head = e.at("head").get<std::vector<std::int64_t>>();
    CHECK(std::vector<std::int64_t>(indices.begin(), indices.begin() + 8) == head);
    CHECK(checksum(indices) == e.at("checksum").get<std::uint64_t>());
  }
}
