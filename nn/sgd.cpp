// SGD's update: on the host one loop per parameter over contiguous data, on a device one
// multi-tensor launch per device and dtype (the same arithmetic in the kernel). Scalars are cast to the element
// type first and every PyTorch op is one rounding step, in PyTorch's order; add(alpha=) is a
// fused multiply-add as in PyTorch's CPU kernels (vec::fmadd, and its contracted scalar tail),
// so results equal PyTorch's bitwise (test_optim checks this on its golden cases).
#include "nn/sgd.h"

#include <cmath>

#include "nn/device_groups.h"
#include "tensor/ops.h"
#include "tensor/ops/device_dispatch.h"

namespace ringlet::nn {

using tensor::Tensor;

namespace {

// One parameter's update; `buf` is unused without momentum, `first` marks a fresh buffer.
// The flags are loop-invariant selects (not branches) so that the loop vectorizes.
template <class T, bool kMomentum>
[[gnu::always_inline, RINGLET_NO_FP_CONTRACT]] inline void sgd_loop(
    T* __restrict p, const T* __restrict grad, T* __restrict buf, std::int64_t n,
    const SGDOptions& o, double lr, bool first) {
  const T wd = static_cast<T>(o.weight_decay);
  const T momentum = static_cast<T>(o.momentum);
  const T keep = static_cast<T>(1 - o.dampening);
  const T neg_lr = static_cast<T>(-lr);
  const bool decay = o.weight_decay != 0;
  const bool nesterov = o.nesterov;
  for (std::int64_t i = 0; i < n; ++i) {
    T g = grad[i];
    g = decay ? detail::fused_mul_add(wd, p[i], g) : g;
    if constexpr (kMomentum) {
      const T b = first ? g : detail::fused_mul_add(keep, g, buf[i] * momentum);
      buf[i] = b;
      g = nesterov ? detail::fused_mul_add(momentum, b, g) : b;
    }
    p[i] = detail::fused_mul_add(neg_lr, g, p[i]);
  }
}

#if defined(__x86_64__)
// The same loop compiled for AVX2+FMA: each fused_mul_add is one instruction and the loop
// vectorizes. fp-contract=off keeps GCC from fusing products that PyTorch rounds separately.
template <class T, bool kMomentum>
[[gnu::target("avx2,fma"), RINGLET_NO_FP_CONTRACT]] void sgd_loop_fma(T* p, const T* grad, T* buf,
                                                                      std::int64_t n,
                                                                      const SGDOptions& o,
                                                                      double lr, bool first) {
  sgd_loop<T, kMomentum>(p, grad, buf, n, o, lr, first);
}
#endif

template <class T, bool kMomentum>
void sgd_dispatch(T* p, const T* grad, T* buf, std::int64_t n, const SGDOptions& o, double lr,
                  bool first) {
#if defined(__x86_64__)
  if (detail::cpu_has_fma()) return sgd_loop_fma<T, kMomentum>(p, grad, buf, n, o, lr, first);
#endif
  sgd_loop<T, kMomentum>(p, grad, buf, n, o, lr, first);
}

template <class T>
void sgd_update(T* p, const T* grad, T* buf, std::int64_t n, const SGDOptions& o, double lr,
                bool first) {
  if (buf != nullptr) {
    sgd_dispatch<T, true>(p, grad, buf, n, o, lr, first);
  } else {
    sgd_dispatch<T, false>(p, grad, buf, n, o, lr, first);
  }
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer("SGD", std::move(params), options.lr), options_(options) {
  validate();
  register_hyperparameter("momentum", &options_.momentum);
  register_hyperparameter("dampening", &options_.dampening);
  register_hyperparameter("weight_decay", &options_.weight_decay);
  register_hyperparameter("nesterov", &options_.nesterov);
}

void SGD::validate() const {
  const SGDOptions& o = options_;
  RINGLET_CHECK(std::isfinite(o.momentum) && o.momentum >= 0, ValueError, "SGD: invalid momentum ",
                o.momentum, " (must be >= 0)");
  RINGLET_CHECK(std::isfinite(o.dampening) && o.dampening >= 0 && o.dampening <= 1, ValueError,
                "SGD: invalid dampening ", o.dampening, " (must be in [0, 1])");
  RINGLET_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0, ValueError,
                "SGD: invalid weight_decay ", o.weight_decay, " (must be >= 0)");
  RINGLET_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), ValueError,
                "SGD: Nesterov momentum requires momentum > 0 and zero dampening (got momentum ",
                o.momentum, ", dampening ", o.dampening, ")");
}

std::vector<std::string> SGD::buffer_names() const {
  if (options_.momentum == 0) return {};
  return {"momentum_buffer"};
}

void SGD::step() {
  tensor::NoGradGuard no_grad;
  const bool with_momentum = options_.momentum != 0;
  DeviceGroups<tensor::kernels::SgdTensor> on_devices;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = gradient_of(i);
    if (!g.defined()) continue;
    const Tensor& p = params_[i];
    bool first = false;
    Tensor buf;
    if (with_momentum) {
      first = !state_[i].initialized;
      Tensor& stored = state_for(i).buffers[0];
      if (stored.device() != p.device()) stored = stored.to(p.device());  // loaded on the host
      buf = stored;
    }
    const std::int64_t n = p.numel();
    if (!p.device().is_cpu()) {
      on_devices.add(
          p.device(), p.dtype(),
          {p.raw_data(), g.raw_data(), with_momentum ? buf.raw_data() : nullptr, n, first}, g);
      continue;
    }
    if (p.dtype() == core::DType::f32) {
      sgd_update(p.data<float>(), g.data<float>(), with_momentum ? buf.data<float>() : nullptr, n,
                 options_, lr(), first);
    } else {
      sgd_update(p.data<double>(), g.data<double>(), with_momentum ? buf.data<double>() : nullptr,
                 n, options_, lr(), first);
    }
  }
  // The same update on each device as one launch over its parameters, queued on the device's
  // current stream.
  const tensor::kernels::SgdParams o{lr(), options_.momentum, options_.dampening,
                                     options_.weight_decay, options_.nesterov};
  on_devices.run([&](core::Device device, core::DType dtype,
                     const tensor::kernels::SgdTensor* tensors, int count) {
    const bool staged = lr_on_device_.defined() && lr_on_device_.device() == device;
    tensor::kernels_for(device).sgd(
        dtype, tensors, count, o,
        staged ? static_cast<const double*>(lr_on_device_.raw_data()) : nullptr,
        tensor::stream_for(device));
  });
}

std::string SGD::prepare_capture(core::Device device) {
  lr_on_device_ = tensor::full({}, lr(), core::DType::f64, device);
  return "";
}

void SGD::stage_step() {
  if (!lr_on_device_.defined()) return;
  tensor::copy_(lr_on_device_, tensor::full({}, lr(), core::DType::f64));
}

}  // namespace ringlet::nn
