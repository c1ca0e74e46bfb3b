// Mixed precision (nn::Autocast): Linear and Conv2d under a bf16/f16 guard compute on rounded
// inputs and round their outputs (the same GEMM / convolution in f32 on rounded operands), and
// backward rounds the gradients at the same points; an MLP step matches PyTorch's bf16 autocast
// (tests/golden/amp.json) where plain f32 does not; f16 overflows, which GradScaler catches: the
// step is skipped and the scale backs off. Guards nest and are per thread.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include "golden_data.h"
#include "nn/autocast.h"
#include "nn/conv2d.h"
#include "nn/grad_scaler.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/sgd.h"
#include "tensor/ops.h"

using namespace ringlet;
using core::DType;
using tensor::Tensor;

namespace {

std::vector<float> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::vector<float>(c.data<float>(), c.data<float>() + c.numel());
}

// Whether every value of `t` is exactly representable in `precision`.
bool representable(const Tensor& t, DType precision) {
  return values(t) == values(t.detach().to(precision).to(DType::f32));
}

// The largest |a - b| / (atol + rtol |b|) over the elements: <= 1 is within tolerance.
double worst(const Tensor& a, const Tensor& b, double atol, double rtol) {
  const auto x = values(a), y = values(b);
  REQUIRE(x.size() == y.size());
  double out = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    out = std::max(out, std::abs(double{x[i]} - y[i]) / (atol + rtol * std::abs(double{y[i]})));
  }
  return out;
}

Tensor golden(const nlohmann::json& j) {
  return tensor::from_vector(j.at("values").get<std::vector<double>>(),
                             j.at("shape").get<tensor::Shape>(), DType::f32);
}

Tensor rounded(const Tensor& t, DType p) { return t.detach().to(p).to(DType::f32); }

struct Mlp {
  tensor::Generator gen{1};
  nn::Linear fc1{20, 16, gen};
  nn::Linear fc2{16, 5, gen};

  explicit Mlp(const nlohmann::json& g) {
    for (auto [layer, name] : {std::pair{&fc1, "fc1"}, std::pair{&fc2, "fc2"}}) {
      nn::StateDict d;
      d.insert("weight", golden(g.at(std::string(name) + "_weight")));
      d.insert("bias", golden(g.at(std::string(name) + "_bias")));
      layer->load_state_dict(d);
    }
  }
  Tensor forward(const Tensor& x) { return fc2.forward(tensor::relu(fc1.forward(x))); }
  std::vector<Tensor> parameters() {
    return {fc1.parameters()[0], fc1.parameters()[1], fc2.parameters()[0], fc2.parameters()[1]};
  }
};

}  // namespace

TEST_CASE("under autocast Linear rounds inputs, output and gradients; parameters stay f32") {
  tensor::Generator gen(3);
  nn::Linear fc(16, 8, gen);
  Tensor x = tensor::randn({4, 16}, gen);
  x.requires_grad_();
  for (DType p : {DType::bf16, DType::f16}) {
    CAPTURE(p);
    fc.zero_grad();
    x.set_grad(Tensor());
    Tensor y;
    {
      nn::Autocast amp(p);
      CHECK(nn::autocast_precision() == p);
      y = fc.forward(x);
    }
    CHECK(nn::autocast_precision() == DType::f32);
    CHECK(y.dtype() == DType::f32);
    CHECK(representable(y, p));
    // The same GEMM on the rounded operands, in f32: what "f32 accumulation" means.
    const Tensor expect = tensor::linear(x.detach().to(p).to(DType::f32),
                                         fc.parameters()[0].detach().to(p).to(DType::f32),
                                         fc.parameters()[1].detach().to(p).to(DType::f32))
                              .to(p)
                              .to(DType::f32);
    CHECK(values(y) == values(expect));
    tensor::sum(tensor::mul(y, y)).backward();
    CHECK(fc.parameters()[0].dtype() == DType::f32);
    CHECK(representable(fc.parameters()[0].grad(), p));
    CHECK(representable(x.grad(), p));
  }
  const Tensor plain = fc.forward(x);
  CHECK_FALSE(representable(plain, DType::bf16));  // without a guard nothing is rounded
}

TEST_CASE("under autocast Conv2d is the f32 convolution of rounded operands, rounded") {
  tensor::Generator gen(4);
  nn::Conv2d conv(3, 4, 3, gen, {.padding = 1});
  Tensor x = tensor::randn({2, 3, 6, 6}, gen);
  x.requires_grad_();
  for (DType p : {DType::bf16, DType::f16}) {
    CAPTURE(p);
    conv.zero_grad();
    x.set_grad(Tensor());
    Tensor y;
    {
      nn::Autocast amp(p);
      y = conv.forward(x);
    }
    tensor::Conv2dOptions o;
    o.padding = {1, 1};
    const Tensor expect = rounded(tensor::conv2d(rounded(x, p), rounded(conv.parameters()[0], p),
                                                 rounded(conv.parameters()[1], p), o),
                                  p);
    CHECK(values(y) == values(expect));
    tensor::sum(tensor::mul(y, y)).backward();
    CHECK(representable(conv.parameters()[0].grad(), p));
    CHECK(representable(conv.parameters()[1].grad(), p));
    CHECK(representable(x.grad(), p));
  }
}

TEST_CASE("an MLP step under bf16 autocast matches PyTorch's; plain f32 does not") {
  const auto g = testing::load_golden("amp.json");
  const Tensor x = golden(g.at("input"));
  const Tensor labels =
      tensor::from_vector(g.at("labels").get<std::vector<double>>(),
                          {static_cast<std::int64_t>(g.at("labels").size())}, DType::i64);
  Mlp model(g);
  struct Step {
    Tensor logits, loss;
    std::vector<Tensor> grads;
  };
  auto step = [&](DType precision) {
    for (Tensor& p : model.parameters()) p.set_grad(Tensor());
    Step s;
    {
      nn::Autocast amp(precision);
      s.logits = model.forward(x);
    }
    s.loss = tensor::cross_entropy(s.logits, labels, tensor::Reduction::mean);
    s.loss.backward();
    for (const Tensor& p : model.parameters()) s.grads.push_back(p.grad().clone());
    return s;
  };
  const Step amp = step(DType::bf16), full = step(DType::f32);
  const Tensor expect_logits = golden(g.at("logits"));
  // The forward is the same arithmetic as PyTorch's (f32 sums of bf16 products, rounded once).
  CHECK(worst(amp.logits, expect_logits, 1e-6, 1e-6) <= 1);
  CHECK(std::abs(amp.loss.item() - g.at("loss").get<double>()) <= 1e-5);
  // Plain f32 is off by bf16's rounding (relative steps of 2^-8), far beyond that.
  CHECK(worst(full.logits, expect_logits, 1e-6, 1e-6) > 100);
  // Gradients: PyTorch sums their bf16 products in another order (and rounds partial sums), so
  // the two land a few bf16 steps apart: within 2^-6 of the gradient's largest magnitude (a bf16
  // step there is 2^-8 of it).
  const char* names[] = {"fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"};
  for (std::size_t i = 0; i < 4; ++i) {
    CAPTURE(std::string(names[i]));
    const Tensor expect = golden(g.at(std::string("grad_") + names[i]));
    const double scale = tensor::max(tensor::abs(expect)).item();
    CHECK(worst(amp.grads[i], expect, scale / 64, 0) <= 1);
    CHECK(representable(amp.grads[i], DType::bf16));
  }
}

TEST_CASE("f16 overflows to inf; GradScaler skips that step and backs the scale off") {
  tensor::Generator gen(5);
  nn::Linear fc(8, 4, gen);
  const Tensor x = tensor::randn({16, 8}, gen);
  const Tensor target = tensor::randn({16, 4}, gen);
  {
    nn::Autocast amp(DType::f16);
    const Tensor big = fc.forward(tensor::mul(x, tensor::full({1}, 1e5)));
    CHECK_FALSE(std::isfinite(tensor::max(tensor::abs(big)).item()));  // f16 ends at 65504
  }
  nn::SGD opt(fc.parameters(), {.lr = 0.1});
  // 2^24 times the loss: the f16 gradients of the output overflow.
  nn::GradScaler scaler({.init_scale = 16777216.0});
  const std::vector<float> before = values(fc.parameters()[0]);
  auto iteration = [&] {
    opt.zero_grad();
    Tensor y;
    {
      nn::Autocast amp(DType::f16);
      y = fc.forward(x);
    }
    scaler.scale(tensor::mse_loss(y, target)).backward();
    const bool stepped = scaler.step(opt);
    scaler.update();
    return stepped;
  };
  CHECK_FALSE(iteration());
  CHECK(values(fc.parameters()[0]) == before);
  CHECK(scaler.get_scale() == 8388608.0);
  // Backing off by half each time, the scale comes down to where the gradients fit.
  int skipped = 1;
  while (!iteration()) {
    ++skipped;
    REQUIRE(skipped < 30);
  }
  CHECK(skipped > 1);
  CHECK(values(fc.parameters()[0]) != before);
  const Tensor plain_grad = [&] {  // without autocast the same scale is no problem in f32
    opt.zero_grad();
    tensor::mul(tensor::mse_loss(fc.forward(x), target), tensor::full({1}, 16777216.0)).backward();
    return fc.parameters()[0].grad();
  }();
  CHECK(std::isfinite(tensor::max(tensor::abs(plain_grad)).item()));
}

TEST_CASE("autocast guards nest, are per thread, and refuse other precisions") {
  {
    nn::Autocast outer(DType::bf16);
    {
      nn::Autocast inner(DType::f32);  // off inside
      CHECK(nn::autocast_precision() == DType::f32);
    }
    CHECK(nn::autocast_precision() == DType::bf16);
    DType seen = DType::bf16;
    std::thread([&] { seen = nn::autocast_precision(); }).join();
    CHECK(seen == DType::f32);
  }
  CHECK(nn::autocast_precision() == DType::f32);
  CHECK_THROWS_WITH_AS(nn::Autocast{DType::f64}, doctest::Contains("bf16, f16 or f32"),
                       core::ValueError);
  nn::Autocast amp(DType::f16);
  CHECK_THROWS_AS(nn::autocast(tensor::zeros({2}, DType::f64)), core::DTypeError);
  CHECK_FALSE(nn::autocast(Tensor()).defined());
}

TEST_CASE("autocast on the emulated GPU rounds exactly as on the host") {
  for (const DType precision : {DType::bf16, DType::f16}) {
    CAPTURE(precision);
    tensor::Generator gen(41), gen2(41);
    nn::Linear host(6, 4, gen), dev(6, 4, gen2);
    dev.to(core::Device::emu(0));
    const Tensor x = tensor::randn({3, 6}, gen);
    const Tensor hx = x.clone().requires_grad_(), dx = x.to(core::Device::emu(0)).requires_grad_();
    Tensor hy, dy;
    {
      nn::Autocast amp(precision);
      hy = host.forward(hx);
      dy = dev.forward(dx);
    }
    CHECK(dy.cpu().to_vector<float>() == hy.to_vector<float>());
    tensor::sum(tensor::mul(hy, hy)).backward();
    tensor::sum(tensor::mul(dy, dy)).backward();
    CHECK(dx.grad().cpu().to_vector<float>() == hx.grad().to_vector<float>());
  }
}
