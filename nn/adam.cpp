// Adam / AdamW update: on the host one loop per parameter over contiguous data, on a device one
// multi-tensor launch per device and dtype. Each PyTorch op of the
// reference is one rounding step here, in the same order, with scalars cast to the element
// type first; add(alpha=) and addcmul are fused multiply-adds as in PyTorch's CPU kernels, so
// results equal PyTorch's bitwise (test_optim checks this on its golden cases).
#include "nn/adam.h"

#include <cmath>

#include "nn/device_groups.h"
#include "tensor/ops.h"
#include "tensor/ops/device_dispatch.h"

namespace ringlet::nn {

using tensor::Tensor;

namespace {

struct AdamScalars {
  double beta1, beta2, eps, weight_decay;
  double lr;
  double step_size;              // lr / (1 - beta1^t)
  double bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  bool decoupled, amsgrad;
};

// The settings are loop-invariant selects (not branches) so that the loop vectorizes; vmax is
// only touched with amsgrad.
template <class T, bool kAmsgrad>
[[gnu::always_inline, RINGLET_NO_FP_CONTRACT]] inline void adam_loop(
    T* __restrict p, const T* __restrict grad, T* __restrict m, T* __restrict v, T* __restrict vmax,
    std::int64_t n, const AdamScalars& s) {
  const T wd = static_cast<T>(s.weight_decay);
  const T decay = static_cast<T>(1 - s.lr * s.weight_decay);  // AdamW: param.mul_(1 - lr*wd)
  const T beta1 = static_cast<T>(s.beta1);
  const T beta2 = static_cast<T>(s.beta2);
  const T one_minus_beta1 = static_cast<T>(1 - s.beta1);
  const T one_minus_beta2 = static_cast<T>(1 - s.beta2);
  const T bc2_sqrt = static_cast<T>(s.bias_correction2_sqrt);
  const T eps = static_cast<T>(s.eps);
  const T neg_step_size = static_cast<T>(-s.step_size);
  const bool l2 = !s.decoupled && s.weight_decay != 0;
  const bool decoupled = s.decoupled;
  for (std::int64_t i = 0; i < n; ++i) {
    T pi = p[i];
    T g = grad[i];
    // Both arms are computed, then selected (no branch in the loop).
    const T decayed = pi * decay;
    pi = decoupled ? decayed : pi;
    const T with_l2 = detail::fused_mul_add(wd, pi, g);
    g = l2 ? with_l2 : g;
    T mi = m[i] * beta1;  // exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
    mi = detail::fused_mul_add(one_minus_beta1, g, mi);
    T vi = v[i] * beta2;  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    vi = detail::fused_mul_add(one_minus_beta2 * g, g, vi);
    m[i] = mi;
    v[i] = vi;
    T second = vi;
    if constexpr (kAmsgrad) {
      second = vmax[i] < vi ? vi : vmax[i];
      vmax[i] = second;
    }
    const T denom = detail::square_root(second) / bc2_sqrt + eps;
    p[i] = pi + neg_step_size * mi / denom;  // param.addcdiv_(exp_avg, denom, value=-step_size)
  }
}

#if defined(__x86_64__)
// The same loop compiled for AVX2+FMA: each fused_mul_add is one instruction. (It stays
// scalar: sqrt with errno semantics is a branch. Still ~3x faster than PyTorch 1.13's
// single-tensor Adam on one core.) fp-contract=off keeps GCC from fusing products that
// PyTorch rounds separately, such as p * (1 - lr * wd) into the final addition.
template <class T, bool kAmsgrad>
[[gnu::target("avx2,fma"), RINGLET_NO_FP_CONTRACT]] void adam_loop_fma(T* p, const T* grad, T* m,
                                                                       T* v, T* vmax,
                                                                       std::int64_t n,
                                                                       const AdamScalars& s) {
  adam_loop<T, kAmsgrad>(p, grad, m, v, vmax, n, s);
}
#endif

template <class T, bool kAmsgrad>
void adam_dispatch(T* p, const T* grad, T* m, T* v, T* vmax, std::int64_t n, const AdamScalars& s) {
#if defined(__x86_64__)
  if (detail::cpu_has_fma()) return adam_loop_fma<T, kAmsgrad>(p, grad, m, v, vmax, n, s);
#endif
  adam_loop<T, kAmsgrad>(p, grad, m, v, vmax, n, s);
}

template <class T>
void adam_update(T* p, const T* grad, T* m, T* v, T* vmax, std::int64_t n, const AdamScalars& s) {
  if (s.amsgrad) {
    adam_dispatch<T, true>(p, grad, m, v, vmax, n, s);
  } else {
    adam_dispatch<T, false>(p, grad, m, v, vmax, n, s);
  }
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Adam("Adam", std::move(params), options, false) {}

Adam::Adam(std::string name, std::vector<Tensor> params, AdamOptions options, bool decoupled)
    : Optimizer(std::move(name), std::move(params), options.lr),
      options_(options),
      decoupled_(decoupled) {
  validate();
  register_hyperparameter("beta1", &options_.beta1);
  register_hyperparameter("beta2", &options_.beta2);
  register_hyperparameter("eps", &options_.eps);
  register_hyperparameter("weight_decay", &options_.weight_decay);
  register_hyperparameter("amsgrad", &options_.amsgrad);
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : Adam("AdamW", std::move(params), options, true) {}

void Adam::validate() const {
  const AdamOptions& o = options_;
  RINGLET_CHECK(std::isfinite(o.eps) && o.eps >= 0, ValueError, name(), ": invalid eps ", o.eps,
                " (must be >= 0)");
  RINGLET_CHECK(o.beta1 >= 0 && o.beta1 < 1, ValueError, name(), ": invalid beta1 ", o.beta1,
                " (must be in [0, 1))");
  RINGLET_CHECK(o.beta2 >= 0 && o.beta2 < 1, ValueError, name(), ": invalid beta2 ", o.beta2,
                " (must be in [0, 1))");
  RINGLET_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0, ValueError, name(),
                ": invalid weight_decay ", o.weight_decay, " (must be >= 0)");
}

std::vector<std::string> Adam::buffer_names() const {
  if (options_.amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

void Adam::step() {
  tensor::NoGradGuard no_grad;
  DeviceGroups<tensor::kernels::AdamTensor> on_devices;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = gradient_of(i);
    if (!g.defined()) continue;
    const Tensor& p = params_[i];
    ParamState& st = state_for(i);
    st.step += 1;
    // Python floats: beta ** step and the divisions below are double, as in PyTorch.
    const double bias_correction1 = 1 - std::pow(options_.beta1, st.step);
    const double bias_correction2 = 1 - std::pow(options_.beta2, st.step);
    const AdamScalars s{options_.beta1,
                        options_.beta2,
                        options_.eps,
                        options_.weight_decay,
                        lr(),
                        lr() / bias_correction1,
                        std::sqrt(bias_correction2),
                        decoupled_,
                        options_.amsgrad};
    const std::int64_t n = p.numel();
    if (!p.device().is_cpu()) {
      for (Tensor& b : st.buffers) {  // buffers loaded on the host move over first
        if (b.device() != p.device()) b = b.to(p.device());
      }
      on_devices.add(
          p.device(), p.dtype(),
          {p.raw_data(), g.raw_data(), st.buffers[0].raw_data(), st.buffers[1].raw_data(),
           options_.amsgrad ? st.buffers[2].raw_data() : nullptr, n, s.step_size,
           s.bias_correction2_sqrt},
          g);
      continue;
    }
    if (p.dtype() == core::DType::f32) {
      adam_update(p.data<float>(), g.data<float>(), st.buffers[0].data<float>(),
                  st.buffers[1].data<float>(),
                  options_.amsgrad ? st.buffers[2].data<float>() : nullptr, n, s);
    } else {
      adam_update(p.data<double>(), g.data<double>(), st.buffers[0].data<double>(),
                  st.buffers[1].data<double>(),
                  options_.amsgrad ? st.buffers[2].data<double>() : nullptr, n, s);
    }
  }
  // The same update on each device as one launch over its parameters (each with its own bias
  // corrections), queued on the device's current stream.
  const tensor::kernels::AdamParams o{options_.beta1,        options_.beta2, options_.eps,
                                      options_.weight_decay, lr(),           decoupled_};
  on_devices.run([&](core::Device device, core::DType dtype,
                     const tensor::kernels::AdamTensor* tensors, int count) {
    tensor::kernels_for(device).adam(dtype, tensors, count, o, tensor::stream_for(device));
  });
}

}  // namespace ringlet::nn
