// Replays tests/golden/train_steps.json, written by PyTorch 1.13
// (tests/golden/make_train_golden.py): train_fmnist.py's CNN, from the same hashed initial
// weights (loaded through load_state_dict under PyTorch's names) and on the same 10 hashed
// batches of 16, takes 10 SGD steps and, separately, 10 Adam steps in train mode; every step's
// loss and checksums of the final state dict must equal PyTorch's within stated tolerances.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

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
  static const json data = [] {
    const std::string path = std::string(RINGLET_SOURCE_ROOT) + "/tests/golden/train_steps.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path);
    return json::parse(in);
  }();
  return data;
}

// splitmix64 fill, bit for bit as hash_uniform() in make_nn_golden.py: float32 values.
std::vector<float> hash_uniform(std::int64_t n, std::uint64_t seed, double low, double high) {
  std::vector<float> values(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint64_t z = seed + static_cast<std::uint64_t>(i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const double u = static_cast<double>(z >> 11) * 0x1.0p-53;
    values[static_cast<std::size_t>(i)] = static_cast<float>(low + (high - low) * u);
  }
  return values;
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
      dict.insert(name, to_tensor(hash_uniform(shape_numel(shape), fill.at("seed"),
                                               fill.at("low"), fill.at("high")),
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
        std::move(params), nn::SGDOptions{.lr = o.at("lr"),
                                          .momentum = o.at("momentum"),
                                          .weight_decay = o.at("weight_decay")});
  }
  if (o.at("optimizer") == "adam") {
    return std::make_unique<nn::Adam>(std::move(params), nn::AdamOptions{.lr = o.at("lr")});
  }
  throw std::runtime_error("train_steps.json: unknown optimizer " + o.at("optimizer").dump());
}

void replay(const std::string& name) {
  const json& run = golden().at("runs").at(name);
  auto model = initial_model();
  model->train();
  auto opt = make_optimizer(run.at("options"), model->parameters());
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
    MESSAGE(name << " step " << step << ": loss " << got << " torch " << expected[step]
                 << " diff " << got - expected[step]);
  }
  MESSAGE(name << ": max loss deviation " << worst);
  const nn::StateDict state = model->state_dict();
  for (const auto& f : run.at("final")) {
    const std::string key = f.at("name");
    double sum = 0, abs_sum = 0, sq = 0;
    for (double v : state.at(key).to_vector<double>()) {
      sum += v;
      abs_sum += std::abs(v);
      sq += v * v;
    }
    const double scale = f.at("abs_sum");
    MESSAGE(name << " " << key << ": sum dev " << std::abs(sum - f.at("sum").get<double>()) / scale
                 << " abs dev " << std::abs(abs_sum - scale) / scale << " l2 dev "
                 << std::abs(std::sqrt(sq) - f.at("l2").get<double>()) / f.at("l2").get<double>());
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
