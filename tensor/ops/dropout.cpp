// Inverted dropout. The mask is drawn from the caller's Generator on the host, one uniform per
// element in row-major order, so equal seeds give equal masks on every machine and device (a
// device gets the host's mask; a generator on the device would save that copy). The kept
// elements are scaled by 1 / (1 - p) so the expected output equals the input; the mask is
// saved (already scaled) for the backward pass, which multiplies by it again.
#include "tensor/ops/dropout.h"

#include <vector>

#include "tensor/autograd.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/ops/elementwise.h"

namespace ringlet::tensor {
namespace {

constexpr const char* kOp = "dropout";

template <class T>
Tensor masked(const Tensor& values, const Tensor& mask) {
  const Tensor v = values.contiguous();
  Tensor out = Tensor::empty(v.shape(), v.dtype());
  const T* src = v.data<T>();
  const T* m = mask.data<T>();
  T* dst = out.data<T>();
  const std::int64_t count = v.numel();
  for (std::int64_t i = 0; i < count; ++i) dst[i] = src[i] * m[i];
  return out;
}

// The scaled mask (scale where kept, 0 where dropped), drawn on the host: one uniform per
// element in row-major order.
Tensor draw_mask(const Shape& shape, DType dtype, double p, Generator& gen) {
  Tensor mask = Tensor::empty(shape, dtype);
  cpu::dispatch_floating(dtype, kOp, [&]<class T>() {
    // p == 1 drops everything (as PyTorch); 1 / (1 - p) would be infinite.
    const double keep = 1.0 - p;
    const T scale = p == 1.0 ? T(0) : static_cast<T>(1.0 / keep);
    T* m = mask.data<T>();
    const std::int64_t count = mask.numel();
    for (std::int64_t i = 0; i < count; ++i) m[i] = gen.uniform() < keep ? scale : T(0);
  });
  return mask;
}

// On a device the mask is the host's, copied over, so a seed drops the same elements on the
// CPU, emu and cuda alike; the products are device multiplies.
Tensor dropout_device(const Tensor& input, double p, Generator& gen) {
  const Tensor mask = draw_mask(input.shape(), input.dtype(), p, gen).to(input.device());
  Tensor out;
  {
    NoGradGuard no_grad;
    out = mul(input.detach(), mask);
  }
  return record(kOp, out, {input}, [mask](const Tensor& grad_output, const std::vector<bool>&) {
    return std::vector<Tensor>{mul(grad_output, mask)};
  });
}

}  // namespace

Tensor dropout(const Tensor& input, double p, bool training, Generator& gen) {
  RINGLET_CHECK(p >= 0.0 && p <= 1.0, ValueError, kOp,
                ": probability has to be between 0 and 1, got ", p);
  if (!training || p == 0.0) return input;
  if (!input.device().is_cpu()) return dropout_device(input, p, gen);
  const Tensor mask = draw_mask(input.shape(), input.dtype(), p, gen);
  Tensor out;
  cpu::dispatch_floating(input.dtype(), kOp,
                         [&]<class T>() { out = masked<T>(input.detach(), mask); });
  return record(kOp, out, {input}, [mask](const Tensor& grad_output, const std::vector<bool>&) {
    return cpu::dispatch_floating(grad_output.dtype(), kOp, [&]<class T>() {
      return std::vector<Tensor>{masked<T>(grad_output, mask)};
    });
  });
}

}  // namespace ringlet::tensor
