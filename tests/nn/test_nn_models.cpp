// The model zoo: parameter counts (PyTorch's, also cross-checked against tests/golden/nn.json
// in test_nn_golden.cpp), state-dict names, output shapes, gradients reaching every
// parameter, seeded reproducibility, the summary, and a few SGD steps lowering the loss.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "nn/loss.h"
#include "nn/models.h"
#include "tensor/ops.h"

using namespace ringlet;
using namespace ringlet::tensor;

namespace {

bool has_key(const nn::StateDict& dict, const std::string& key) { return dict.contains(key); }

}  // namespace

TEST_CASE("models: fmnist_cnn is train_fmnist.py's model with PyTorch's keys") {
  Generator gen(0);
  auto model = nn::fmnist_cnn(gen);
  CHECK(model->num_parameters() == 421834);
  CHECK(model->state_dict().keys() ==
        std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean",
                                 "1.running_var", "1.num_batches_tracked", "4.weight", "4.bias",
                                 "5.weight", "5.bias", "5.running_mean", "5.running_var",
                                 "5.num_batches_tracked", "9.weight", "9.bias", "11.weight",
                                 "11.bias"});
  CHECK(model->size() == 12);

  Tensor x = randn({2, 1, 28, 28}, gen);
  const Tensor target = from_vector({1, 7}, {2}, DType::i64);
  const Tensor loss = nn::CrossEntropyLoss()(model->forward(x), target);
  loss.backward();
  for (const auto& entry : model->named_parameters()) {
    const auto& name = entry.first;
    const auto& p = entry.second;
    CAPTURE(name);
    REQUIRE(p.grad().defined());
    CHECK(p.grad().shape() == p.shape());
  }

  const std::string summary = model->summary();
  CHECK(summary.find("total parameters: 421,834") != std::string::npos);
  CHECK(summary.find("(9) Linear(in_features=3136, out_features=128, bias=True)") !=
        std::string::npos);
  CHECK(std::count(summary.begin(), summary.end(), '\n') == 1 + 13 + 1);
}

TEST_CASE("models: the same seed builds the same model") {
  Generator g1(5), g2(5), g3(6);
  const auto a = nn::fmnist_cnn(g1)->state_dict();
  const auto b = nn::fmnist_cnn(g2)->state_dict();
  const auto c = nn::fmnist_cnn(g3)->state_dict();
  for (const auto& entry : a) {
    const auto& name = entry.first;
    const auto& value = entry.second;
    CAPTURE(name);
    CHECK(value.to_vector<double>() == b.at(name).to_vector<double>());
  }
  CHECK(a.at("9.weight").to_vector<double>() != c.at("9.weight").to_vector<double>());
}

TEST_CASE("models: resnet18 (CIFAR) has 11,173,962 parameters and torchvision's names") {
  Generator gen(1);
  auto model = nn::resnet18(gen);
  CHECK(model->num_parameters() == 11173962);
  const auto dict = model->state_dict();
  CHECK(dict.keys().front() == "conv1.weight");
  CHECK(dict.at("conv1.weight").shape() == Shape{64, 3, 3, 3});  // 3x3 stem
  CHECK(has_key(dict, "layer1.0.bn1.running_mean"));
  CHECK_FALSE(has_key(dict, "layer1.0.downsample.0.weight"));  // identity in stage 1
  for (const char* key : {"layer2.0.downsample.0.weight", "layer3.0.downsample.1.running_var",
                          "layer4.1.conv2.weight"}) {
    CHECK(has_key(dict, key));
  }
  CHECK(dict.at("fc.weight").shape() == Shape{10, 512});
  CHECK(dict.keys().back() == "fc.bias");

  model->eval();
  NoGradGuard no_grad;
  CHECK(model->forward(randn({1, 3, 32, 32}, gen)).shape() == Shape{1, 10});
}

TEST_CASE("models: resnet20 has 272,474 parameters (option-B projections) and trains") {
  Generator gen(2);
  auto model = nn::resnet20(gen);
  // Option A (parameter-free zero-padding shortcuts) would give 269,722; the two projections
  // add 16*32 + 2*32 + 32*64 + 2*64 = 2,752.
  CHECK(model->num_parameters() == 272474);
  const auto dict = model->state_dict();
  CHECK(dict.at("conv1.weight").shape() == Shape{16, 3, 3, 3});
  CHECK(has_key(dict, "layer3.2.bn2.num_batches_tracked"));
  CHECK_FALSE(has_key(dict, "layer4.0.conv1.weight"));
  CHECK(has_key(dict, "layer2.0.downsample.0.weight"));
  CHECK(has_key(dict, "layer3.0.downsample.0.weight"));
  CHECK_FALSE(has_key(dict, "layer2.1.downsample.0.weight"));
  CHECK(dict.at("fc.weight").shape() == Shape{10, 64});

  const Tensor x = randn({2, 3, 16, 16}, gen);
  const Tensor y = model->forward(x);
  CHECK(y.shape() == Shape{2, 10});
  sum(y).backward();
  for (const auto& entry : model->named_parameters()) {
    const auto& name = entry.first;
    const auto& p = entry.second;
    CAPTURE(name);
    CHECK(p.grad().defined());
  }
}

TEST_CASE("models: make_model by name, with clear errors") {
  Generator gen(3);
  CHECK(nn::model_names() == std::vector<std::string>{"fmnist_cnn", "resnet18", "resnet20"});
  CHECK(nn::make_model("resnet20", gen, 100, 1)->forward(zeros({1, 1, 8, 8})).shape() ==
        Shape{1, 100});
  CHECK(nn::make_model("fmnist_cnn", gen, 10, 1)->num_parameters() == 421834);
  CHECK_THROWS_WITH_AS(nn::make_model("resnet50", gen),
                       doctest::Contains("valid: fmnist_cnn, resnet18, resnet20"),
                       core::ValueError);
  CHECK_THROWS_AS(nn::make_model("fmnist_cnn", gen, 10, 3), core::ValueError);
}

TEST_CASE("models: ten SGD steps on a fixed batch halve fmnist_cnn's loss") {
  Generator gen(4);
  auto model = nn::fmnist_cnn(gen);
  const Tensor x = randn({8, 1, 28, 28}, gen);
  const Tensor target = randint(0, 10, {8}, gen);
  const nn::CrossEntropyLoss loss_fn;
  double first = 0, last = 0;
  for (int step = 0; step < 10; ++step) {
    model->zero_grad();
    const Tensor loss = loss_fn(model->forward(x), target);
    loss.backward();
    (step == 0 ? first : last) = loss.item();
    NoGradGuard no_grad;
    for (auto& p : model->parameters()) add_scaled_(p, p.grad(), -0.01);
  }
  CHECK(last < 0.5 * first);
}
