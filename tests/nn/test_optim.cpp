// Optimizers, LR schedules and gradient clipping against tests/golden/optim.json, written by
// PyTorch 1.13 (tests/golden/make_optim_golden.py): three update steps of SGD / Adam / AdamW
// from stored parameters and gradients, each schedule's lr sequence, clip_grad_norm_'s norm and
// clipped gradients. Also: state-dict round trips (resume equals uninterrupted, bitwise) and
// the errors for bad settings and mismatched state. A golden case missing from the file (or
// one the C++ does not know) fails the test.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "device/counters.h"
#include "golden_data.h"
#include "nn/adam.h"
#include "nn/clip_grad.h"
#include "nn/grad_scaler.h"
#include "nn/lr_schedule.h"
#include "nn/optimizer.h"
#include "nn/sgd.h"
#include "tensor/ops.h"

using namespace ringlet;
using namespace ringlet::nn;
using core::DType;
using ringlet::tensor::Tensor;
using json = nlohmann::json;

namespace {

const std::vector<std::string> kOptimizerCases = {"sgd_plain",
                                                  "sgd_momentum",
                                                  "sgd_momentum_dampening",
                                                  "sgd_nesterov",
                                                  "sgd_weight_decay",
                                                  "sgd_momentum_f64",
                                                  "adam_default",
                                                  "adam_weight_decay",
                                                  "adam_amsgrad",
                                                  "adamw_default",
                                                  "adamw_weight_decay_amsgrad",
                                                  "adam_f64"};
const std::vector<std::string> kScheduleCases = {"step",         "multistep", "linear_warmup",
                                                 "linear_decay", "cosine",    "warmup_cosine"};
const std::vector<std::string> kClipCases = {"l2_clipped", "l2_not_clipped", "inf_clipped",
                                             "l1_clipped"};

// allclose: |actual - expected| <= atol + rtol * |expected|.
struct Tolerance {
  double atol;
  double rtol;
};
// The project's golden tolerance for f32 (f64 scaled to its precision). The loops also reproduce
// PyTorch's rounding exactly (same op order; fused multiply-adds where PyTorch's AVX2 kernels
// use them), so check_close additionally demands bitwise equality where `exact` is set. That
// holds for golden files written on an x86 CPU with FMA, where this one was made; a file
// regenerated with PyTorch on a CPU without FMA would differ from it in the last bit.
constexpr Tolerance kF32{1e-6, 1e-5};
constexpr Tolerance kF64{1e-12, 1e-12};

const json& golden() {
  static const json data = ringlet::testing::load_golden("optim.json");
  return data;
}

// nonfinite.json's optimizers: one NaN in a gradient at the first step.
const json& nonfinite_golden() {
  static const json data = ringlet::testing::load_golden("nonfinite.json");
  return data;
}

// The cases of one section by name; fails on a name missing from the file or not expected.
std::map<std::string, json> cases_of(const char* section, const std::vector<std::string>& names,
                                     const json& file = golden()) {
  std::map<std::string, json> out;
  for (const json& c : file.at(section)) out[c.at("name").get<std::string>()] = c;
  for (const std::string& n : names) {
    CHECK_MESSAGE(out.count(n) == 1, section << ": golden case '" << n << "' is missing");
  }
  const std::set<std::string> known(names.begin(), names.end());
  for (const auto& entry : out) {
    const std::string& n = entry.first;
    CHECK_MESSAGE(known.count(n) == 1,
                  section << ": golden case '" << n << "' is not checked by this test");
  }
  return out;
}

void check_close(const std::string& what, const Tensor& actual_anywhere, const json& expected,
                 bool exact = true) {
  const Tensor actual = actual_anywhere.cpu();
  REQUIRE(actual.shape() == expected.at("shape").get<tensor::Shape>());
  REQUIRE(actual.dtype() == ringlet::testing::golden_dtype(expected));
  const Tolerance tol = actual.dtype() == DType::f32 ? kF32 : kF64;
  auto want = ringlet::testing::golden_values(expected);
  // f32 values are stored as the shortest decimal of the float: read back as float.
  if (actual.dtype() == DType::f32) {
    for (double& w : want) w = static_cast<float>(w);
  }
  const auto got = actual.to_vector<double>();
  int bad = 0;
  int inexact = 0;
  std::ostringstream report;
  report.precision(10);
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;  // NaN where PyTorch has NaN
    const double diff = got[i] == want[i] ? 0.0 : std::abs(got[i] - want[i]);
    if (!(diff <= tol.atol + tol.rtol * std::abs(want[i]))) {
      if (bad++ < 5) {
        report << "\n  [" << i << "] expected " << want[i] << ", actual " << got[i];
      }
    }
    inexact += got[i] != want[i];
  }
  CHECK_MESSAGE(bad == 0,
                what << ": " << bad << " of " << want.size() << " elements differ" << report.str());
  if (exact) {
    CHECK_MESSAGE(inexact == 0, what << ": " << inexact << " of " << want.size()
                                     << " elements are within tolerance but not bitwise equal");
  }
}

std::vector<Tensor> make_params(const json& c, core::Device device = core::Device::cpu()) {
  std::vector<Tensor> params;
  for (const json& t : c.at("params"))
    params.push_back(ringlet::testing::golden_tensor(t).to(device).requires_grad_());
  return params;
}

std::unique_ptr<Optimizer> make_optimizer(const json& c, std::vector<Tensor> params) {
  const std::string kind = c.at("optimizer").get<std::string>();
  const json& o = c.at("options");
  if (kind == "sgd") {
    SGDOptions s;
    s.lr = o.at("lr").get<double>();
    s.momentum = o.value("momentum", 0.0);
    s.dampening = o.value("dampening", 0.0);
    s.weight_decay = o.value("weight_decay", 0.0);
    s.nesterov = o.value("nesterov", false);
    return std::make_unique<SGD>(std::move(params), s);
  }
  AdamOptions a = kind == "adamw" ? AdamWOptions() : AdamOptions();
  a.lr = o.at("lr").get<double>();
  a.beta1 = o.value("beta1", a.beta1);
  a.beta2 = o.value("beta2", a.beta2);
  a.eps = o.value("eps", a.eps);
  a.weight_decay = o.value("weight_decay", a.weight_decay);
  a.amsgrad = o.value("amsgrad", false);
  if (kind == "adamw") {
    AdamWOptions w;
    static_cast<AdamOptions&>(w) = a;
    return std::make_unique<AdamW>(std::move(params), w);
  }
  REQUIRE(kind == "adam");
  return std::make_unique<Adam>(std::move(params), a);
}

// Sets each parameter's .grad to the stored gradient of `step` (none where the file has null).
void set_grads(const std::vector<Tensor>& params, const json& c, std::size_t step) {
  const json& row = c.at("grads").at(step);
  for (std::size_t i = 0; i < params.size(); ++i) {
    params[i].set_grad(row.at(i).is_null()
                           ? Tensor()
                           : ringlet::testing::golden_tensor(row.at(i)).to(params[i].device()));
  }
}

// Runs `fn`, which must throw E with a message containing `needle`.
template <class E>
void check_throws_with(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    FAIL_CHECK("no exception; expected one containing '" << needle << "'");
  } catch (const E& e) {
    CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos,
                  "message '" << e.what() << "' lacks '" << needle << "'");
  }
}

std::vector<Tensor> clone_params(const std::vector<Tensor>& params) {
  std::vector<Tensor> out;
  for (const Tensor& p : params) out.push_back(p.detach().clone().requires_grad_());
  return out;
}

void check_equal(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK_MESSAGE(a[i].to_vector<double>() == b[i].to_vector<double>(), "parameter " << i);
  }
}

}  // namespace

TEST_CASE("optimizers match PyTorch over three steps") {
  for (const auto& entry : cases_of("optimizers", kOptimizerCases)) {
    const auto& name = entry.first;
    const auto& c = entry.second;
    SUBCASE(name.c_str()) {
      const auto params = make_params(c);
      auto opt = make_optimizer(c, params);
      for (std::size_t step = 0; step < 3; ++step) {
        opt->zero_grad();
        set_grads(params, c, step);
        opt->step();
        for (std::size_t i = 0; i < params.size(); ++i) {
          check_close(name + " step " + std::to_string(step + 1) + " param " + std::to_string(i),
                      params[i], c.at("after").at(step).at(i));
        }
      }
    }
  }
}

// A NaN in one gradient element makes that element of the parameter NaN from then on, and no
// other (each optimizer's update is elementwise), as in PyTorch; on the CPU and on the emulated
// device, whose updates run the same kernels as a GPU's.
TEST_CASE("optimizers: a NaN gradient reaches the parameters as in PyTorch") {
  const std::vector<std::string> names = {"sgd_nan_grad", "adam_nan_grad", "adamw_nan_grad"};
  for (const core::Device device : {core::Device::cpu(), core::Device::emu(0)}) {
    for (const auto& entry : cases_of("optimizers", names, nonfinite_golden())) {
      const std::string& name = entry.first;  // not a structured binding: INFO captures it
      const json& c = entry.second;
      INFO(name << " on " << device);
      const auto params = make_params(c, device);
      auto opt = make_optimizer(c, params);
      for (std::size_t step = 0; step < 3; ++step) {
        opt->zero_grad();
        set_grads(params, c, step);
        opt->step();
        for (std::size_t i = 0; i < params.size(); ++i) {
          check_close(name + " step " + std::to_string(step + 1) + " param " + std::to_string(i),
                      params[i], c.at("after").at(step).at(i), /*exact=*/false);
        }
      }
    }
  }
}

TEST_CASE("LR schedules match PyTorch") {
  for (const auto& entry : cases_of("schedules", kScheduleCases)) {
    const auto& name = entry.first;
    const auto& c = entry.second;
    SUBCASE(name.c_str()) {
      Tensor w = tensor::zeros({1}).requires_grad_();
      SGD opt({w}, {.lr = c.at("lr").get<double>()});
      const json& o = c.at("options");
      const std::string kind = c.at("kind").get<std::string>();
      std::unique_ptr<LRScheduler> sched;
      if (kind == "step") {
        sched = std::make_unique<StepLR>(opt, o.at("step_size").get<std::int64_t>(),
                                         o.at("gamma").get<double>());
      } else if (kind == "multistep") {
        sched = std::make_unique<MultiStepLR>(
            opt, o.at("milestones").get<std::vector<std::int64_t>>(), o.at("gamma").get<double>());
      } else if (kind == "linear") {
        sched = std::make_unique<LinearLR>(opt, o.at("start_factor").get<double>(),
                                           o.at("end_factor").get<double>(),
                                           o.at("total_iters").get<std::int64_t>());
      } else if (kind == "cosine") {
        sched = std::make_unique<CosineAnnealingLR>(opt, o.at("T_max").get<std::int64_t>(),
                                                    o.at("eta_min").get<double>());
      } else {
        REQUIRE(kind == "warmup_cosine");
        sched = make_warmup_cosine(
            opt, o.at("warmup_iters").get<std::int64_t>(), o.at("total_iters").get<std::int64_t>(),
            o.at("start_factor").get<double>(), o.at("eta_min").get<double>());
      }
      const auto want = c.at("lrs").get<std::vector<double>>();
      std::vector<double> got = {opt.lr()};
      CHECK(sched->get_last_lr() == opt.lr());
      for (std::size_t s = 1; s < want.size(); ++s) {
        sched->step();
        CHECK(sched->get_last_lr() == opt.lr());
        got.push_back(opt.lr());
      }
      // Same formulas in the same order in double: only libm's cos could differ, by an ulp.
      for (std::size_t s = 0; s < want.size(); ++s) {
        CHECK_MESSAGE(
            std::abs(got[s] - want[s]) <= 1e-15 + 1e-13 * std::abs(want[s]),
            name << " lr after " << s << " steps: expected " << want[s] << ", got " << got[s]);
      }
    }
  }
}

TEST_CASE("clip_grad_norm_ matches PyTorch") {
  for (const auto& entry : cases_of("clip", kClipCases)) {
    const auto& name = entry.first;
    const auto& c = entry.second;
    SUBCASE(name.c_str()) {
      std::vector<Tensor> params;
      for (const json& g : c.at("grads")) {
        Tensor p = tensor::zeros(g.at("shape").get<tensor::Shape>()).requires_grad_();
        p.set_grad(ringlet::testing::golden_tensor(g));
        params.push_back(p);
      }
      const double norm_type =
          c.at("norm_type").is_string() ? INFINITY : c.at("norm_type").get<double>();
      const double total = clip_grad_norm_(params, c.at("max_norm").get<double>(), norm_type);
      const double want = c.at("total_norm").get<double>();
      // PyTorch sums in f32 with its own blocking; the sums here are in double, then rounded.
      CHECK(std::abs(total - want) <= 1e-6 * std::abs(want));
      for (std::size_t i = 0; i < params.size(); ++i) {
        // Not demanded bitwise: the norm's summation order differs from PyTorch's.
        check_close(name + " grad " + std::to_string(i), params[i].grad(), c.at("clipped").at(i),
                    /*exact=*/false);
      }
    }
  }
}

TEST_CASE("clip_grad_norm_ edge cases") {
  Tensor a = tensor::zeros({3}).requires_grad_();
  CHECK(clip_grad_norm_({a}, 1.0) == 0.0);  // no gradients: nothing to clip
  a.set_grad(tensor::from_vector({3, 4, 0}, {3}));
  check_throws_with<core::ValueError>([&] { clip_grad_norm_({a}, 1.0, -1.0); }, "norm_type");
  a.set_grad(tensor::from_vector({NAN, 1, 0}, {3}));
  check_throws_with<core::ValueError>([&] { clip_grad_norm_({a}, 1.0, 2.0, true); }, "total norm");
}

TEST_CASE("optimizer state_dict round trip: resume equals uninterrupted") {
  for (const char* name : {"sgd_momentum", "sgd_nesterov", "adam_amsgrad", "adamw_default",
                           "adam_default", "sgd_momentum_f64"}) {
    SUBCASE(name) {
      const auto cases = cases_of("optimizers", kOptimizerCases);
      const json& c = cases.at(name);
      const auto params = make_params(c);
      auto opt = make_optimizer(c, params);
      for (std::size_t step = 0; step < 2; ++step) {
        set_grads(params, c, step);
        opt->step();
      }
      const NamedState saved = opt->state_dict();
      const auto resumed_params = clone_params(params);

      set_grads(params, c, 2);  // the uninterrupted run's third step
      opt->step();

      // A fresh optimizer (other settings, as a restarted process would build it before
      // loading) picks up state and hyperparameters from the checkpoint.
      json other = c;
      other["options"]["lr"] = 0.5;
      auto fresh = make_optimizer(other, resumed_params);
      fresh->load_state_dict(saved);
      CHECK(fresh->lr() == opt->lr());
      set_grads(resumed_params, c, 2);
      fresh->step();
      check_equal(params, resumed_params);
      for (std::size_t i = 0; i < params.size(); ++i) {
        check_close(std::string(name) + " resumed param " + std::to_string(i), resumed_params[i],
                    c.at("after").at(2).at(i));
      }
    }
  }
}

TEST_CASE("state_dict keys follow PyTorch's layout") {
  Tensor a = tensor::zeros({2}).requires_grad_();
  Tensor b = tensor::zeros({3}).requires_grad_();
  Adam adam({a, b}, {.lr = 0.1, .amsgrad = true});
  b.set_grad(tensor::ones({3}));
  adam.step();
  adam.step();
  const NamedState s = adam.state_dict();
  // Parameter 0 never had a gradient, so it has no state (as in PyTorch).
  CHECK_FALSE(s.contains("state.0.exp_avg"));
  CHECK(s.tensor("state.1.exp_avg").shape() == tensor::Shape{3});
  CHECK(s.contains("state.1.exp_avg_sq"));
  CHECK(s.contains("state.1.max_exp_avg_sq"));
  CHECK(s.scalar("state.1.step") == 2);
  CHECK(s.scalar("param_groups.0.lr") == 0.1);
  CHECK(s.scalar("param_groups.0.amsgrad") == 1);
  CHECK(s.scalar("param_groups.0.beta2") == 0.999);
  // The snapshot does not follow later steps.
  const auto before = s.tensor("state.1.exp_avg").to_vector<double>();
  adam.step();
  CHECK(s.tensor("state.1.exp_avg").to_vector<double>() == before);

  SGD plain({a}, {.lr = 0.1});
  CHECK(plain.state_dict().keys() ==
        std::vector<std::string>{"param_groups.0.lr", "param_groups.0.initial_lr",
                                 "param_groups.0.momentum", "param_groups.0.dampening",
                                 "param_groups.0.weight_decay", "param_groups.0.nesterov"});
}

TEST_CASE("load_state_dict errors name the key and change nothing") {
  Tensor a = tensor::zeros({2}).requires_grad_();
  Tensor b = tensor::zeros({3}).requires_grad_();
  a.set_grad(tensor::ones({2}));
  b.set_grad(tensor::ones({3}));
  Adam adam({a, b}, {.lr = 0.1});
  adam.step();
  const NamedState adam_state = adam.state_dict();

  SGD sgd({a, b}, {.lr = 0.1, .momentum = 0.9});
  check_throws_with<core::ValueError>([&] { sgd.load_state_dict(adam_state); },
                                      "param_groups.0.momentum");
  SGD sgd2({a, b}, {.lr = 0.1, .momentum = 0.9});
  sgd2.step();
  NamedState sgd_state = sgd2.state_dict();
  sgd_state.set("state.0.exp_avg", tensor::zeros({2}));
  check_throws_with<core::ValueError>([&] { sgd.load_state_dict(sgd_state); },
                                      "unexpected key 'state.0.exp_avg'");

  // Shape mismatch: parameters swapped.
  Tensor c = tensor::zeros({3}).requires_grad_();
  Tensor d = tensor::zeros({2}).requires_grad_();
  Adam swapped({c, d}, {.lr = 0.1});
  check_throws_with<core::ShapeError>([&] { swapped.load_state_dict(adam_state); },
                                      "state.0.exp_avg");
  // Fewer parameters than the state refers to.
  Adam fewer({d}, {.lr = 0.1});
  check_throws_with<core::ValueError>([&] { fewer.load_state_dict(adam_state); },
                                      "refers to parameter 1");
  // A buffer missing from otherwise present state.
  NamedState partial;
  for (const auto& [key, value] : adam_state) {
    if (key != "state.1.exp_avg_sq") partial.set(key, value);
  }
  Adam target({a, b}, {.lr = 0.3, .beta1 = 0.5});
  check_throws_with<core::ValueError>([&] { target.load_state_dict(partial); },
                                      "missing key 'state.1.exp_avg_sq'");
  // Amsgrad loaded without its buffer.
  NamedState ams = adam_state;
  ams.set("param_groups.0.amsgrad", 1.0);
  check_throws_with<core::ValueError>([&] { target.load_state_dict(ams); },
                                      "missing key 'state.0.max_exp_avg_sq'");
  // A bad hyperparameter in the file.
  NamedState bad_beta = adam_state;
  bad_beta.set("param_groups.0.beta1", 1.5);
  check_throws_with<core::ValueError>([&] { target.load_state_dict(bad_beta); }, "beta1");
  // A scalar where a tensor belongs.
  NamedState wrong_kind = adam_state;
  wrong_kind.set("state.0.exp_avg", 1.0);
  check_throws_with<core::ValueError>([&] { target.load_state_dict(wrong_kind); },
                                      "'state.0.exp_avg' holds a scalar");
  // Nothing changed by the failed loads.
  CHECK(target.lr() == 0.3);
  CHECK(target.options().beta1 == 0.5);
  CHECK_FALSE(target.options().amsgrad);
  CHECK(target.state_dict().keys().size() == 7);  // hyperparameters only: no state yet
}

TEST_CASE("LR schedule state round trip") {
  for (const int kind : {0, 1, 2}) {
    SUBCASE(kind == 0 ? "cosine" : kind == 1 ? "warmup_cosine" : "multistep") {
      auto make = [kind](Optimizer& opt) -> std::unique_ptr<LRScheduler> {
        if (kind == 0) return std::make_unique<CosineAnnealingLR>(opt, 7, 0.01);
        if (kind == 1) return make_warmup_cosine(opt, 3, 10, 0.2, 0.0);
        return std::make_unique<MultiStepLR>(opt, std::vector<std::int64_t>{2, 6}, 0.5);
      };
      Tensor w = tensor::zeros({1}).requires_grad_();
      SGD opt({w}, {.lr = 0.4});
      auto sched = make(opt);
      for (int s = 0; s < 5; ++s) sched->step();
      const NamedState opt_state = opt.state_dict();
      const NamedState sched_state = sched->state_dict();

      Tensor w2 = tensor::zeros({1}).requires_grad_();
      SGD opt2({w2}, {.lr = 0.4});
      auto sched2 = make(opt2);
      opt2.load_state_dict(opt_state);
      sched2->load_state_dict(sched_state);
      CHECK(sched2->get_last_lr() == sched->get_last_lr());
      for (int s = 0; s < 8; ++s) {
        sched->step();
        sched2->step();
        CHECK(opt2.lr() == opt.lr());
      }
      NamedState extra = sched_state;
      extra.set("gamma", 0.1);
      check_throws_with<core::ValueError>([&] { sched2->load_state_dict(extra); },
                                          "unexpected key 'gamma'");
    }
  }
}

TEST_CASE("invalid settings are errors naming the setting") {
  Tensor w = tensor::zeros({2}).requires_grad_();
  check_throws_with<core::ValueError>([&] { SGD({w}, {.lr = -0.1}); }, "invalid learning rate");
  check_throws_with<core::ValueError>([&] { SGD({w}, {.lr = 0.1, .momentum = -1}); }, "momentum");
  check_throws_with<core::ValueError>([&] { SGD({w}, {.lr = 0.1, .weight_decay = -1}); },
                                      "weight_decay");
  check_throws_with<core::ValueError>([&] { SGD({w}, {.lr = 0.1, .nesterov = true}); }, "Nesterov");
  check_throws_with<core::ValueError>(
      [&] { SGD({w}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}); },
      "Nesterov");
  check_throws_with<core::ValueError>([&] { Adam({w}, {.lr = -1e-3}); }, "invalid learning rate");
  check_throws_with<core::ValueError>([&] { Adam({w}, {.beta1 = 1.0}); }, "invalid beta1");
  check_throws_with<core::ValueError>([&] { Adam({w}, {.beta2 = -0.1}); }, "invalid beta2");
  check_throws_with<core::ValueError>([&] { Adam({w}, {.eps = -1}); }, "invalid eps");
  AdamWOptions bad;
  bad.weight_decay = -0.1;
  check_throws_with<core::ValueError>([&] { AdamW({w}, bad); }, "AdamW: invalid weight_decay");
  SGD ok({w}, {.lr = 0.1});
  check_throws_with<core::ValueError>([&] { ok.set_lr(-1); }, "invalid learning rate");
  check_throws_with<core::ValueError>([&] { ok.set_lr(NAN); }, "invalid learning rate");
  check_throws_with<core::ValueError>([&] { SGD({w, w}, {.lr = 0.1}); }, "more than once");
  check_throws_with<core::ValueError>([&] { SGD({}, {.lr = 0.1}); }, "empty parameter list");
  const Tensor non_leaf = tensor::mul(w, 2.0);
  check_throws_with<core::ValueError>([&] { SGD({non_leaf}, {.lr = 0.1}); }, "not a leaf");
  Tensor ints = tensor::zeros({2}, DType::i64);
  check_throws_with<core::DTypeError>([&] { SGD({ints}, {.lr = 0.1}); }, "expected f32 or f64");
  // A gradient of the wrong shape is caught at step().
  w.set_grad(tensor::ones({3}));
  check_throws_with<core::ShapeError>([&] { ok.step(); }, "gradient has shape [3]");
  // Schedules.
  check_throws_with<core::ValueError>([&] { StepLR(ok, 0); }, "step_size");
  check_throws_with<core::ValueError>([&] { LinearLR(ok, 0.0); }, "start_factor");
  check_throws_with<core::ValueError>([&] { CosineAnnealingLR(ok, 0); }, "t_max");
  check_throws_with<core::ValueError>([&] { make_warmup_cosine(ok, 5, 5); }, "warmup_iters");
}

TEST_CASE("zero_grad drops or zeroes gradients; step skips parameters without one") {
  Tensor a = tensor::from_vector({1, 2}, {2}).requires_grad_();
  Tensor b = tensor::from_vector({3, 4}, {2}).requires_grad_();
  SGD opt({a, b}, {.lr = 0.5, .momentum = 0.9});
  a.set_grad(tensor::ones({2}));
  b.set_grad(tensor::ones({2}));
  const Tensor held = b.grad();
  opt.zero_grad(/*set_to_none=*/false);
  CHECK(b.grad().same(held));
  CHECK(held.to_vector<double>() == std::vector<double>{0, 0});
  opt.zero_grad();
  CHECK_FALSE(a.grad().defined());
  CHECK_FALSE(b.grad().defined());
  opt.step();  // no gradients: nothing moves, no state appears
  CHECK(a.to_vector<double>() == std::vector<double>{1, 2});
  CHECK_FALSE(opt.state_dict().contains("state.0.momentum_buffer"));
  // A real backward fills .grad; step() runs with grad mode on.
  tensor::sum(tensor::mul(a, a)).backward();
  opt.step();
  CHECK(a.to_vector<double>() == std::vector<double>{0, 0});  // 1 - 0.5*2, 2 - 0.5*4
  CHECK(b.to_vector<double>() == std::vector<double>{3, 4});
}

TEST_CASE("SGD on the emulated GPU updates exactly as on the host (momentum, nesterov, decay)") {
  using tensor::Tensor;
  tensor::Generator gen(31);
  const Tensor start = tensor::randn({257}, gen);
  const std::vector<Tensor> grads = {tensor::randn({257}, gen), tensor::randn({257}, gen),
                                     tensor::randn({257}, gen)};
  for (const bool nesterov : {false, true}) {
    CAPTURE(nesterov);
    const SGDOptions o{.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = nesterov};
    Tensor host = start.clone().requires_grad_();
    Tensor dev = start.to(core::Device::emu(0)).requires_grad_();
    SGD on_host({host}, o), on_dev({dev}, o);
    for (const Tensor& g : grads) {
      host.set_grad(g.clone());
      dev.set_grad(g.to(core::Device::emu(0)));
      on_host.step();
      on_dev.step();
    }
    CHECK(dev.cpu().to_vector<float>() == host.to_vector<float>());
  }
}

TEST_CASE("Adam and AdamW on the emulated GPU update exactly as on the host") {
  using tensor::Tensor;
  tensor::Generator gen(32);
  const Tensor start = tensor::randn({129}, gen);
  const std::vector<Tensor> grads = {tensor::randn({129}, gen), tensor::randn({129}, gen)};
  for (const bool decoupled : {false, true}) {
    for (const bool amsgrad : {false, true}) {
      CAPTURE(decoupled);
      CAPTURE(amsgrad);
      AdamOptions o;
      o.lr = 0.01;
      o.weight_decay = 0.01;
      o.amsgrad = amsgrad;
      Tensor host = start.clone().requires_grad_();
      Tensor dev = start.to(core::Device::emu(0)).requires_grad_();
      std::unique_ptr<Optimizer> on_host, on_dev;
      if (decoupled) {
        AdamWOptions w;
        static_cast<AdamOptions&>(w) = o;
        on_host = std::make_unique<AdamW>(std::vector<Tensor>{host}, w);
        on_dev = std::make_unique<AdamW>(std::vector<Tensor>{dev}, w);
      } else {
        on_host = std::make_unique<Adam>(std::vector<Tensor>{host}, o);
        on_dev = std::make_unique<Adam>(std::vector<Tensor>{dev}, o);
      }
      for (const Tensor& g : grads) {
        host.set_grad(g.clone());
        dev.set_grad(g.to(core::Device::emu(0)));
        on_host->step();
        on_dev->step();
      }
      CHECK(dev.cpu().to_vector<float>() == host.to_vector<float>());
    }
  }
}

TEST_CASE("one optimizer step updates many parameters in few launches, exactly as on the host") {
  // 34 parameters, f32 and f64 mixed: two groups. The f32 group's 26 non-empty tensors (an empty
  // one among them) take two launches (a table holds 24), the f64 group's 7 one.
  tensor::Generator gen(77);
  std::vector<Tensor> host, dev;
  for (int i = 0; i < 34; ++i) {
    const DType dtype = i % 5 == 0 ? DType::f64 : DType::f32;
    const std::int64_t n = i == 7 ? 0 : 1 + (i * 37) % 50;
    host.push_back(tensor::randn({n}, gen, dtype).requires_grad_());
    dev.push_back(host.back().detach().to(core::Device::emu(0)).requires_grad_());
  }
  for (const bool adam : {false, true}) {
    CAPTURE(adam);
    auto make = [&](const std::vector<Tensor>& params) -> std::unique_ptr<Optimizer> {
      if (adam) return std::make_unique<Adam>(params, AdamOptions{.lr = 0.01});
      return std::make_unique<SGD>(params, SGDOptions{.lr = 0.1, .momentum = 0.9});
    };
    auto on_host = make(host), on_dev = make(dev);
    for (int step = 0; step < 3; ++step) {
      for (std::size_t i = 0; i < host.size(); ++i) {
        const Tensor g = tensor::randn(host[i].shape(), gen, host[i].dtype());
        host[i].set_grad(g);
        dev[i].set_grad(g.to(core::Device::emu(0)));
      }
      const auto before = device::device_counts(core::Device::emu(0));
      on_dev->step();
      const auto used = device::device_counts(core::Device::emu(0)) - before;
      on_host->step();
      if (step > 0) CHECK(used.stream_ops == 3);  // the first step also fills the new buffers
    }
    for (std::size_t i = 0; i < host.size(); ++i) {
      CHECK(dev[i].cpu().to_vector<double>() == host[i].to_vector<double>());
    }
  }
}

TEST_CASE("clip_grad_norm_ and GradScaler on the emulated GPU act as on the host") {
  using tensor::Tensor;
  tensor::Generator gen(33);
  const Tensor a = tensor::randn({40}, gen), b = tensor::randn({3, 7}, gen);
  for (const double norm_type : {2.0, 1.0, 3.0, double(INFINITY)}) {
    CAPTURE(norm_type);
    Tensor ha = a.clone().requires_grad_(), hb = b.clone().requires_grad_();
    Tensor da = a.to(core::Device::emu(0)).requires_grad_();
    Tensor db = b.to(core::Device::emu(0)).requires_grad_();
    ha.set_grad(mul(a, 3.0));
    hb.set_grad(b.clone());
    da.set_grad(mul(a, 3.0).to(core::Device::emu(0)));
    db.set_grad(b.to(core::Device::emu(0)));
    const double host_total = clip_grad_norm_({ha, hb}, 1.5, norm_type);
    const double dev_total = clip_grad_norm_({da, db}, 1.5, norm_type);
    CHECK(dev_total == doctest::Approx(host_total).epsilon(1e-6));
    CHECK(da.grad().cpu().to_vector<float>() == ha.grad().to_vector<float>());
    CHECK(db.grad().cpu().to_vector<float>() == hb.grad().to_vector<float>());
  }
  // GradScaler: unscales in place on the device, and an inf there skips the step.
  for (const bool overflow : {false, true}) {
    CAPTURE(overflow);
    Tensor p = a.to(core::Device::emu(0)).requires_grad_();
    SGD sgd({p}, {.lr = 0.1});
    GradScaler scaler({.init_scale = 1024.0});
    std::vector<double> scaled = tensor::mul(a, 1024.0).to_vector<double>();
    if (overflow) scaled[3] = INFINITY;
    p.set_grad(tensor::from_vector(scaled, {40}).to(core::Device::emu(0)));
    scaler.unscale_(sgd);
    if (!overflow) CHECK(p.grad().cpu().to_vector<float>() == a.to_vector<float>());
    CHECK(scaler.step(sgd) == !overflow);
    scaler.update();
    CHECK((p.cpu().to_vector<float>() == a.to_vector<float>()) == overflow);
  }
}
