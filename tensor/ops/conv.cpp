// conv2d on the CPU: im2col of the whole batch into one [C*kH*kW, N*L] matrix (L = oH*oW),
// then GEMMs. Deep products (conv2 of the CNN: 288 rows) run as one GEMM over the batch, which
// keeps both OpenBLAS threads busy, at the price of a transpose between [O, N*L] and NCHW in
// each direction. Shallow ones (conv1: 9 rows) are memory-bound, so one GEMM per image writing
// NCHW directly wins. The columns are saved for the weight gradient; the bias rides along.
// The input gradient goes one image at a time (GEMM into a one-image column matrix, then
// col2im while it is still in cache), whatever the depth.
#include "tensor/ops/conv.h"

#include <vector>

#include "core/threads.h"
#include "tensor/autograd.h"
#include "tensor/cpu/blas.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/cpu/im2col.h"
#include "tensor/ops/conv_device.h"
#include "tensor/ops/creation.h"
#include "tensor/ops/device_dispatch.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/movement.h"
#include "tensor/ops/reduce.h"

namespace ringlet::tensor {
namespace {

constexpr const char* kOp = "conv2d";
// Parallel loops below hand out (image, channel) planes; a few per task amortize thread start.
constexpr std::int64_t kPlaneGrain = 4;
// Below this GEMM depth (C*kH*kW) one GEMM per image beats a batched GEMM plus transposes.
constexpr std::int64_t kBatchedMinRows = 64;

cpu::ConvGeometry validate(const Tensor& input, const Tensor& weight, const Tensor& bias,
                           const Conv2dOptions& o) {
  if (bias.defined()) {
    same_device({&input, &weight, &bias}, kOp);
  } else {
    same_device({&input, &weight}, kOp);
  }
  const auto shapes = [&] {
    return core::str(" (input ", shape_str(input.shape()), ", weight ", shape_str(weight.shape()),
                     bias.defined() ? ", bias " + shape_str(bias.shape()) : std::string(), ")");
  };
  RINGLET_CHECK(input.dim() == 4, ShapeError, kOp, ": input must be 4-D [N, C, H, W]", shapes());
  RINGLET_CHECK(weight.dim() == 4, ShapeError, kOp, ": weight must be 4-D [O, C, kH, kW]",
                shapes());
  RINGLET_CHECK(input.size(1) == weight.size(1), ShapeError, kOp, ": input has ", input.size(1),
                " channels but the weight expects ", weight.size(1), shapes());
  RINGLET_CHECK(
      weight.size(0) > 0 && weight.size(1) > 0 && weight.size(2) > 0 && weight.size(3) > 0,
      ShapeError, kOp, ": weight dims must be positive", shapes());
  RINGLET_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)), ShapeError,
                kOp, ": bias must have shape [", weight.size(0), "]", shapes());
  RINGLET_CHECK(
      input.dtype() == weight.dtype() && (!bias.defined() || bias.dtype() == input.dtype()),
      DTypeError, kOp, ": dtypes differ (input ", input.dtype(), ", weight ", weight.dtype(),
      bias.defined() ? core::str(", bias ", bias.dtype()) : "", ")");
  for (int d = 0; d < 2; ++d) {
    RINGLET_CHECK(o.stride[d] >= 1 && o.dilation[d] >= 1 && o.padding[d] >= 0, ValueError, kOp,
                  ": stride and dilation must be >= 1 and padding >= 0, got stride ", o.stride[d],
                  ", dilation ", o.dilation[d], ", padding ", o.padding[d]);
  }

  cpu::ConvGeometry g{};
  g.channels = input.size(1);
  g.height = input.size(2);
  g.width = input.size(3);
  g.kernel_h = weight.size(2);
  g.kernel_w = weight.size(3);
  g.stride_h = o.stride[0];
  g.stride_w = o.stride[1];
  g.pad_h = o.padding[0];
  g.pad_w = o.padding[1];
  g.dilation_h = o.dilation[0];
  g.dilation_w = o.dilation[1];
  const std::int64_t span_h = g.dilation_h * (g.kernel_h - 1) + 1;
  const std::int64_t span_w = g.dilation_w * (g.kernel_w - 1) + 1;
  const std::int64_t padded_h = g.height + 2 * g.pad_h;
  const std::int64_t padded_w = g.width + 2 * g.pad_w;
  RINGLET_CHECK(span_h <= padded_h && span_w <= padded_w, ShapeError, kOp,
                ": kernel (dilated size ", span_h, "x", span_w,
                ") is larger than the padded input (", padded_h, "x", padded_w, ")", shapes());
  g.out_h = (padded_h - span_h) / g.stride_h + 1;
  g.out_w = (padded_w - span_w) / g.stride_w + 1;
  return g;
}

// The column matrix [C*kH*kW, N*L] of a contiguous batch.
template <class T>
Tensor batch_im2col(const cpu::ConvGeometry& g, const Tensor& x) {
  const std::int64_t batch = x.size(0);
  const std::int64_t cols = g.col_cols();
  const std::int64_t ld = batch * cols;
  Tensor col = Tensor::empty({g.col_rows(), ld}, x.dtype());
  const T* src = x.data<T>();
  T* dst = col.data<T>();
  const std::int64_t image_size = g.channels * g.height * g.width;
  core::parallel_for(batch * g.channels, kPlaneGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t p = begin; p < end; ++p) {
      const std::int64_t n = p / g.channels, c = p % g.channels;
      cpu::im2col(g, src + n * image_size, c, c + 1, dst + n * cols, ld);
    }
  });
  return col;
}

// Sum of a run, returned in f64; eight independent partial sums let the adds pipeline.
template <class T>
double sum_run(const T* p, std::int64_t n) {
  T lanes[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) lanes[k] += p[i + k];
  }
  double total = 0;
  for (; i < n; ++i) total += p[i];
  for (T lane : lanes) total += lane;
  return total;
}

template <class T>
Tensor forward(const cpu::ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias,
               const Tensor& col) {
  const std::int64_t batch = x.size(0), out_ch = w.size(0), cols = g.col_cols();
  const std::int64_t ld = batch * cols, rows = g.col_rows();
  Tensor out = Tensor::empty({batch, out_ch, g.out_h, g.out_w}, x.dtype());
  T* to = out.data<T>();
  const T* b = bias.defined() ? bias.data<T>() : nullptr;
  if (!conv_batched_gemm(g, batch)) {
    // Start from the bias and let each image's GEMM add to it (beta = 1).
    core::parallel_for(batch * out_ch, kPlaneGrain, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t p = begin; p < end; ++p) {
        std::fill(to + p * cols, to + (p + 1) * cols, b ? b[p % out_ch] : T(0));
      }
    });
    for (std::int64_t n = 0; n < batch; ++n) {
      cpu::gemm(false, false, out_ch, cols, rows, T(1), w.data<T>(), rows, col.data<T>() + n * cols,
                ld, T(1), to + n * out_ch * cols, cols);
    }
    return out;
  }
  Tensor product = Tensor::empty({out_ch, ld}, x.dtype());
  cpu::gemm(false, false, out_ch, ld, rows, T(1), w.data<T>(), rows, col.data<T>(), ld, T(0),
            product.data<T>(), ld);
  const T* from = product.data<T>();
  // [O, N*L] -> [N, O, L], adding the bias on the way.
  core::parallel_for(batch * out_ch, kPlaneGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t p = begin; p < end; ++p) {
      const std::int64_t n = p / out_ch, o = p % out_ch;
      const T* src = from + o * ld + n * cols;
      T* dst = to + p * cols;
      const T shift = b ? b[o] : T(0);
      for (std::int64_t l = 0; l < cols; ++l) dst[l] = src[l] + shift;
    }
  });
  return out;
}

struct Saved {
  cpu::ConvGeometry geometry;
  Shape input_shape;
  Tensor weight;  // contiguous, detached
  Tensor col;     // defined when the weight needs a gradient
};

template <class T>
std::vector<Tensor> backward(const Saved& s, const Tensor& grad_output,
                             const std::vector<bool>& needs) {
  const cpu::ConvGeometry& g = s.geometry;
  const std::int64_t batch = s.input_shape[0], out_ch = s.weight.size(0);
  const std::int64_t cols = g.col_cols(), ld = batch * cols, rows = g.col_rows();
  std::vector<Tensor> grads(3);
  if (ld == 0) {  // empty batch: BLAS rejects zero leading dimensions
    if (needs[0]) grads[0] = zeros(s.input_shape, s.weight.dtype());
    if (needs[1]) grads[1] = zeros(s.weight.shape(), s.weight.dtype());
    if (needs[2]) grads[2] = zeros({out_ch}, s.weight.dtype());
    return grads;
  }
  const Tensor go = grad_output.contiguous();
  const T* dy = go.data<T>();
  if (needs[2]) {
    grads[2] = Tensor::empty({out_ch}, go.dtype());
    T* gb = grads[2].data<T>();
    for (std::int64_t o = 0; o < out_ch; ++o) {
      double total = 0;
      for (std::int64_t n = 0; n < batch; ++n) total += sum_run(dy + (n * out_ch + o) * cols, cols);
      gb[o] = static_cast<T>(total);
    }
  }
  if (!needs[0] && !needs[1]) return grads;

  // The GEMMs read dy either per image ([O, L] blocks of NCHW) or, batched, as [O, N*L].
  const bool batched = conv_batched_gemm(g, batch);
  Tensor dy_t;
  if (batched && needs[1]) {
    dy_t = Tensor::empty({out_ch, ld}, go.dtype());
    T* to = dy_t.data<T>();
    core::parallel_for(batch * out_ch, kPlaneGrain, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t p = begin; p < end; ++p) {
        const std::int64_t n = p / out_ch, o = p % out_ch;
        std::copy(dy + p * cols, dy + (p + 1) * cols, to + o * ld + n * cols);
      }
    });
  }
  if (needs[1]) {
    RINGLET_CHECK(s.col.defined(), AutogradError, kOp,
                  ": the weight started requiring grad after the forward pass; run it again");
    grads[1] = Tensor::empty(s.weight.shape(), go.dtype());
    T* gw = grads[1].data<T>();
    const T* col = s.col.data<T>();
    if (batched) {
      cpu::gemm(false, true, out_ch, rows, ld, T(1), dy_t.data<T>(), ld, col, ld, T(0), gw, rows);
    } else {
      for (std::int64_t n = 0; n < batch; ++n) {
        cpu::gemm(false, true, out_ch, rows, cols, T(1), dy + n * out_ch * cols, cols,
                  col + n * cols, ld, n == 0 ? T(0) : T(1), gw, rows);
      }
    }
  }
  if (needs[0]) {
    // One image at a time: its column gradient [rows, L] stays in cache between the GEMM that
    // writes it and the col2im that folds it into dx (the whole batch's would be rows x N*L,
    // 14 MB for conv2 of the CNN at batch 64, written and read back through memory).
    Tensor scratch = Tensor::empty({rows, cols}, go.dtype());
    T* gc = scratch.data<T>();
    const T* w = s.weight.data<T>();
    grads[0] = Tensor::empty(s.input_shape, go.dtype());
    T* dx = grads[0].data<T>();
    const std::int64_t image_size = g.channels * g.height * g.width;
    for (std::int64_t n = 0; n < batch; ++n) {
      cpu::gemm(true, false, rows, cols, out_ch, T(1), w, rows, dy + n * out_ch * cols, cols, T(0),
                gc, cols);
      cpu::col2im(g, gc, cols, 0, g.channels, dx + n * image_size);
    }
  }
  return grads;
}

}  // namespace

// Whether to run one GEMM over the whole batch (and transpose between [O, N*L] and NCHW) or
// one GEMM per image straight into NCHW. The batched GEMM is faster only when the products
// are deep enough (rows = C*kH*kW) for the GEMM time to outweigh the transposes.
bool conv_batched_gemm(const cpu::ConvGeometry& g, std::int64_t batch) {
  return batch > 1 && g.col_rows() >= kBatchedMinRows;
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
              const Conv2dOptions& options) {
  return conv2d(input, weight, bias, options, kernels::Activation::none);
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
              const Conv2dOptions& options, kernels::Activation act) {
  const cpu::ConvGeometry g = validate(input, weight, bias, options);
  if (!input.device().is_cpu()) return conv2d_device(g, input, weight, bias, act);
  if (act == kernels::Activation::relu) return relu(conv2d(input, weight, bias, options));
  const Tensor x = input.detach().contiguous();
  const Tensor w = weight.detach().contiguous();
  const Tensor b = bias.defined() ? bias.detach().contiguous() : Tensor();
  const std::int64_t batch = x.size(0);
  // The columns are kept for the weight gradient only; the input gradient needs the weight.
  const bool weight_grad = grad_enabled() && weight.requires_grad();

  Tensor out, col;
  if (batch == 0) {
    out = Tensor::empty({0, w.size(0), g.out_h, g.out_w}, x.dtype());
  } else {
    cpu::dispatch_floating(x.dtype(), kOp, [&]<class T>() {
      col = batch_im2col<T>(g, x);
      out = forward<T>(g, x, w, b, col);
    });
  }
  if (!any_requires_grad({input, weight, bias})) return out;
  auto saved = std::make_shared<Saved>(Saved{g, x.shape(), w, weight_grad ? col : Tensor()});
  return record(kOp, out, {input, weight, bias},
                [saved](const Tensor& grad_output, const std::vector<bool>& needs) {
                  return cpu::dispatch_floating(grad_output.dtype(), kOp, [&]<class T>() {
                    return backward<T>(*saved, grad_output, needs);
                  });
                });
}

}  // namespace ringlet::tensor
