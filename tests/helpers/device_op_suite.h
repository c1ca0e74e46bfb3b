// The op suite every device runs against the CPU kernels on the same inputs: included by
// test_device_ops.cpp (the emulated device, in every `make test`) and by test_cuda.cpp (a
// real GPU, skipped without one). The including file defines suite_device().
// Tolerances: on the emulated device the arithmetic is the CPU's, so most results are compared
// bit for bit; where the CPU kernel sums in another order (four partial sums in sum/mean,
// blocked GEMMs in conv2d, the fused batch norm) each case states its tolerance. On a GPU,
// math functions (exp, log, tanh, pow) may differ in the last bits (CUDA's libdevice is
// accurate to a few ulp), so they get suite_tolerance().
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "device/stream.h"
#include "tensor/ops.h"

namespace suite {

using namespace ringlet;
using namespace ringlet::tensor;
using namespace ringlet::core;

core::Device suite_device();
double suite_tolerance();  // relative, for math functions; 0 = bitwise

inline void check_same(const Tensor& device_result, const Tensor& cpu_result, double tol,
                       const std::string& what) {
  INFO(what);
  REQUIRE(device_result.device() == suite_device());
  const Tensor host = device_result.cpu();
  REQUIRE(host.shape() == cpu_result.shape());
  REQUIRE(host.dtype() == cpu_result.dtype());
  const auto got = host.to_vector<double>(), want = cpu_result.to_vector<double>();
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool same = (std::isnan(got[i]) && std::isnan(want[i])) || got[i] == want[i] ||
                      std::abs(got[i] - want[i]) <= tol * std::max(1.0, std::abs(want[i]));
    if (!same && bad++ < 3) MESSAGE("element ", i, ": device ", got[i], ", cpu ", want[i]);
  }
  CHECK(bad == 0);
}

inline Tensor on_device(const Tensor& t) { return t.to(suite_device()); }

// Runs `check(tol)` on the deterministic path (the CPU's decomposition: bit for bit on the
// emulated device, `gemm_tol` on a GPU) and on the fast path (batched GEMMs: sums in another
// order, within `fast_tol` of the CPU).
template <class F>
void on_both_paths(double gemm_tol, double fast_tol, F check) {
  {
    INFO("deterministic path");
    DeterministicGuard exact(true);
    check(suite_tolerance() == 0 ? 0.0 : gemm_tol);
  }
  INFO("fast path");
  DeterministicGuard fast(false);
  check(std::max(fast_tol, suite_tolerance() == 0 ? 0.0 : gemm_tol));
}

// Inputs: a contiguous tensor, a transposed (non-contiguous) view, and a broadcast row.
struct Inputs {
  Tensor a, b, a_t, row;
};
inline Inputs inputs(DType dtype, std::uint64_t seed) {
  Generator gen(seed);
  Inputs in;
  // Positive values keep log, sqrt and pow defined; integers are small.
  const auto make = [&](const Shape& s) {
    Tensor x = add(rand(s, gen), 0.25);
    if (!core::is_floating(dtype)) x = mul(x, 20.0);
    return x.to(dtype);
  };
  in.a = make({4, 6});
  in.b = make({4, 6});
  in.a_t = make({6, 4}).transpose(0, 1);
  in.row = make({6});
  return in;
}

}  // namespace suite

TEST_CASE("device binary ops match the CPU: every dtype, broadcasting, non-contiguous views") {
  using namespace suite;
  const std::vector<DType> dtypes = {DType::f32, DType::f64, DType::i64, DType::i32, DType::u8};
  for (const DType dtype : dtypes) {
    const Inputs in = inputs(dtype, 11);
    const Tensor da = on_device(in.a), db = on_device(in.b), dt = on_device(in.a_t),
                 dr = on_device(in.row);
    const std::string d = std::string(core::dtype_name(dtype));
    check_same(add(da, db), add(in.a, in.b), 0, "add " + d);
    check_same(sub(dt, dr), sub(in.a_t, in.row), 0, "sub (view, broadcast) " + d);
    check_same(mul(dr, dt), mul(in.row, in.a_t), 0, "mul (broadcast, view) " + d);
    check_same(maximum(da, dt), maximum(in.a, in.a_t), 0, "maximum " + d);
    check_same(minimum(da, dr), minimum(in.a, in.row), 0, "minimum " + d);
    check_same(lt(da, db), lt(in.a, in.b), 0, "lt " + d);
    check_same(eq(dt, dt), eq(in.a_t, in.a_t), 0, "eq " + d);
    check_same(ge(da, dr), ge(in.a, in.row), 0, "ge " + d);
    if (core::is_floating(dtype)) {
      check_same(div(da, dt), div(in.a, in.a_t), 0, "div " + d);
      check_same(pow(da, dr), pow(in.a, in.row), suite_tolerance(), "pow " + d);
      check_same(add(da, 2.5), add(in.a, 2.5), 0, "add scalar " + d);
    } else {
      CHECK_THROWS_AS(div(da, db), DTypeError);
    }
  }
}

TEST_CASE("device unary ops and their gradients match the CPU") {
  using namespace suite;
  for (const DType dtype : {DType::f32, DType::f64}) {
    const Inputs in = inputs(dtype, 12);
    const Tensor x = sub(in.a_t, 0.75);  // both signs, non-contiguous
    const std::vector<std::pair<const char*, Tensor (*)(const Tensor&)>> ops = {
        {"neg", neg},   {"exp", exp},         {"abs", abs},
        {"relu", relu}, {"sigmoid", sigmoid}, {"tanh", tanh}};
    for (const auto& [name, fn] : ops) {
      const Tensor cx = x.detach().clone().requires_grad_(), dx = on_device(x).requires_grad_();
      const Tensor cy = fn(cx), dy = fn(dx);
      const double tol =
          std::string(name) == "neg" || std::string(name) == "abs" || std::string(name) == "relu"
              ? 0
              : suite_tolerance();
      check_same(dy, cy, tol, std::string(name) + " forward");
      sum(mul(cy, cy)).backward();
      sum(mul(dy, dy)).backward();
      check_same(dx.grad(), cx.grad(), tol, std::string(name) + " backward");
    }
    const Tensor pos = in.a;
    check_same(log(on_device(pos)), log(pos), suite_tolerance(), "log");
    check_same(sqrt(on_device(pos)), sqrt(pos), 0, "sqrt");
    check_same(clamp(on_device(x), -0.2, 0.3), clamp(x, -0.2, 0.3), 0, "clamp");
    check_same(pow(on_device(pos), 1.5), pow(pos, 1.5), suite_tolerance(), "pow scalar");
  }
}

TEST_CASE("device broadcasting gradients reduce like the CPU's (sum_to)") {
  using namespace suite;
  const Inputs in = inputs(DType::f64, 13);
  const Tensor ca = in.a.detach().clone().requires_grad_();
  const Tensor cr = in.row.detach().clone().requires_grad_();
  const Tensor da = on_device(in.a).requires_grad_(), dr = on_device(in.row).requires_grad_();
  sum(mul(add(ca, cr), cr)).backward();
  sum(mul(add(da, dr), dr)).backward();
  check_same(da.grad(), ca.grad(), 0, "grad of the full operand");
  check_same(dr.grad(), cr.grad(), 1e-12, "grad of the broadcast row (a sum)");
}

TEST_CASE("device fill, copy, dtype conversion, clone of a view, where and cat") {
  using namespace suite;
  const Inputs in = inputs(DType::f32, 14);
  const Tensor dt = on_device(in.a_t);
  check_same(dt.contiguous(), in.a_t.contiguous(), 0, "contiguous of a transposed view");
  for (const DType to : {DType::f64, DType::f16, DType::bf16, DType::i32, DType::u8}) {
    check_same(dt.to(to), in.a_t.to(to), 0,
               std::string("to(") + std::string(core::dtype_name(to)) + ")");
  }
  Tensor z = zeros({3, 5}, DType::i64, suite_device());
  fill_(z, 7.0);
  check_same(z, full({3, 5}, 7.0, DType::i64), 0, "fill");
  const Tensor cond = gt(in.a, in.b);
  check_same(where(on_device(cond), on_device(in.a), on_device(in.row)), where(cond, in.a, in.row),
             0, "where");
  check_same(cat({on_device(in.a), dt}, 0), cat({in.a, in.a_t}, 0), 0, "cat");
  Tensor target = zeros({4, 6}, DType::f32, suite_device());
  copy_(target, in.row);  // from the host, broadcast
  check_same(target, expand(in.row, {4, 6}).contiguous(), 0, "copy_ from the host");
  Tensor acc = on_device(in.a);
  add_scaled_(acc, on_device(in.b), -0.5);
  Tensor host_acc = in.a.clone();
  add_scaled_(host_acc, in.b, -0.5);
  check_same(acc, host_acc, 0, "add_scaled_");
}

TEST_CASE("ops refuse operands on two devices, naming both") {
  using namespace suite;
  const Tensor host = ones({3});
  const Tensor dev = on_device(host);
  try {
    (void)add(host, dev);
    FAIL("add across devices did not throw");
  } catch (const DeviceError& e) {
    const std::string what = e.what();
    CHECK(what.find("cpu") != std::string::npos);
    CHECK(what.find(suite_device().str()) != std::string::npos);
  }
}

namespace suite {

// Runs fn on CPU copies and on device copies of `inputs` (all requiring grad), backpropagates
// sum(out * weights) through both, and compares the outputs and every gradient.
template <class Fn>
void check_op(const std::string& what, const std::vector<Tensor>& inputs, Fn fn, double tol) {
  std::vector<Tensor> host, dev;
  for (const Tensor& t : inputs) {
    host.push_back(t.detach().clone().requires_grad_());
    dev.push_back(on_device(t).requires_grad_());
  }
  const Tensor host_out = fn(host), dev_out = fn(dev);
  check_same(dev_out, host_out, tol, what + " forward");
  Generator gen(99);
  const Tensor weights = rand(host_out.shape(), gen, host_out.dtype());
  sum(mul(host_out, weights)).backward();
  sum(mul(dev_out, on_device(weights))).backward();
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check_same(dev[i].grad(), host[i].grad(), tol,
               what + " gradient of input " + std::to_string(i));
  }
}

}  // namespace suite

TEST_CASE("device matmul and linear match the CPU (GEMM: OpenBLAS on emu, cuBLAS on a GPU)") {
  using namespace suite;
  Generator gen(21);
  const double tol = suite_tolerance() == 0 ? 0 : 1e-4;  // GPUs sum in another order
  for (const DType dtype : {DType::f32, DType::f64}) {
    const Tensor a = randn({5, 7}, gen, dtype), b = randn({7, 3}, gen, dtype);
    const Tensor batched = randn({2, 5, 7}, gen, dtype), bt = randn({3, 7}, gen, dtype);
    check_op(
        "matmul", {a, b}, [](auto& v) { return matmul(v[0], v[1]); }, tol);
    check_op(
        "matmul batch x matrix", {batched, b}, [](auto& v) { return matmul(v[0], v[1]); }, tol);
    check_op(
        "matmul with a transposed view", {a, bt},
        [](auto& v) { return matmul(v[0], v[1].transpose(0, 1)); }, tol);
    const Tensor w = randn({4, 7}, gen, dtype), bias = randn({4}, gen, dtype);
    check_op(
        "linear", {a, w, bias}, [](auto& v) { return linear(v[0], v[1], v[2]); }, tol);
    // The bias and the ReLU in one epilogue on a device: relu(linear(...)) on the CPU.
    check_op(
        "linear + relu", {a, w, bias},
        [](auto& v) { return linear(v[0], v[1], v[2], Activation::relu); }, tol);
  }
}

TEST_CASE("device conv2d and max_pool2d match the CPU, forward and backward") {
  using namespace suite;
  Generator gen(22);
  const Tensor x = randn({2, 3, 9, 8}, gen, DType::f64);
  const Tensor w = randn({4, 3, 3, 3}, gen, DType::f64), b = randn({4}, gen, DType::f64);
  on_both_paths(1e-4, 1e-12, [&](double tol) {
    check_op(
        "conv2d", {x, w, b}, [](auto& v) { return conv2d(v[0], v[1], v[2]); }, tol);
    check_op(
        "conv2d stride 2, padding 1, dilation 2", {x, w},
        [](auto& v) {
          return conv2d(v[0], v[1], {},
                        Conv2dOptions{.stride = {2, 2}, .padding = {1, 1}, .dilation = {2, 2}});
        },
        tol);
    // The bias and the ReLU in one epilogue on a device: relu(conv2d(...)) on the CPU.
    check_op(
        "conv2d + relu", {x, w, b},
        [](auto& v) { return conv2d(v[0], v[1], v[2], {}, kernels::Activation::relu); }, tol);
  });
  check_op(
      "max_pool2d 2x2", {x}, [](auto& v) { return max_pool2d(v[0], Pool2dOptions{}); }, 0);
  check_op(
      "max_pool2d 3x3 stride 2 padding 1", {x},
      [](auto& v) {
        return max_pool2d(v[0],
                          Pool2dOptions{.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
      },
      0);
}

TEST_CASE("device softmax, log_softmax, cross_entropy and argmax match the CPU") {
  using namespace suite;
  Generator gen(23);
  const double tol = suite_tolerance();
  for (const DType dtype : {DType::f32, DType::f64}) {
    const Tensor x = randn({6, 5}, gen, dtype);
    check_op(
        "softmax dim 1", {x}, [](auto& v) { return softmax(v[0], 1); }, tol);
    check_op(
        "log_softmax dim 0", {x}, [](auto& v) { return log_softmax(v[0], 0); }, tol);
    const Tensor labels = from_vector({0, 4, 2, 2, 1, 3}, {6}, DType::i64);
    for (const Reduction r : {Reduction::mean, Reduction::sum, Reduction::none}) {
      // Summing the per-sample losses: the CPU adds with four partial sums, the device in
      // order, so the reduced losses may differ in the last bit.
      check_op(
          "cross_entropy", {x},
          [&](auto& v) { return cross_entropy(v[0], labels.to(v[0].device()), r, 0.1); },
          r == Reduction::none ? tol : std::max(tol, 1e-6));
    }
    check_same(argmax(on_device(x), 1), argmax(x, 1), 0, "argmax");
    check_same(max(on_device(x), 0).first, max(x, 0).first, 0, "max values");
  }
  // A bad label is found on the device: no read at the op, the next synchronization names it
  // (then it is cleared), as a CUDA device assert surfaces.
  const Tensor x = randn({2, 3}, gen);
  const Tensor bad = from_vector({0, 3}, {2}, DType::i64);
  Tensor loss;
  CHECK_NOTHROW(loss = cross_entropy(on_device(x), on_device(bad)));
  CHECK_THROWS_WITH_AS(loss.item(),
                       doctest::Contains("cross_entropy: target[1] = 3 is out of range for 3 "
                                         "classes (expected [0, 3); found on "),
                       ValueError);
  CHECK(std::isfinite(
      cross_entropy(on_device(x), on_device(from_vector({0, 2}, {2}, DType::i64))).item()));
  // nll_loss gathers, and the gather's own bounds check reads back: the label's error is
  // reported there, at that synchronization.
  const Tensor negative = from_vector({-5, 1}, {2}, DType::i64);
  const auto nll = [&] {
    nll_loss(log_softmax(on_device(x), 1), on_device(negative));
    device::synchronize(suite_device());
  };
  CHECK_THROWS_WITH_AS(nll(), doctest::Contains("nll_loss: target[0] = -5 is out of range"),
                       ValueError);
}

TEST_CASE("device batch_norm matches the CPU in training and evaluation") {
  using namespace suite;
  Generator gen(24);
  const double tol = suite_tolerance() == 0 ? 0 : 1e-9;  // the CPU's arithmetic on emu
  const Tensor x = randn({4, 3, 5, 5}, gen, DType::f64);
  const Tensor w = rand({3}, gen, DType::f64), b = randn({3}, gen, DType::f64);
  // The normalization and the ReLU in one kernel on a device: relu(batch_norm(...)) on the CPU.
  check_op(
      "batch_norm + relu", {x, w, b},
      [](auto& v) {
        return batch_norm(v[0], Tensor(), Tensor(), v[1], v[2], true, 0.1, 1e-5, {},
                          Activation::relu);
      },
      tol);
  check_op(
      "batch_norm f32 without affine", {x.to(DType::f32)},
      [](auto& v) {
        return batch_norm(v[0], Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
      },
      tol);
  for (const bool training : {true, false}) {
    CAPTURE(training);
    Tensor host_mean = zeros({3}, DType::f64), host_var = ones({3}, DType::f64);
    Tensor dev_mean = on_device(host_mean), dev_var = on_device(host_var);
    check_op(
        "batch_norm", {x, w, b},
        [&](auto& v) {
          const bool on_host = v[0].device().is_cpu();
          return batch_norm(v[0], on_host ? host_mean : dev_mean, on_host ? host_var : dev_var,
                            v[1], v[2], training, 0.1, 1e-5);
        },
        1e-9);
    check_same(dev_mean, host_mean, 1e-9, "running mean");  // twice: both runs updated them
    check_same(dev_var, host_var, 1e-9, "running var");
  }
}

TEST_CASE(
    "device batch_norm with a stats reducer (SyncBatchNorm) matches the CPU, empty batch too") {
  using namespace suite;
  Generator gen(25);
  const double tol = suite_tolerance() == 0 ? 0 : 1e-9;  // the CPU's arithmetic on emu
  // Stands in for the other ranks (a fixed contribution, so that the global statistics differ
  // from the local ones) and records what this rank's sums were.
  std::vector<std::vector<double>> calls;
  const StatsReducer others = [&](std::vector<double>& v) {
    calls.push_back(v);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = 2 * v[i] + 1 + static_cast<double>(i);
  };
  // An empty batch still takes part in every reduction, as a rank with no samples must.
  for (const std::int64_t batch : {4, 0}) {
    CAPTURE(batch);
    const Tensor x = randn({batch, 3, 5, 5}, gen, DType::f64);
    const Tensor w = rand({3}, gen, DType::f64), b = randn({3}, gen, DType::f64);
    Tensor host_mean = zeros({3}, DType::f64), host_var = ones({3}, DType::f64);
    Tensor dev_mean = on_device(host_mean), dev_var = on_device(host_var);
    calls.clear();
    check_op(
        "synchronized batch_norm", {x, w, b},
        [&](auto& v) {
          const bool on_host = v[0].device().is_cpu();
          return batch_norm(v[0], on_host ? host_mean : dev_mean, on_host ? host_var : dev_var,
                            v[1], v[2], true, 0.1, 1e-5, others);
        },
        tol);
    check_same(dev_mean, host_mean, tol, "running mean");
    check_same(dev_var, host_var, tol, "running var");
    // The CPU's forward (sums and count, then centered squares), the device's forward, then
    // both backwards (sum(dy) and sum(dy * xhat)): the same values crossed in the same order.
    REQUIRE(calls.size() == 6);
    const std::vector<std::size_t> sizes = {4, 3, 4, 3, 6, 6};
    for (std::size_t i = 0; i < calls.size(); ++i) CHECK(calls[i].size() == sizes[i]);
    for (const auto& [cpu, dev] : {std::pair{0, 2}, std::pair{1, 3}, std::pair{4, 5}}) {
      check_same(on_device(from_vector(calls[dev], {std::int64_t(calls[dev].size())}, DType::f64)),
                 from_vector(calls[cpu], {std::int64_t(calls[cpu].size())}, DType::f64), tol,
                 "the sums reduced");
    }
  }
}

TEST_CASE("device avg_pool2d, gather, index_select, nll_loss and mse_loss match the CPU") {
  using namespace suite;
  Generator gen(25);
  const Tensor x = randn({2, 3, 7, 6}, gen, DType::f64);
  check_op(
      "avg_pool2d 2x2", {x}, [](auto& v) { return avg_pool2d(v[0], Pool2dOptions{}); }, 0);
  check_op(
      "avg_pool2d 3x3 stride 2 padding 1", {x},
      [](auto& v) {
        return avg_pool2d(v[0],
                          Pool2dOptions{.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
      },
      0);
  const Tensor m = randn({4, 5}, gen, DType::f64);
  const Tensor index = from_vector({0, 4, 4, 1, 2, 2, 3, 0}, {4, 2}, DType::i64);
  check_op(
      "gather dim 1", {m}, [&](auto& v) { return gather(v[0], 1, index.to(v[0].device())); }, 0);
  const Tensor rows = from_vector({3, 0, 3}, {3}, DType::i64);
  check_op(
      "index_select dim 0", {m},
      [&](auto& v) { return index_select(v[0], 0, rows.to(v[0].device())); }, 0);
  const Tensor labels = from_vector({1, 4, 0, 2}, {4}, DType::i64);
  check_op(
      "nll_loss", {m},
      [&](auto& v) { return nll_loss(log_softmax(v[0], 1), labels.to(v[0].device())); }, 1e-12);
  const Tensor target = randn({4, 5}, gen, DType::f64);
  check_op(
      "mse_loss", {m, target}, [](auto& v) { return mse_loss(v[0], v[1]); }, 1e-12);
  const Tensor out_of_range = from_vector({0, 5, 0, 0, 0, 0, 0, 0}, {4, 2}, DType::i64);
  try {
    (void)gather(on_device(m), 1, on_device(out_of_range));
    FAIL("an out-of-range index was accepted");
  } catch (const ValueError& e) {
    CHECK(std::string(e.what()).find("index 5 at position [0, 1]") != std::string::npos);
  }
}

TEST_CASE("device max/min along a dim route the gradient like the CPU") {
  using namespace suite;
  Generator gen(26);
  const Tensor x = randn({4, 6}, gen, DType::f64);
  check_op(
      "max dim 1", {x}, [](auto& v) { return max(v[0], 1).first; }, 0);
  check_op(
      "min dim 0 keepdim", {x}, [](auto& v) { return min(v[0], 0, true).first; }, 0);
}

TEST_CASE("device dropout: a counter-based mask, the same for a seed on every device") {
  using namespace suite;
  Generator gen(27);
  const Tensor x = add(rand({64, 50}, gen), 0.5);  // no zeros, so a zero output means dropped
  const auto run = [&](core::Device device, std::uint64_t seed) {
    Generator g(seed);
    const Tensor in = x.to(device).requires_grad_();
    const Tensor out = dropout(in, 0.3, true, g);
    sum(mul(out, 2.0)).backward();
    return std::pair{out.cpu(), in.grad().cpu()};
  };
  const auto [out, grad] = run(suite_device(), 5);
  const auto v = out.to_vector<float>(), xv = x.to_vector<float>(), gv = grad.to_vector<float>();
  std::size_t kept = 0;
  bool scaled = true;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] == 0.0f) {
      scaled = scaled && gv[i] == 0.0f;
      continue;
    }
    ++kept;
    scaled = scaled && v[i] == xv[i] * static_cast<float>(1.0 / 0.7) &&
             gv[i] == 2.0f * static_cast<float>(1.0 / 0.7);
  }
  CHECK(scaled);
  CHECK(kept > 0.65 * 3200);  // keep 0.7 of 3,200
  CHECK(kept < 0.75 * 3200);
  CHECK(run(suite_device(), 5).first.to_vector<float>() == v);  // the seed decides
  CHECK(run(suite_device(), 6).first.to_vector<float>() != v);
  // Every device draws the same mask: a GPU's equals the emulated one's.
  if (!suite_device().is_emu()) CHECK(run(core::Device::emu(0), 5).first.to_vector<float>() == v);
}

TEST_CASE("device gradients of binary ops, the rest of the unary ops, where, cat, to(dtype)") {
  using namespace suite;
  Generator gen(28);
  const Tensor a = add(rand({4, 6}, gen, DType::f64), 0.5);
  const Tensor row = add(rand({6}, gen, DType::f64), 0.5);
  const double tol = suite_tolerance();
  check_op(
      "add", {a, row}, [](auto& v) { return add(v[0], v[1]); }, 1e-12);
  check_op(
      "sub", {a, row}, [](auto& v) { return sub(v[0], v[1]); }, 1e-12);
  check_op(
      "mul", {a, row}, [](auto& v) { return mul(v[0], v[1]); }, 1e-12);
  check_op(
      "div", {a, row}, [](auto& v) { return div(v[0], v[1]); }, 1e-12);
  check_op(
      "pow", {a, row}, [](auto& v) { return pow(v[0], v[1]); }, std::max(tol, 1e-12));
  check_op(
      "maximum", {a, row}, [](auto& v) { return maximum(v[0], v[1]); }, 1e-12);
  check_op(
      "minimum", {a, row}, [](auto& v) { return minimum(v[0], v[1]); }, 1e-12);
  check_op(
      "log", {a}, [](auto& v) { return log(v[0]); }, tol);
  check_op(
      "sqrt", {a}, [](auto& v) { return sqrt(v[0]); }, tol);
  check_op(
      "clamp", {a}, [](auto& v) { return clamp(v[0], 0.7, 1.2); }, 0);
  check_op(
      "pow scalar", {a}, [](auto& v) { return pow(v[0], 1.5); }, tol);
  const Tensor cond = gt(a, full({}, 1.0, DType::f64));
  check_op(
      "where", {a, row}, [&](auto& v) { return where(cond.to(v[0].device()), v[0], v[1]); }, 1e-12);
  check_op(
      "cat", {a, a},
      [](auto& v) {
        return cat({v[0], mul(v[1], 2.0)}, 1);
      },
      0);
  check_op(
      "to(f32) and back", {a}, [](auto& v) { return mul(v[0].to(DType::f32).to(DType::f64), 2.0); },
      0);
  check_op(
      "full max", {a}, [](auto& v) { return max(v[0]); }, 0);
  check_op(
      "full min of ties", {full({3, 2}, 2.0, DType::f64)}, [](auto& v) { return min(v[0]); }, 0);
  check_op(
      "var", {a}, [](auto& v) { return var(v[0], {1}, true, false); }, 1e-12);
  // A convolution deep enough (8 x 3 x 3 = 72 rows) for the CPU's batched GEMM path.
  const Tensor x = randn({3, 8, 6, 5}, gen, DType::f64);
  const Tensor w = randn({5, 8, 3, 3}, gen, DType::f64), b = randn({5}, gen, DType::f64);
  on_both_paths(1e-4, 1e-12, [&](double tol) {
    check_op(
        "conv2d, batched GEMM", {x, w, b},
        [](auto& v) {
          return conv2d(v[0], v[1], v[2], Conv2dOptions{.padding = {1, 1}});
        },
        tol);
  });
}
