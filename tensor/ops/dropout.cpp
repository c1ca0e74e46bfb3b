// Inverted dropout. On the host the mask is drawn from the caller's Generator, one uniform per
// element in row-major order (PyTorch's CPU numbers), so equal seeds give equal masks on every
// machine; on a device it comes from a counter-based generator (see dropout_device). The kept
// elements are scaled by 1 / (1 - p) so the expected output equals the input; the mask is
// saved (already scaled) for the backward pass, which multiplies by it again.
#include "tensor/ops/dropout.h"

#include <vector>

#include "tensor/autograd.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/device/graph.h"
#include "tensor/ops/device_dispatch.h"
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

// On a device the mask comes from a counter-based generator keyed by one 64-bit draw of the
// caller's generator: it depends on (that draw, element index) alone, so a seed gives the same
// mask on every device (cuda, emu), drawn on the device with no copy. (The host keeps its
// PyTorch-compatible stream of uniforms, so a device's mask is not the CPU's.)
Tensor dropout_device(const Tensor& input, double p, Generator& gen) {
  RINGLET_CHECK(input.dtype() == DType::f32 || input.dtype() == DType::f64, DTypeError, kOp,
                ": dtype ", input.dtype(), " is not supported (f32 and f64 are)");
  RINGLET_CHECK(!capturing(input.device()), CaptureError, input.device(), ": ", kOp,
                " draws its seed on the host at each call, so a captured graph would replay one "
                "mask; it cannot be captured into a graph");
  const Tensor x = input.detach().contiguous();
  const std::uint64_t seed = gen.random64();
  const double keep = 1.0 - p;
  const double scale = p == 1.0 ? 0.0 : 1.0 / keep;
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mask = Tensor::empty(x.shape(), x.dtype(), x.device());
  kernels_for(x.device())
      .dropout(x.dtype(), x.numel(), seed, keep, scale, x.raw_data(), out.raw_data(),
               mask.raw_data(), stream_for(x.device()));
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
