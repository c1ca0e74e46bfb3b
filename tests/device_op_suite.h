// The op suite every device runs against the CPU kernels on the same inputs: included by
// test_device_ops.cpp (the emulated device, in every `make test`) and by test_cuda.cpp (a
// real GPU, skipped without one). The including file defines suite_device().
// Tolerances: on the emulated device the arithmetic is the CPU's, so results are compared
// bit for bit; on a GPU, math functions (exp, log, tanh, pow) may differ in the last bits
// (CUDA's libdevice is accurate to a few ulp), so they get suite_tolerance().
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tensor/device/stream.h"
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
