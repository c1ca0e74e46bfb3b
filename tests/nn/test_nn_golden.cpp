// Replays tests/golden/nn.json, written by PyTorch 1.13 (tests/golden/make_nn_golden.py):
// every nn layer's output and gradients (input and parameters) and BatchNorm's running
// statistics; train_fmnist.py's CNN forward and backward on a batch of 4 with weights loaded
// through load_state_dict under PyTorch's key names; the models' parameter counts and keys.
// The C++ side lists every case it expects; a missing or unknown case fails.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "golden_data.h"
#include "nn/activation.h"
#include "nn/batch_norm.h"
#include "nn/conv2d.h"
#include "nn/dropout.h"
#include "nn/flatten.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/models.h"
#include "nn/pooling.h"
#include "nn/residual.h"
#include "tensor/ops.h"

using namespace ringlet;
using namespace ringlet::tensor;
using json = nlohmann::json;

namespace {

const std::vector<std::string> kExpectedCases = {"linear",
                                                 "linear_nobias_batched",
                                                 "conv2d_pad1",
                                                 "conv2d_stride2_nobias",
                                                 "conv2d_1x1_stride2",
                                                 "batch_norm_train",
                                                 "batch_norm_train_cumulative",
                                                 "batch_norm_eval",
                                                 "relu",
                                                 "max_pool2d_k2",
                                                 "max_pool2d_k3_s2_p1",
                                                 "avg_pool2d_k2",
                                                 "avg_pool2d_k3_s2_p1",
                                                 "adaptive_avg_pool2d_1x1",
                                                 "adaptive_avg_pool2d_2x3",
                                                 "flatten",
                                                 "dropout_eval",
                                                 "basic_block_identity",
                                                 "basic_block_projection",
                                                 "basic_block_projection_eval",
                                                 "cross_entropy_mean",
                                                 "cross_entropy_sum",
                                                 "cross_entropy_smooth",
                                                 "mse_mean",
                                                 "mse_sum"};

// allclose: |actual - expected| <= atol + rtol * |expected|.
struct Tolerance {
  double atol = 1e-5;
  double rtol = 1e-4;
};

const json& golden() {
  static const json data = ringlet::testing::load_golden("nn.json");
  return data;
}

// One failure per mismatching tensor, naming the first few differing elements.
void check_close(const std::string& what, const Tensor& actual, const json& expected,
                 Tolerance tol = {}) {
  if (!actual.defined()) {
    FAIL_CHECK(what << ": no tensor");
    return;
  }
  const Shape shape = expected.at("shape").get<Shape>();
  if (actual.shape() != shape) {
    FAIL_CHECK(what << ": shape " << shape_str(actual.shape()) << ", expected "
                    << shape_str(shape));
    return;
  }
  const auto want = expected.at("values").get<std::vector<double>>();
  const auto got = actual.to_vector<double>();
  const bool exact = expected.at("dtype") != "f32";
  std::ostringstream report;
  int bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double allowed = exact ? 0.0 : tol.atol + tol.rtol * std::abs(want[i]);
    if (!(std::abs(got[i] - want[i]) <= allowed)) {
      if (bad++ < 5) report << " [" << i << "] expected " << want[i] << " got " << got[i] << ";";
    }
  }
  if (bad > 0)
    FAIL_CHECK(what << ": " << bad << " of " << want.size() << " differ:" << report.str());
}

// Large gradients are stored as a sample of entries (compared with the usual tolerance) and
// their sum, sum of |g| and L2 norm, which catch a wrong entry the sample misses. Each entry
// carries f32 rounding (~1e-7 relative) from a summation order that differs from PyTorch's,
// so the sums are compared within 1e-6 of the sum of |g|: the worst error seen is 1.3e-8 of
// it, and one entry off by 1e-4 of the total magnitude still fails.
void check_summary(const std::string& what, const Tensor& actual, const json& expected) {
  if (!expected.contains("sample_index")) {
    check_close(what, actual, expected);
    return;
  }
  REQUIRE(actual.defined());
  REQUIRE(actual.shape() == expected.at("shape").get<Shape>());
  const auto values = actual.to_vector<double>();
  const auto index = expected.at("sample_index").get<std::vector<std::int64_t>>();
  const auto sample = expected.at("sample_values").get<std::vector<double>>();
  int bad = 0;
  for (std::size_t i = 0; i < index.size(); ++i) {
    const double got = values[static_cast<std::size_t>(index[i])];
    if (!(std::abs(got - sample[i]) <= 1e-5 + 1e-4 * std::abs(sample[i]))) ++bad;
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " sampled entries differ");
  double sum = 0, abs_sum = 0, sq = 0;
  for (double v : values) {
    sum += v;
    abs_sum += std::abs(v);
    sq += v * v;
  }
  const double scale = expected.at("abs_sum").get<double>();
  CHECK_MESSAGE(std::abs(sum - expected.at("sum").get<double>()) <= 1e-6 * scale,
                what << ": sum " << sum << " expected " << expected.at("sum"));
  CHECK_MESSAGE(std::abs(abs_sum - scale) <= 1e-6 * scale, what << ": abs sum");
  const double l2 = expected.at("l2").get<double>();
  CHECK_MESSAGE(std::abs(std::sqrt(sq) - l2) <= 1e-6 * l2, what << ": l2");
}

// The state dict of a case, under PyTorch's names.
nn::StateDict state_from(const json& entries) {
  nn::StateDict dict;
  for (const auto& e : entries)
    dict.insert(e.at("name").get<std::string>(), ringlet::testing::golden_tensor(e));
  return dict;
}

std::shared_ptr<nn::Module> build_module(const std::string& kind, const json& c) {
  Generator gen(0);  // weights come from the golden state dict
  if (kind == "linear") {
    return std::make_shared<nn::Linear>(c.at("in"), c.at("out"), gen, c.at("bias").get<bool>());
  }
  if (kind == "conv2d") {
    return std::make_shared<nn::Conv2d>(
        c.at("in"), c.at("out"), c.at("kernel").get<std::int64_t>(), gen,
        nn::Conv2dOptions{.stride = c.at("stride").get<std::int64_t>(),
                          .padding = c.at("padding").get<std::int64_t>(),
                          .bias = c.at("bias").get<bool>()});
  }
  if (kind == "batch_norm2d") {
    nn::BatchNormOptions o;
    if (c.at("momentum").is_null()) {
      o.momentum = std::nullopt;
    } else {
      o.momentum = c.at("momentum").get<double>();
    }
    return std::make_shared<nn::BatchNorm2d>(c.at("features"), o);
  }
  if (kind == "relu") return std::make_shared<nn::ReLU>();
  if (kind == "max_pool2d") {
    return std::make_shared<nn::MaxPool2d>(c.at("kernel").get<std::int64_t>(),
                                           c.at("stride").get<std::int64_t>(),
                                           c.at("padding").get<std::int64_t>());
  }
  if (kind == "avg_pool2d") {
    return std::make_shared<nn::AvgPool2d>(c.at("kernel").get<std::int64_t>(),
                                           c.at("stride").get<std::int64_t>(),
                                           c.at("padding").get<std::int64_t>());
  }
  if (kind == "adaptive_avg_pool2d") {
    return std::make_shared<nn::AdaptiveAvgPool2d>(
        nn::Size2(c.at("out_h").get<std::int64_t>(), c.at("out_w").get<std::int64_t>()));
  }
  if (kind == "flatten") return std::make_shared<nn::Flatten>();
  if (kind == "dropout") return std::make_shared<nn::Dropout>(c.at("p").get<double>());
  if (kind == "basic_block") {
    return std::make_shared<nn::BasicBlock>(c.at("in"), c.at("out"), c.at("stride"), gen);
  }
  throw std::runtime_error("nn.json: unknown module kind " + kind);
}

Reduction parse_reduction(const json& c) {
  return c.at("reduction") == "sum" ? Reduction::sum : Reduction::mean;
}

void run_case(const json& c) {
  const std::string kind = c.at("module");
  Tensor input = ringlet::testing::golden_tensor(c.at("input"));
  input.requires_grad_(true);
  Tensor output;
  std::shared_ptr<nn::Module> module;
  if (kind == "cross_entropy") {
    const nn::CrossEntropyLoss loss(parse_reduction(c.at("config")),
                                    c.at("config").at("smoothing").get<double>());
    output = loss(input, ringlet::testing::golden_tensor(c.at("target")));
  } else if (kind == "mse") {
    output = nn::MSELoss(parse_reduction(c.at("config")))(
        input, ringlet::testing::golden_tensor(c.at("target")));
  } else {
    module = build_module(kind, c.at("config"));
    // Strict: the module's key names and shapes are PyTorch's.
    module->load_state_dict(state_from(c.at("state")), true);
    module->train(c.at("training").get<bool>());
    output = module->forward(input);
  }
  check_close("output", output, c.at("output"));
  output.backward(ringlet::testing::golden_tensor(c.at("grad_output")));
  check_close("input grad", input.grad(), c.at("input").at("grad"));
  if (!module) return;

  const auto params = module->named_parameters();
  REQUIRE(params.size() == c.at("param_grads").size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& expected = c.at("param_grads")[i];
    REQUIRE(params[i].first == expected.at("name").get<std::string>());
    check_close("grad of " + params[i].first, params[i].second.grad(), expected);
  }
  const nn::StateDict after = module->state_dict();
  REQUIRE(after.size() == c.at("state_after").size());
  for (const auto& expected : c.at("state_after")) {
    const std::string name = expected.at("name");
    check_close("state after: " + name, after.at(name), expected);
  }
}

// splitmix64 fill, bit for bit as hash_uniform() in make_nn_golden.py.
Tensor hash_uniform(const Shape& shape, std::uint64_t seed, double low, double high) {
  const auto values = ringlet::testing::hash_uniform_values(shape_numel(shape), seed, low, high);
  return from_vector(std::vector<double>(values.begin(), values.end()), shape);
}

}  // namespace

TEST_CASE("nn golden: the file holds exactly the cases this test knows") {
  std::set<std::string> in_file;
  for (const auto& c : golden().at("cases")) in_file.insert(c.at("name").get<std::string>());
  const std::set<std::string> expected(kExpectedCases.begin(), kExpectedCases.end());
  for (const auto& name : expected) CHECK_MESSAGE(in_file.count(name), "missing case " << name);
  for (const auto& name : in_file) CHECK_MESSAGE(expected.count(name), "unknown case " << name);
}

TEST_CASE("nn golden: every layer's output and gradients match PyTorch") {
  for (const auto& c : golden().at("cases")) {
    const std::string name = c.at("name");
    CAPTURE(name);
    SUBCASE(name.c_str()) { run_case(c); }
  }
}

TEST_CASE("nn golden: fmnist_cnn loads PyTorch's state dict and matches forward and backward") {
  const json& g = golden().at("fmnist_cnn");
  Generator gen(7);
  auto model = nn::fmnist_cnn(gen);

  nn::StateDict dict;
  std::vector<std::string> torch_keys;
  for (const auto& k : g.at("keys")) {
    const std::string name = k.at("name");
    const Shape shape = k.at("shape").get<Shape>();
    const json& fill = k.at("fill");
    torch_keys.push_back(name);
    if (fill.contains("constant")) {
      dict.insert(
          name, full(shape, fill.at("constant").get<double>(), ringlet::testing::golden_dtype(k)));
    } else {
      dict.insert(name, hash_uniform(shape, fill.at("seed").get<std::uint64_t>(),
                                     fill.at("low").get<double>(), fill.at("high").get<double>()));
    }
  }
  CHECK(model->state_dict().keys() == torch_keys);
  model->load_state_dict(dict, true);

  model->train();
  Tensor x = ringlet::testing::golden_tensor(g.at("input"));
  x.requires_grad_(true);
  const Tensor logits = model->forward(x);
  const Tensor loss =
      nn::CrossEntropyLoss()(logits, ringlet::testing::golden_tensor(g.at("target")));
  check_close("logits", logits, g.at("logits"));
  check_close("loss", loss, g.at("loss"));
  loss.backward();
  check_close("input grad", x.grad(), g.at("input_grad"));

  const auto params = model->named_parameters();
  REQUIRE(params.size() == g.at("param_grads").size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& expected = g.at("param_grads")[i];
    REQUIRE(params[i].first == expected.at("name").get<std::string>());
    check_summary("grad of " + params[i].first, params[i].second.grad(), expected);
  }
  const nn::StateDict after = model->state_dict();
  for (const auto& expected : g.at("buffers_after")) {
    const std::string name = expected.at("name");
    check_close("after: " + name, after.at(name), expected);
  }

  model->eval();
  NoGradGuard no_grad;
  check_close("eval logits", model->forward(x.detach()), g.at("eval_logits"));
}

TEST_CASE("nn golden: parameter counts and state-dict keys equal PyTorch's") {
  for (const auto& name : nn::model_names()) {
    CAPTURE(name);
    const json& info = golden().at("models").at(name);
    Generator gen(0);
    const auto model = nn::make_model(name, gen, 10, name == "fmnist_cnn" ? 1 : 3);
    CHECK(model->num_parameters() == info.at("num_parameters").get<std::int64_t>());
    const nn::StateDict dict = model->state_dict();
    REQUIRE(dict.size() == info.at("keys").size());
    std::size_t i = 0;
    for (const auto& [key, value] : dict) {
      const auto& expected = info.at("keys")[i++];
      CHECK(key == expected[0].get<std::string>());
      CHECK(value.shape() == expected[1].get<Shape>());
    }
  }
}
