// GradScaler (dynamic loss scaling): a power-of-two scale leaves training bit-for-bit unchanged;
// an overflowing scaled gradient skips the step (parameters and optimizer state untouched) and
// backs the scale off; clean iterations grow it every growth_interval; unscale_ divides once;
// disabled it is the identity; its state dict round-trips and bad state is refused.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "nn/adam.h"
#include "nn/clip_grad.h"
#include "nn/grad_scaler.h"
#include "nn/linear.h"
#include "nn/sgd.h"
#include "tensor/ops.h"

using namespace ringlet;
using namespace ringlet::nn;
using tensor::Tensor;

namespace {

struct Problem {
  tensor::Generator gen{7};
  Linear model{5, 3, gen};
  Tensor x = tensor::randn({8, 5}, gen);
  Tensor y = tensor::randn({8, 3}, gen);

  Tensor loss() { return tensor::mse_loss(model.forward(x), y); }
};

std::vector<float> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::vector<float>(c.data<float>(), c.data<float>() + c.numel());
}

std::vector<std::vector<float>> snapshot(const std::vector<Tensor>& params) {
  std::vector<std::vector<float>> out;
  for (const Tensor& p : params) out.push_back(values(p));
  return out;
}

}  // namespace

TEST_CASE("a power-of-two scale trains bit-for-bit as without scaling (SGD and Adam)") {
  for (bool adam : {false, true}) {
    const char* name = adam ? "Adam" : "SGD with momentum";
    INFO(name);
    Problem plain, scaled;
    std::unique_ptr<Optimizer> o1, o2;
    if (adam) {
      o1 = std::make_unique<Adam>(plain.model.parameters(), AdamOptions{.lr = 0.01});
      o2 = std::make_unique<Adam>(scaled.model.parameters(), AdamOptions{.lr = 0.01});
    } else {
      o1 = std::make_unique<SGD>(plain.model.parameters(), SGDOptions{.lr = 0.1, .momentum = 0.9});
      o2 = std::make_unique<SGD>(scaled.model.parameters(), SGDOptions{.lr = 0.1, .momentum = 0.9});
    }
    GradScaler scaler({.init_scale = 1024.0, .growth_interval = 2});
    for (int step = 0; step < 5; ++step) {
      o1->zero_grad();
      plain.loss().backward();
      o1->step();

      o2->zero_grad();
      scaler.scale(scaled.loss()).backward();
      CHECK(scaler.step(*o2));
      scaler.update();
    }
    CHECK(scaler.get_scale() == 1024.0 * 4);  // grown twice: after steps 2 and 4
    CHECK(snapshot(plain.model.parameters()) == snapshot(scaled.model.parameters()));
  }
}

TEST_CASE("an overflow skips the step and backs the scale off; the next clean step steps") {
  Problem p;
  SGD opt(p.model.parameters(), {.lr = 0.1, .momentum = 0.9});
  GradScaler scaler({.init_scale = 1e39, .growth_interval = 3});  // beyond f32: inf
  const auto before = snapshot(p.model.parameters());
  opt.zero_grad();
  scaler.scale(p.loss()).backward();
  CHECK_FALSE(scaler.step(opt));
  CHECK(scaler.found_inf(opt));
  CHECK(snapshot(p.model.parameters()) == before);
  CHECK_FALSE(opt.state_dict().contains("state.0.momentum_buffer"));  // no state was created
  scaler.update();
  CHECK(scaler.get_scale() == 0.5e39);
  CHECK(scaler.growth_tracker() == 0);
  CHECK_FALSE(scaler.found_inf(opt));  // update() forgets it

  scaler.update(256.0);  // a scale that fits
  opt.zero_grad();
  scaler.scale(p.loss()).backward();
  CHECK(scaler.step(opt));
  CHECK(snapshot(p.model.parameters()) != before);
  scaler.update();
  CHECK(scaler.growth_tracker() == 1);
  CHECK(scaler.get_scale() == 256.0);
}

TEST_CASE("growth every growth_interval clean iterations, backoff resets the count") {
  Problem p;
  SGD opt(p.model.parameters(), {.lr = 0.01});
  GradScaler scaler(
      {.init_scale = 8.0, .growth_factor = 4.0, .backoff_factor = 0.25, .growth_interval = 3});
  std::vector<double> scales;
  auto iteration = [&](bool overflow) {
    opt.zero_grad();
    scaler.scale(p.loss()).backward();
    if (overflow) {  // poison one gradient as a half-precision overflow would
      p.model.weight().grad().data<float>()[0] = std::numeric_limits<float>::infinity();
    }
    CHECK(scaler.step(opt) == !overflow);
    scaler.update();
    scales.push_back(scaler.get_scale());
  };
  for (bool overflow : {false, false, false, false, true, false, false, false}) iteration(overflow);
  CHECK(scales == std::vector<double>{8, 8, 32, 32, 8, 8, 8, 32});

  // A growth that would overflow the scale keeps it.
  GradScaler big({.init_scale = std::numeric_limits<double>::max() / 2,
                  .growth_factor = 4.0,
                  .growth_interval = 1});
  big.update();
  CHECK(big.get_scale() == std::numeric_limits<double>::max() / 2);
  CHECK(big.growth_tracker() == 0);
}

TEST_CASE("unscale_ before clipping divides once; a second unscale_ is an error") {
  Problem plain, scaled;
  plain.loss().backward();
  const auto true_grads = values(plain.model.weight().grad());
  SGD opt(scaled.model.parameters(), {.lr = 0.1});
  GradScaler scaler({.init_scale = 65536.0});
  scaler.scale(scaled.loss()).backward();
  scaler.unscale_(opt);
  CHECK(values(scaled.model.weight().grad()) == true_grads);
  CHECK_THROWS_WITH_AS(scaler.unscale_(opt), doctest::Contains("already been called"),
                       core::ValueError);
  clip_grad_norm_(scaled.model.parameters(), 1e9);  // sees the true gradients
  CHECK(scaler.step(opt));                          // does not unscale again
  CHECK(values(scaled.model.weight().grad()) == true_grads);
  scaler.update();
  scaler.unscale_(opt);  // allowed again after update()
}

TEST_CASE("a disabled scaler is the identity") {
  Problem p;
  SGD opt(p.model.parameters(), {.lr = 0.1});
  GradScaler scaler({.init_scale = 1e38, .enabled = false});
  const Tensor loss = p.loss();
  CHECK(values(scaler.scale(loss)) == values(loss));
  CHECK(scaler.get_scale() == 1.0);
  loss.backward();
  const auto before = snapshot(p.model.parameters());
  CHECK(scaler.step(opt));
  CHECK(snapshot(p.model.parameters()) != before);
  scaler.update();
  CHECK(scaler.state_dict().empty());
}

TEST_CASE("state dict: PyTorch's keys, round trip, bad settings and state refused") {
  GradScaler a({.init_scale = 512.0, .growth_interval = 5});
  a.update();
  a.update();
  const NamedState s = a.state_dict();
  CHECK(s.keys() == std::vector<std::string>{"scale", "growth_factor", "backoff_factor",
                                             "growth_interval", "_growth_tracker"});
  GradScaler b;
  b.load_state_dict(s);
  CHECK(b.get_scale() == 512.0);
  CHECK(b.growth_tracker() == 2);
  for (int i = 0; i < 3; ++i) b.update();
  CHECK(b.get_scale() == 1024.0);  // the restored interval and count

  NamedState bad = s;
  bad.set("scale", -1.0);
  CHECK_THROWS_WITH_AS(b.load_state_dict(bad), doctest::Contains("scale"), core::ValueError);
  bad = s;
  bad.set("_growth_tracker", 9.0);
  CHECK_THROWS_WITH_AS(b.load_state_dict(bad), doctest::Contains("_growth_tracker 9"),
                       core::ValueError);
  CHECK_THROWS_AS(GradScaler({.init_scale = 0.0}), core::ValueError);
  CHECK_THROWS_AS(GradScaler({.growth_factor = 1.0}), core::ValueError);
  CHECK_THROWS_AS(GradScaler({.backoff_factor = 1.0}), core::ValueError);
  CHECK_THROWS_AS(GradScaler({.growth_interval = 0}), core::ValueError);
  CHECK_THROWS_AS(b.update(std::nan("")), core::ValueError);
}
