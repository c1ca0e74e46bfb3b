// nn::Module and the layers: registration order and dotted names, train/eval (BatchNorm and
// Dropout), state_dict round trips and load_state_dict's errors, initialization statistics
// and seeding, parameter counts, zero_grad and the summary text. Numerical agreement with
// PyTorch is in test_nn_golden.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "nn/activation.h"
#include "nn/batch_norm.h"
#include "nn/conv2d.h"
#include "nn/dropout.h"
#include "nn/flatten.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/pooling.h"
#include "nn/residual.h"
#include "nn/sequential.h"
#include "tensor/ops.h"

using namespace ringlet;
using namespace ringlet::tensor;

namespace {

// A module with its own parameter and buffer plus children, to test traversal order.
class Tiny : public nn::Module {
 public:
  explicit Tiny(Generator& gen) {
    scale_ = register_parameter("scale", ones({3}));
    register_buffer("steps", zeros({}, DType::i64));
    fc_ = register_module("fc", std::make_shared<nn::Linear>(3, 2, gen));
    register_module("bn", std::make_shared<nn::BatchNorm2d>(2));
  }
  Tensor forward(const Tensor& x) override { return fc_->forward(mul(x, scale_)); }
  std::string type_name() const override { return "Tiny"; }

  // Exposes registration to the error tests.
  void add_parameter(const std::string& name) { register_parameter(name, zeros({1})); }

 private:
  Tensor scale_;
  std::shared_ptr<nn::Linear> fc_;
};

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& entries) {
  std::vector<std::string> out;
  for (const auto& e : entries) out.push_back(e.first);
  return out;
}

bool equal_values(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.to_vector<double>() == b.to_vector<double>();
}

// The message of the StateDictError that fn throws ("" if it throws none).
template <class F>
std::string state_dict_error(F&& fn) {
  try {
    fn();
  } catch (const nn::StateDictError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("modules: parameters, buffers and children in registration order with dotted names") {
  Generator gen(1);
  Tiny tiny(gen);
  CHECK(names_of(tiny.named_parameters()) ==
        std::vector<std::string>{"scale", "fc.weight", "fc.bias", "bn.weight", "bn.bias"});
  CHECK(names_of(tiny.named_buffers()) == std::vector<std::string>{"steps", "bn.running_mean",
                                                                   "bn.running_var",
                                                                   "bn.num_batches_tracked"});
  // PyTorch's state-dict order: own parameters, own buffers, then each child.
  CHECK(tiny.state_dict().keys() ==
        std::vector<std::string>{"scale", "steps", "fc.weight", "fc.bias", "bn.weight", "bn.bias",
                                 "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"});
  const auto modules = tiny.named_modules();
  REQUIRE(modules.size() == 3);
  CHECK(modules[0].first == "");
  CHECK(modules[1].first == "fc");
  CHECK(modules[2].first == "bn");
  CHECK(tiny.children().size() == 2);

  const auto params = tiny.parameters();
  REQUIRE(params.size() == 5);
  for (const auto& p : params) {
    CHECK(p.is_leaf());
    CHECK(p.requires_grad());
  }
  CHECK(tiny.num_parameters() == 3 + 6 + 2 + 2 + 2);

  CHECK_THROWS_AS(tiny.add_parameter("scale"), core::ValueError);
  CHECK_THROWS_AS(tiny.add_parameter("fc"), core::ValueError);
  CHECK_THROWS_AS(tiny.add_parameter("a.b"), core::ValueError);
  CHECK_THROWS_AS(tiny.add_parameter(""), core::ValueError);
}

TEST_CASE("modules: Sequential names children by index and nests names") {
  Generator gen(2);
  auto inner = nn::seq(std::make_shared<nn::Linear>(4, 4, gen), std::make_shared<nn::ReLU>());
  auto outer = nn::seq(std::make_shared<nn::Linear>(8, 4, gen, false), inner,
                       std::make_shared<nn::Linear>(4, 2, gen));
  CHECK(outer->size() == 3);
  CHECK(names_of(outer->named_parameters()) ==
        std::vector<std::string>{"0.weight", "1.0.weight", "1.0.bias", "2.weight", "2.bias"});
  CHECK((*outer)[1] == inner);
  CHECK_THROWS_AS((*outer)[3], core::ValueError);
  const Tensor y = outer->forward(ones({5, 8}));
  CHECK(y.shape() == Shape{5, 2});

  // Backward fills every parameter's gradient; zero_grad drops them.
  sum(y).backward();
  for (const auto& p : outer->parameters()) CHECK(p.grad().defined());
  outer->zero_grad();
  for (const auto& p : outer->parameters()) CHECK_FALSE(p.grad().defined());
}

TEST_CASE("modules: BasicBlock registers torchvision's names, projection only when needed") {
  Generator gen(3);
  nn::BasicBlock same(8, 8, 1, gen);
  CHECK_FALSE(same.has_projection());
  CHECK(names_of(same.named_parameters()) == std::vector<std::string>{"conv1.weight", "bn1.weight",
                                                                      "bn1.bias", "conv2.weight",
                                                                      "bn2.weight", "bn2.bias"});
  nn::BasicBlock down(8, 16, 2, gen);
  CHECK(down.has_projection());
  const auto keys = down.state_dict().keys();
  CHECK(keys.back() == "downsample.1.num_batches_tracked");
  CHECK(std::find(keys.begin(), keys.end(), "downsample.0.weight") != keys.end());
  CHECK(down.forward(zeros({2, 8, 6, 6})).shape() == Shape{2, 16, 3, 3});
}

TEST_CASE("modules: train/eval switches BatchNorm's statistics and Dropout recursively") {
  auto bn = std::make_shared<nn::BatchNorm2d>(2);
  auto drop = std::make_shared<nn::Dropout>(0.5, 42);
  auto net = nn::seq(bn, drop);
  CHECK(bn->is_training());
  Generator gen(4);
  const Tensor x = add(mul(randn({8, 2, 4, 4}, gen), 3.0), 2.0);

  SUBCASE("BatchNorm: training updates running stats and counts batches") {
    bn->forward(x);
    CHECK(bn->num_batches_tracked().item() == 1);
    const auto batch_mean = mean(x, {0, 2, 3}).to_vector<double>();
    const auto rm = bn->running_mean().to_vector<double>();
    for (int c = 0; c < 2; ++c) CHECK(rm[c] == doctest::Approx(0.1 * batch_mean[c]).epsilon(1e-5));
    // Training output is normalized by the batch statistics.
    const Tensor y = bn->forward(x);
    CHECK(std::abs(mean(y).item()) < 1e-5);
    CHECK(bn->num_batches_tracked().item() == 2);
  }
  SUBCASE("BatchNorm: eval uses running stats and leaves them alone") {
    net->eval();
    CHECK_FALSE(bn->is_training());
    CHECK_FALSE(drop->is_training());
    const Tensor y = bn->forward(x);
    CHECK(bn->num_batches_tracked().item() == 0);
    CHECK(bn->running_mean().to_vector<double>() == std::vector<double>{0, 0});
    // running mean 0, var 1, weight 1, bias 0: y = x / sqrt(1 + eps).
    CHECK(max(abs(sub(y, div(x, std::sqrt(1.0 + 1e-5))))).item() < 1e-6);
    net->train();
    CHECK(bn->is_training());
    CHECK(drop->is_training());
  }
  SUBCASE("Dropout: masks about p of the values and scales survivors; eval is the identity") {
    const Tensor big = ones({100, 100});
    const auto v = drop->forward(big).to_vector<double>();
    int zeros_seen = 0;
    for (double e : v) {
      if (e == 0.0) {
        ++zeros_seen;
      } else {
        CHECK(e == doctest::Approx(2.0));
      }
    }
    CHECK(zeros_seen > 4700);  // 5000 expected, std 50
    CHECK(zeros_seen < 5300);
    // Same seed, same mask; the generator advances between calls.
    nn::Dropout again(0.5, 42);
    CHECK(equal_values(again.forward(big), drop->forward(big)) == false);
    nn::Dropout twin(0.5, 42);
    nn::Dropout twin2(0.5, 42);
    CHECK(equal_values(twin.forward(big), twin2.forward(big)));
    drop->eval();
    CHECK(equal_values(drop->forward(x), x));
    CHECK_THROWS_AS(nn::Dropout(1.5), core::ValueError);
  }
}

TEST_CASE("modules: state_dict round trip copies in place and keeps parameter handles") {
  Generator gen_a(10), gen_b(11);
  Tiny a(gen_a), b(gen_b);
  a.forward(ones({1, 3}));
  const auto b_params = b.parameters();
  CHECK_FALSE(equal_values(a.state_dict().at("fc.weight"), b.state_dict().at("fc.weight")));

  const auto result = b.load_state_dict(a.state_dict());
  CHECK(result.missing_keys.empty());
  CHECK(result.unexpected_keys.empty());
  for (const auto& entry : a.state_dict()) {
    const auto& name = entry.first;
    const auto& value = entry.second;
    CAPTURE(name);
    CHECK(equal_values(value, b.state_dict().at(name)));
  }
  // Same tensors as before (optimizers hold them), still leaves that require grad.
  const auto after = b.parameters();
  for (std::size_t i = 0; i < after.size(); ++i) {
    CHECK(after[i].same(b_params[i]));
    CHECK(after[i].requires_grad());
  }
  // state_dict values share storage with the module but carry no autograd.
  const Tensor w = a.state_dict().at("fc.weight");
  CHECK_FALSE(w.requires_grad());
  {
    NoGradGuard no_grad;
    Tensor handle = w;
    fill_(handle, 0.5);
  }
  CHECK(a.state_dict().at("fc.weight").to_vector<double>()[0] == 0.5);
  CHECK_THROWS_AS(a.state_dict().at("nope"), core::ValueError);
}

TEST_CASE("modules: load_state_dict lists every missing, unexpected and mis-shaped key at once") {
  Generator gen(5);
  Tiny model(gen);
  const Tensor before = model.state_dict().at("scale").clone();
  nn::StateDict bad;
  for (const auto& [name, value] : model.state_dict()) {
    if (name == "fc.bias" || name == "bn.running_var") continue;  // missing
    if (name == "fc.weight") {
      bad.insert(name, zeros({3, 3}));  // shape mismatch
    } else if (name == "scale") {
      bad.insert(name, full({3}, 9.0));
    } else {
      bad.insert(name, value.clone());
    }
  }
  bad.insert("fc.extra", zeros({1}));  // unexpected
  bad.insert("head.weight", zeros({1}));

  const std::string msg = state_dict_error([&] { model.load_state_dict(bad); });
  INFO(msg);
  CHECK(msg.find("missing keys (2): \"fc.bias\" \"bn.running_var\"") != std::string::npos);
  CHECK(msg.find("unexpected keys (2): \"fc.extra\" \"head.weight\"") != std::string::npos);
  CHECK(msg.find("fc.weight: shape [3, 3] in the state dict, [2, 3] in the model") !=
        std::string::npos);
  // Nothing was copied.
  CHECK(equal_values(model.state_dict().at("scale"), before));

  SUBCASE("non-strict still rejects shape mismatches") {
    const std::string m = state_dict_error([&] { model.load_state_dict(bad, false); });
    CHECK(m.find("fc.weight: shape [3, 3]") != std::string::npos);
    CHECK(m.find("missing") == std::string::npos);
  }
  SUBCASE("non-strict reports skipped keys and loads the rest") {
    nn::StateDict partial;
    partial.insert("scale", full({3}, 9.0));
    partial.insert("other", zeros({2}));
    const auto result = model.load_state_dict(partial, false);
    CHECK(result.unexpected_keys == std::vector<std::string>{"other"});
    CHECK(result.missing_keys.size() == 8);
    CHECK(model.state_dict().at("scale").to_vector<double>() == std::vector<double>{9, 9, 9});
  }
  CHECK_THROWS_AS(bad.insert("scale", zeros({3})), core::ValueError);
}

TEST_CASE("init: PyTorch's default bounds, moments and seeded reproducibility") {
  Generator gen(123);
  nn::Linear big(1000, 500, gen);
  const double bound = 1.0 / std::sqrt(1000.0);
  const auto w = big.weight().to_vector<double>();
  double s = 0, sq = 0, lo = 1, hi = -1;
  for (double v : w) {
    s += v;
    sq += v * v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  const double n = static_cast<double>(w.size());
  // U(-b, b): mean 0 (std of the mean b / sqrt(3n)), variance b^2 / 3, range close to +-b.
  CHECK(std::abs(s / n) < 5 * bound / std::sqrt(3 * n));
  CHECK(sq / n == doctest::Approx(bound * bound / 3).epsilon(0.01));
  CHECK(lo >= -bound);
  CHECK(hi <= bound);
  CHECK(lo < -0.999 * bound);
  CHECK(hi > 0.999 * bound);
  for (double v : big.bias().to_vector<double>()) CHECK(std::abs(v) <= bound);

  // Conv2d: fan_in = in_channels * kH * kW.
  nn::Conv2d conv(16, 32, 3, gen);
  const double cbound = 1.0 / std::sqrt(16.0 * 9.0);
  CHECK(max(abs(conv.weight())).item() <= cbound);
  CHECK(max(abs(conv.bias())).item() <= cbound);
  CHECK(max(abs(conv.weight())).item() > 0.99 * cbound);

  // Same seed, same weights; another seed, other weights.
  Generator g1(7), g2(7), g3(8);
  nn::Linear a(20, 10, g1), b(20, 10, g2), c(20, 10, g3);
  CHECK(equal_values(a.weight(), b.weight()));
  CHECK(equal_values(a.bias(), b.bias()));
  CHECK_FALSE(equal_values(a.weight(), c.weight()));

  // BatchNorm: weight 1, bias 0, running mean 0, var 1, no batches.
  nn::BatchNorm2d bn(4);
  CHECK(bn.weight().to_vector<double>() == std::vector<double>(4, 1.0));
  CHECK(bn.bias().to_vector<double>() == std::vector<double>(4, 0.0));
  CHECK(bn.running_var().to_vector<double>() == std::vector<double>(4, 1.0));
  CHECK(bn.num_batches_tracked().dtype() == DType::i64);

  // Gains and kaiming_normal's standard deviation.
  CHECK(nn::init::calculate_gain("relu") == doctest::Approx(std::sqrt(2.0)));
  CHECK(nn::init::calculate_gain("leaky_relu", std::sqrt(5.0)) ==
        doctest::Approx(std::sqrt(1.0 / 3.0)));
  Tensor t = empty({256, 64, 3, 3});
  nn::init::kaiming_normal_(t, gen, 0.0, "fan_out", "relu");
  const double expected_std = std::sqrt(2.0 / (256 * 9));
  CHECK(std::sqrt(mean(mul(t, t)).item()) == doctest::Approx(expected_std).epsilon(0.01));
  CHECK_THROWS_AS(nn::init::fans(empty({3})), core::ValueError);
}

TEST_CASE("modules: pooling, flatten and loss modules") {
  Generator gen(6);
  const Tensor x = randn({2, 3, 8, 6}, gen);
  CHECK(nn::MaxPool2d(2).forward(x).shape() == Shape{2, 3, 4, 3});
  CHECK(nn::AvgPool2d(3, 2, 1).forward(x).shape() == Shape{2, 3, 4, 3});
  const Tensor gap = nn::AdaptiveAvgPool2d(1).forward(x);
  CHECK(gap.shape() == Shape{2, 3, 1, 1});
  CHECK(gap.to_vector<double>()[0] == doctest::Approx(mean(select(select(x, 0, 0), 0, 0)).item()));
  CHECK(nn::AdaptiveAvgPool2d({2, 3}).forward(x).shape() == Shape{2, 3, 2, 3});
  CHECK_THROWS_AS(nn::AdaptiveAvgPool2d(5).forward(x), core::ValueError);
  CHECK(nn::Flatten().forward(x).shape() == Shape{2, 144});
  CHECK(nn::Flatten(0, 1).forward(x).shape() == Shape{6, 8, 6});

  const Tensor logits = randn({4, 5}, gen);
  const Tensor target = from_vector({0, 4, 2, 2}, {4}, DType::i64);
  const double mean_loss = nn::CrossEntropyLoss()(logits, target).item();
  const double sum_loss = nn::CrossEntropyLoss(Reduction::sum)(logits, target).item();
  CHECK(sum_loss == doctest::Approx(4 * mean_loss));
  CHECK(nn::CrossEntropyLoss(Reduction::mean, 0.1)(logits, target).item() != mean_loss);
  CHECK_THROWS_AS(nn::CrossEntropyLoss(Reduction::mean, 1.5), core::ValueError);
  CHECK(nn::MSELoss()(ones({2, 2}), zeros({2, 2})).item() == 1.0);
  CHECK(nn::MSELoss(Reduction::sum)(ones({2, 2}), zeros({2, 2})).item() == 4.0);

  CHECK_THROWS_AS(nn::Linear(3, 2, gen).forward(ones({2, 4})), core::ShapeError);
  CHECK_THROWS_AS(nn::Conv2d(3, 2, 3, gen).forward(ones({1, 2, 5, 5})), core::ShapeError);
  CHECK_THROWS_AS(nn::BatchNorm2d(3).forward(ones({2, 4, 2, 2})), core::ShapeError);
}

TEST_CASE("modules: Sequential runs ReLU then MaxPool2d as one op, with the two ops' results") {
  nn::Sequential fused;
  fused.add(std::make_shared<nn::ReLU>()).add(std::make_shared<nn::MaxPool2d>(2));
  Generator gen(9);
  std::vector<double> v = randn({2, 4, 10, 10}, gen).to_vector<double>();
  for (std::size_t i = 0; i < v.size(); i += 7) v[i] = -0.0;  // ties of zeros after relu
  const Tensor x = from_vector(v, {2, 4, 10, 10}, DType::f32).requires_grad_();
  const Tensor x2 = x.detach().clone().requires_grad_();
  const Tensor out = fused.forward(x);
  REQUIRE(out.grad_fn() != nullptr);
  CHECK(out.grad_fn()->name() == "relu_max_pool2d");
  const Tensor want = nn::MaxPool2d(2).forward(nn::ReLU().forward(x2));
  CHECK(out.to_vector<float>() == want.to_vector<float>());
  const Tensor g = randn(out.shape(), gen);
  out.backward(g);
  want.backward(g);
  CHECK(x.grad().to_vector<float>() == x2.grad().to_vector<float>());
  // A ReLU not followed by a pool, or a pool not preceded by a ReLU, runs as itself.
  nn::Sequential plain;
  plain.add(std::make_shared<nn::MaxPool2d>(2)).add(std::make_shared<nn::ReLU>());
  CHECK(plain.forward(x).grad_fn()->name() != "relu_max_pool2d");
}

TEST_CASE("modules: summary lists every module with its parameter count and the total") {
  Generator gen(9);
  auto net = nn::seq(std::make_shared<nn::Conv2d>(1, 2, 3, gen, nn::Conv2dOptions{.padding = 1}),
                     std::make_shared<nn::BatchNorm2d>(2), std::make_shared<nn::ReLU>(),
                     std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(32, 3, gen));
  // One line per module, indented by depth; counts right-aligned; then the total.
  const std::string expected =
      R"(module                                                                                params
Sequential                                                                               123
  (0) Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))                     20
  (1) BatchNorm2d(2, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)       4
  (2) ReLU                                                                                 0
  (3) Flatten(start_dim=1, end_dim=-1)                                                     0
  (4) Linear(in_features=32, out_features=3, bias=True)                                   99
total parameters: 123
)";
  CHECK(net->summary() == expected);
  // A module that does not name itself is named by its class.
  struct Unnamed : nn::Module {
    Tensor forward(const Tensor& x) override { return x; }
  };
  CHECK(Unnamed().type_name() == "Unnamed");
  Generator tiny_gen(1);
  CHECK(Tiny(tiny_gen).nn::Module::type_name() == "Tiny");
  CHECK(nn::format_count(1234567) == "1,234,567");
  CHECK(nn::format_count(999) == "999");
}
