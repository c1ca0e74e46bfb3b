// Inverted dropout on the CPU. The mask is drawn from the caller's Generator, one uniform per
// element in row-major order, so equal seeds give equal masks on every machine. The kept
// elements are scaled by 1 / (1 - p) so the expected output equals the input; the mask is
// saved (already scaled) for the backward pass, which multiplies by it again.
#include "tensor/ops/dropout.h"

#include <vector>

#include "tensor/autograd.h"
#include "tensor/cpu/dispatch.h"

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

}  // namespace

Tensor dropout(const Tensor& input, double p, bool training, Generator& gen) {
  if (!input.device().is_cpu()) {
    RINGLET_THROW(DeviceError, "'", kOp, "' has no device kernel yet (input is on ", input.device(),
                  ")");
  }
  RINGLET_CHECK(p >= 0.0 && p <= 1.0, ValueError, kOp,
                ": probability has to be between 0 and 1, got ", p);
  if (!training || p == 0.0) return input;

  Tensor mask = Tensor::empty(input.shape(), input.dtype());
  Tensor out;
  cpu::dispatch_floating(input.dtype(), kOp, [&]<class T>() {
    // p == 1 drops everything (as PyTorch); 1 / (1 - p) would be infinite.
    const double keep = 1.0 - p;
    const T scale = p == 1.0 ? T(0) : static_cast<T>(1.0 / keep);
    T* m = mask.data<T>();
    const std::int64_t count = mask.numel();
    for (std::int64_t i = 0; i < count; ++i) m[i] = gen.uniform() < keep ? scale : T(0);
    out = masked<T>(input.detach(), mask);
  });
  return record(kOp, out, {input}, [mask](const Tensor& grad_output, const std::vector<bool>&) {
    return cpu::dispatch_floating(grad_output.dtype(), kOp, [&]<class T>() {
      return std::vector<Tensor>{masked<T>(grad_output, mask)};
    });
  });
}

}  // namespace ringlet::tensor
