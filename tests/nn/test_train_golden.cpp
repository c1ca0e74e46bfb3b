// Replays tests/golden/train_steps.json, written by PyTorch 1.13
// (tests/golden/make_train_golden.py): train_fmnist.py's CNN, from the same hashed initial
// weights (loaded through load_state_dict under PyTorch's names) and on the same 10 hashed
// batches of 16, takes 10 SGD steps and, separately, 10 Adam steps in train mode; every step's
// loss and checksums of the final state dict must equal PyTorch's within stated tolerances.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "golden_data.h"
#include "nn/adam.h"
#include "nn/loss.h"
#include "nn/models.h"
#include "nn/sgd.h"
#include "tensor/ops.h"

using namespace ringlet;
using namespace ringlet::tensor;
using json = nlohmann::json;

namespace {

const std::set<std::string> kExpectedRuns = {"sgd", "adam"};

const json& golden() {
  static const json data = ringlet::testing::load_golden("train_steps.json");
  return data;
}

std::vector<float> hash_uniform(std::int64_t n, std::uint64_t seed, double low, double high) {
  return ringlet::testing::hash_uniform_values(n, seed, low, high);
}

Tensor to_tensor(const std::vector<float>& values, const Shape& shape) {
  return from_vector(std::vector<double>(values.begin(), values.end()), shape);
}

// fmnist_cnn with PyTorch's initial state, filled as the golden file's "keys" say.
std::shared_ptr<nn::Module> initial_model() {
  Generator gen(0);  // its default init is replaced by the golden state dict
  auto model = nn::fmnist_cnn(gen);
  nn::StateDict dict;
  for (const auto& k : golden().at("keys")) {
    const std::string name = k.at("name");
    const Shape shape = k.at("shape").get<Shape>();
    const json& fill = k.at("fill");
    if (fill.contains("constant")) {
      REQUIRE(k.at("dtype") == "i64");
      dict.insert(name, full(shape, fill.at("constant").get<double>(), DType::i64));
    } else {
      dict.insert(name, to_tensor(hash_uniform(shape_numel(shape), fill.at("seed"), fill.at("low"),
                                               fill.at("high")),
                                  shape));
    }
  }
  model->load_state_dict(dict, true);  // strict: PyTorch's key names and shapes
  return model;
}

struct Batch {
  Tensor images;  // [16, 1, 28, 28] f32
  Tensor labels;  // [16] i64
};

// Images are float32(noise + template[label]), the float sum rounded as numpy's float32 add.
std::vector<Batch> batches() {
  const json& d = golden().at("data");
  const std::int64_t steps = d.at("steps"), batch = d.at("batch"), pixels = 28 * 28;
  const double noise = d.at("noise");
  const std::uint64_t noise_seed = d.at("noise_seed"), template_seed = d.at("template_seed");
  std::vector<std::vector<float>> templates;
  for (std::uint64_t c = 0; c < 10; ++c)
    templates.push_back(hash_uniform(pixels, template_seed + c, -1.0, 1.0));
  const auto labels = d.at("labels").get<std::vector<std::vector<std::int64_t>>>();
  REQUIRE(static_cast<std::int64_t>(labels.size()) == steps);
  std::vector<Batch> out;
  for (std::int64_t b = 0; b < steps; ++b) {
    REQUIRE(static_cast<std::int64_t>(labels[b].size()) == batch);
    std::vector<float> x = hash_uniform(batch * pixels, noise_seed + b, -noise, noise);
    std::vector<double> y;
    for (std::int64_t i = 0; i < batch; ++i) {
      const std::int64_t label = labels[b][i];
      REQUIRE((label >= 0 && label < 10));
      for (std::int64_t p = 0; p < pixels; ++p) x[i * pixels + p] += templates[label][p];
      y.push_back(static_cast<double>(label));
    }
    out.push_back({to_tensor(x, {batch, 1, 28, 28}), from_vector(y, {batch}, DType::i64)});
  }
  return out;
}

std::unique_ptr<nn::Optimizer> make_optimizer(const json& o, std::vector<Tensor> params) {
  if (o.at("optimizer") == "sgd") {
    return std::make_unique<nn::SGD>(
        std::move(params),
        nn::SGDOptions{
            .lr = o.at("lr"), .momentum = o.at("momentum"), .weight_decay = o.at("weight_decay")});
  }
  if (o.at("optimizer") == "adam") {
    return std::make_unique<nn::Adam>(std::move(params), nn::AdamOptions{.lr = o.at("lr")});
  }
  throw std::runtime_error("train_steps.json: unknown optimizer " + o.at("optimizer").dump());
}

// Tolerances. Ringlet and PyTorch sum in different orders (convolution and GEMM blocking,
// BatchNorm's and the loss's reductions, and ringlet's split over RINGLET_NUM_THREADS), so
// each f32 result differs in its last bits; training feeds those differences back, and SGD's
// loss spikes (lr 0.05 with momentum on batches of 16, as PyTorch also shows) amplify them.
// Measured with RINGLET_NUM_THREADS from 1 to 16, the largest loss deviation over the 10 steps
// was 4.8e-6 for SGD (10 ulps of a loss near 4) and 1.2e-6 for Adam, and the largest
// checksum deviation 5.4e-7 of the tensor's sum of |v| (its L2 norm for the norm). The
// tolerances are about 4x those: an error in an update rule, a BatchNorm statistic or a
// gradient moves them by orders of magnitude more.
double loss_tolerance(const std::string& run) { return run == "sgd" ? 2e-5 : 5e-6; }
constexpr double kChecksumTolerance = 2e-6;

// The biases of the convolutions before a BatchNorm cancel in its normalization, so their
// exact gradient is 0 and what backward computes is rounding noise (~1e-7, against ~1e-1
// for the conv weights) that differs between the libraries. SGD scales that noise by lr and
// the biases barely move; Adam divides the gradient by its own RMS, so each of them steps by
// up to about lr per step in a direction set by the noise (PyTorch's drift after 10 steps is
// at most 5.5e-3 = 5.5 lr). The loss does not see them, but the running means of the
// BatchNorms that follow do, shifted by the same amounts. Under Adam these four tensors are only
// held to what the noise allows: every element within 2 * steps * lr of PyTorch's (each run at most
// steps * lr from the common start), i.e. the sums within numel times that, the L2 norm
// within sqrt(numel) times that.
const std::set<std::string> kNoiseDriven = {"0.bias", "4.bias", "1.running_mean", "5.running_mean"};

struct Checksums {
  double sum = 0, abs_sum = 0, l2 = 0;
};

Checksums checksums(const Tensor& t) {
  Checksums c;
  for (double v : t.to_vector<double>()) {
    c.sum += v;
    c.abs_sum += std::abs(v);
    c.l2 += v * v;
  }
  c.l2 = std::sqrt(c.l2);
  return c;
}

void replay(const std::string& name) {
  const json& run = golden().at("runs").at(name);
  const json& options = run.at("options");
  auto model = initial_model();
  model->train();  // BatchNorm uses batch statistics and updates its running statistics
  auto opt = make_optimizer(options, model->parameters());
  const nn::CrossEntropyLoss loss_fn;
  const auto expected = run.at("losses").get<std::vector<double>>();
  const auto data = batches();
  REQUIRE(expected.size() == data.size());
  double worst = 0;
  for (std::size_t step = 0; step < data.size(); ++step) {
    opt->zero_grad();
    const Tensor loss = loss_fn(model->forward(data[step].images), data[step].labels);
    loss.backward();
    opt->step();
    const double got = loss.item();
    worst = std::max(worst, std::abs(got - expected[step]));
    CHECK_MESSAGE(std::abs(got - expected[step]) <= loss_tolerance(name),
                  name << " step " << step << ": loss " << got << ", PyTorch " << expected[step]);
  }
  MESSAGE(name << ": largest loss deviation from PyTorch " << worst);

  const nn::StateDict state = model->state_dict();
  const auto& final = run.at("final");
  REQUIRE(final.size() == state.size());
  const double steps = static_cast<double>(data.size());
  for (const auto& f : final) {
    const std::string key = f.at("name");
    CAPTURE(key);
    const Tensor& t = state.at(key);
    if (f.contains("value")) {  // num_batches_tracked: exact
      CHECK(t.item() == f.at("value").get<double>());
      continue;
    }
    const Checksums got = checksums(t);
    const double sum = f.at("sum"), abs_sum = f.at("abs_sum"), l2 = f.at("l2");
    double sum_tol = kChecksumTolerance * abs_sum, l2_tol = kChecksumTolerance * l2;
    if (options.at("optimizer") == "adam" && kNoiseDriven.count(key)) {
      const double per_element = 2 * steps * options.at("lr").get<double>();
      sum_tol = static_cast<double>(t.numel()) * per_element;
      l2_tol = std::sqrt(static_cast<double>(t.numel())) * per_element;
    }
    CHECK_MESSAGE(std::abs(got.sum - sum) <= sum_tol, "sum " << got.sum << ", PyTorch " << sum);
    CHECK_MESSAGE(std::abs(got.abs_sum - abs_sum) <= sum_tol,
                  "sum of |v| " << got.abs_sum << ", PyTorch " << abs_sum);
    CHECK_MESSAGE(std::abs(got.l2 - l2) <= l2_tol, "L2 " << got.l2 << ", PyTorch " << l2);
  }
}

}  // namespace

TEST_CASE("train golden: the file holds exactly the runs this test knows") {
  std::set<std::string> in_file;
  for (const auto& [name, run] : golden().at("runs").items()) in_file.insert(name);
  for (const auto& name : kExpectedRuns) CHECK_MESSAGE(in_file.count(name), "missing run " << name);
  for (const auto& name : in_file) CHECK_MESSAGE(kExpectedRuns.count(name), "unknown run " << name);
}

TEST_CASE("train golden: 10 SGD steps give PyTorch's losses") { replay("sgd"); }
TEST_CASE("train golden: 10 Adam steps give PyTorch's losses") { replay("adam"); }
