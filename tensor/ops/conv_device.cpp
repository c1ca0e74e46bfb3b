// conv2d on a device (cuda, emu), two ways (tensor/determinism.h):
// - deterministic: the CPU's decomposition, kernel for kernel, so the emulated device computes
//   exactly what the CPU does;
// - fast: the whole batch in one batched GEMM per pass (3 kernels forward, about 6 backward,
//   whatever the batch), the bias and an optional ReLU in the forward GEMM's epilogue; on a GPU
//   with cuDNN (f32), one cuDNN call per pass instead, its algorithm searched once per shape.
#include "tensor/ops/conv_device.h"

#include <memory>
#include <vector>

#include "tensor/autograd.h"
#include "tensor/cuda/cudnn_conv.h"
#include "tensor/determinism.h"
#include "tensor/math_mode.h"
#include "tensor/ops/creation.h"
#include "tensor/ops/device_dispatch.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/movement.h"

namespace ringlet::tensor {
namespace {

constexpr const char* kOp = "conv2d";

// --- The deterministic path: the CPU's decomposition (im2col of the batch, then one batched
// GEMM or one GEMM per image by the same rule, the same per-image input gradient and col2im),
// as device kernels queued on the current stream, so the emulated device computes what the CPU
// does.

kernels::ConvShape device_shape(const cpu::ConvGeometry& g) {
  return {g.channels, g.height, g.width,      g.kernel_h,   g.kernel_w, g.stride_h, g.stride_w,
          g.pad_h,    g.pad_w,  g.dilation_h, g.dilation_w, g.out_h,    g.out_w};
}

// c = op(a) op(b) + beta c on device memory at element offsets; row strides as stored.
struct DeviceGemm {
  const Tensor& like;  // dtype and device
  void operator()(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const Tensor& a,
                  std::int64_t a_at, std::int64_t lda, const Tensor& b, std::int64_t b_at,
                  std::int64_t ldb, double beta, const Tensor& c, std::int64_t c_at,
                  std::int64_t ldc) const {
    const auto es = static_cast<std::int64_t>(core::dtype_size(like.dtype()));
    kernels_for(like.device())
        .gemm(like.dtype(), ta, tb, m, n, k, static_cast<const char*>(a.raw_data()) + a_at * es,
              lda, static_cast<const char*>(b.raw_data()) + b_at * es, ldb, beta,
              static_cast<char*>(c.raw_data()) + c_at * es, ldc, stream_for(like.device()));
  }
};

struct DeviceSaved {
  cpu::ConvGeometry geometry;
  Shape input_shape;
  Tensor weight, col;  // contiguous, detached
};

Tensor exact_forward(const cpu::ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor& b,
                     Tensor& col) {
  const std::int64_t batch = x.size(0), out_ch = w.size(0), cols = g.col_cols();
  const std::int64_t ld = batch * cols, rows = g.col_rows();
  col = Tensor::empty({rows, ld}, x.dtype(), x.device());
  kernels_for(x.device())
      .im2col(x.dtype(), device_shape(g), batch, x.raw_data(), col.raw_data(),
              stream_for(x.device()));
  const DeviceGemm gemm{x};
  if (!conv_batched_gemm(g, batch)) {
    // Start from the bias and let each image's GEMM add to it (beta = 1), as the CPU does.
    Tensor out = Tensor::empty({batch, out_ch, g.out_h, g.out_w}, x.dtype(), x.device());
    if (b.defined()) {
      copy_(out, b.view({1, out_ch, 1, 1}));
    } else {
      fill_(out, 0.0);
    }
    for (std::int64_t n = 0; n < batch; ++n) {
      gemm(false, false, out_ch, cols, rows, w, 0, rows, col, n * cols, ld, 1.0, out,
           n * out_ch * cols, cols);
    }
    return out;
  }
  Tensor product = Tensor::empty({out_ch, ld}, x.dtype(), x.device());
  gemm(false, false, out_ch, ld, rows, w, 0, rows, col, 0, ld, 0.0, product, 0, ld);
  Tensor out = product.view({out_ch, batch, g.out_h, g.out_w}).permute({1, 0, 2, 3}).contiguous();
  if (b.defined()) add_(out, b.view({1, out_ch, 1, 1}));
  return out;
}

std::vector<Tensor> exact_backward(const DeviceSaved& s, const Tensor& grad_output,
                                   const std::vector<bool>& needs) {
  const cpu::ConvGeometry& g = s.geometry;
  const std::int64_t batch = s.input_shape[0], out_ch = s.weight.size(0);
  const std::int64_t cols = g.col_cols(), ld = batch * cols, rows = g.col_rows();
  std::vector<Tensor> grads(3);
  const Tensor dy = grad_output.contiguous();
  const Device dev = dy.device();
  if (ld == 0) {  // empty batch
    if (needs[0]) grads[0] = zeros(s.input_shape, dy.dtype(), dev);
    if (needs[1]) grads[1] = zeros(s.weight.shape(), dy.dtype(), dev);
    if (needs[2]) grads[2] = zeros({out_ch}, dy.dtype(), dev);
    return grads;
  }
  if (needs[2]) {
    grads[2] = Tensor::empty({out_ch}, dy.dtype(), dev);
    Tensor partial = Tensor::empty({batch * out_ch}, DType::f64, dev);
    kernels_for(dev).conv_bias_grad(dy.dtype(), batch, out_ch, cols, dy.raw_data(),
                                    grads[2].raw_data(), static_cast<double*>(partial.raw_data()),
                                    stream_for(dev));
  }
  if (!needs[0] && !needs[1]) return grads;
  const DeviceGemm gemm{dy};
  const bool batched = conv_batched_gemm(g, batch);
  if (needs[1]) {
    RINGLET_CHECK(s.col.defined(), AutogradError, kOp,
                  ": the weight started requiring grad after the forward pass; run it again");
    grads[1] = Tensor::empty(s.weight.shape(), dy.dtype(), dev);
    if (batched) {
      const Tensor dy_t = dy.view({batch, out_ch, cols}).permute({1, 0, 2}).contiguous();
      gemm(false, true, out_ch, rows, ld, dy_t, 0, ld, s.col, 0, ld, 0.0, grads[1], 0, rows);
    } else {
      for (std::int64_t n = 0; n < batch; ++n) {
        gemm(false, true, out_ch, rows, cols, dy, n * out_ch * cols, cols, s.col, n * cols, ld,
             n == 0 ? 0.0 : 1.0, grads[1], 0, rows);
      }
    }
  }
  if (needs[0]) {
    // One image at a time, as the CPU: its column gradient, then col2im into its planes.
    Tensor scratch = Tensor::empty({rows, cols}, dy.dtype(), dev);
    grads[0] = Tensor::empty(s.input_shape, dy.dtype(), dev);
    const std::int64_t image_size = g.channels * g.height * g.width;
    const auto es = static_cast<std::int64_t>(core::dtype_size(dy.dtype()));
    for (std::int64_t n = 0; n < batch; ++n) {
      gemm(true, false, rows, cols, out_ch, s.weight, 0, rows, dy, n * out_ch * cols, cols, 0.0,
           scratch, 0, cols);
      kernels_for(dev).col2im(dy.dtype(), device_shape(g), 1, scratch.raw_data(),
                              static_cast<char*>(grads[0].raw_data()) + n * image_size * es,
                              stream_for(dev));
    }
  }
  return grads;
}

Tensor exact_conv2d(const cpu::ConvGeometry& g, const Tensor& input, const Tensor& weight,
                    const Tensor& bias) {
  const Tensor x = input.detach().contiguous();
  const Tensor w = weight.detach().contiguous();
  const Tensor b = bias.defined() ? bias.detach().contiguous() : Tensor();
  Tensor col, out;
  {
    NoGradGuard no_grad;
    if (x.size(0) == 0) {
      out = Tensor::empty({0, w.size(0), g.out_h, g.out_w}, x.dtype(), x.device());
    } else {
      out = exact_forward(g, x, w, b, col);
    }
  }
  if (!any_requires_grad({input, weight, bias})) return out;
  const bool weight_grad = grad_enabled() && weight.requires_grad();
  auto saved =
      std::make_shared<DeviceSaved>(DeviceSaved{g, x.shape(), w, weight_grad ? col : Tensor()});
  return record(kOp, out, {input, weight, bias},
                [saved](const Tensor& grad_output, const std::vector<bool>& needs) {
                  return exact_backward(*saved, grad_output, needs);
                });
}

// --- The fast path: the whole batch in three library calls or kernels per pass.
// forward: im2col of the batch, one batched GEMM writing NCHW (image n's [O, L] from column
//   block n of the [rows, N*L] matrix), one epilogue kernel adding the bias (and the
//   activation);
// weight gradient: dy as [O, N*L] (one transpose), one GEMM against the columns;
// input gradient: one batched GEMM into a column matrix of the batch, one col2im of it.

struct FastSaved {
  cpu::ConvGeometry geometry;
  Shape input_shape;
  Tensor weight, col, out;  // out: the activation's output (ReLU's mask), when there is one
  kernels::Activation act;
  bool half;  // the forward ran on half-precision values (autocast): the same math backward
};

Tensor fast_forward(const cpu::ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor& b,
                    kernels::Activation act, Tensor& col) {
  const std::int64_t batch = x.size(0), out_ch = w.size(0), cols = g.col_cols();
  const std::int64_t ld = batch * cols, rows = g.col_rows();
  const Device dev = x.device();
  auto& k = kernels_for(dev);
  col = Tensor::empty({rows, ld}, x.dtype(), dev);
  k.im2col(x.dtype(), device_shape(g), batch, x.raw_data(), col.raw_data(), stream_for(dev));
  Tensor out = Tensor::empty({batch, out_ch, g.out_h, g.out_w}, x.dtype(), dev);
  k.gemm_batched(x.dtype(), false, false, out_ch, cols, rows, w.raw_data(), rows, 0, col.raw_data(),
                 ld, cols, 0.0, out.raw_data(), cols, out_ch * cols, batch, stream_for(dev));
  k.bias_act(x.dtype(), batch, out_ch, cols, b.defined() ? b.raw_data() : nullptr, out.raw_data(),
             act, stream_for(dev));
  return out;
}

std::vector<Tensor> fast_backward(const FastSaved& s, const Tensor& grad_output,
                                  const std::vector<bool>& needs) {
  const TensorCoreScope math(s.half);
  const cpu::ConvGeometry& g = s.geometry;
  const std::int64_t batch = s.input_shape[0], out_ch = s.weight.size(0);
  const std::int64_t cols = g.col_cols(), ld = batch * cols, rows = g.col_rows();
  Tensor dy = grad_output.contiguous();
  if (s.act == kernels::Activation::relu) dy = relu_gradient(dy, s.out);
  const Device dev = dy.device();
  auto& k = kernels_for(dev);
  std::vector<Tensor> grads(3);
  if (needs[2]) {
    grads[2] = Tensor::empty({out_ch}, dy.dtype(), dev);
    Tensor partial = Tensor::empty({batch * out_ch}, DType::f64, dev);
    k.conv_bias_grad(dy.dtype(), batch, out_ch, cols, dy.raw_data(), grads[2].raw_data(),
                     static_cast<double*>(partial.raw_data()), stream_for(dev));
  }
  if (needs[1]) {
    RINGLET_CHECK(s.col.defined(), AutogradError, kOp,
                  ": the weight started requiring grad after the forward pass; run it again");
    const Tensor dy_t = dy.view({batch, out_ch, cols}).permute({1, 0, 2}).contiguous();
    grads[1] = Tensor::empty(s.weight.shape(), dy.dtype(), dev);
    k.gemm(dy.dtype(), false, true, out_ch, rows, ld, dy_t.raw_data(), ld, s.col.raw_data(), ld,
           0.0, grads[1].raw_data(), rows, stream_for(dev));
  }
  if (needs[0]) {
    Tensor gcol = Tensor::empty({rows, ld}, dy.dtype(), dev);
    k.gemm_batched(dy.dtype(), true, false, rows, cols, out_ch, s.weight.raw_data(), rows, 0,
                   dy.raw_data(), cols, out_ch * cols, 0.0, gcol.raw_data(), ld, cols, batch,
                   stream_for(dev));
    grads[0] = Tensor::empty(s.input_shape, dy.dtype(), dev);
    k.col2im(dy.dtype(), device_shape(g), batch, gcol.raw_data(), grads[0].raw_data(),
             stream_for(dev));
  }
  return grads;
}

// --- On a GPU with cuDNN (tensor/cuda/cudnn_conv.h): each pass one cuDNN call on the NCHW
// tensors themselves (no column matrix), the bias and the activation in the epilogue kernel.

struct CudnnSaved {
  cuda::CudnnShape shape;
  Shape input_shape;
  Tensor x, weight, out;  // out: the activation's output (ReLU's mask), when there is one
  kernels::Activation act;
  bool half;
};

cuda::CudnnShape cudnn_shape(const cpu::ConvGeometry& g, std::int64_t batch, std::int64_t out_ch) {
  const auto i = [](std::int64_t v) { return static_cast<int>(v); };
  return {i(batch),        i(g.channels), i(g.height),   i(g.width),
          i(out_ch),       i(g.kernel_h), i(g.kernel_w), i(g.stride_h),
          i(g.stride_w),   i(g.pad_h),    i(g.pad_w),    i(g.dilation_h),
          i(g.dilation_w), i(g.out_h),    i(g.out_w),    tensor_cores_allowed()};
}

bool use_cudnn(const Tensor& x) {
  return x.device().is_cuda() && x.dtype() == DType::f32 && cuda::cudnn_unavailable().empty();
}

// A workspace for one cuDNN call from the caching allocator, freed (stream-ordered) with `keep`.
cuda::Workspace workspace_on(Device dev, Tensor& keep) {
  return [dev, &keep](std::size_t bytes) -> void* {
    if (bytes == 0) return nullptr;
    keep = Tensor::empty({static_cast<std::int64_t>(bytes)}, DType::u8, dev);
    return keep.raw_data();
  };
}

std::vector<Tensor> cudnn_backward(const CudnnSaved& s, const Tensor& grad_output,
                                   const std::vector<bool>& needs) {
  const TensorCoreScope math(s.half);
  Tensor dy = grad_output.contiguous();
  if (s.act == kernels::Activation::relu) dy = relu_gradient(dy, s.out);
  const Device dev = dy.device();
  void* stream = stream_for(dev);
  std::vector<Tensor> grads(3);
  if (needs[2]) {
    grads[2] = Tensor::empty({s.shape.o}, dy.dtype(), dev);
    Tensor partial = Tensor::empty({s.shape.n * s.shape.o}, DType::f64, dev);
    kernels_for(dev).conv_bias_grad(dy.dtype(), s.shape.n, s.shape.o, s.shape.out_h * s.shape.out_w,
                                    dy.raw_data(), grads[2].raw_data(),
                                    static_cast<double*>(partial.raw_data()), stream);
  }
  Tensor keep;
  if (needs[1]) {
    grads[1] = Tensor::empty(s.weight.shape(), dy.dtype(), dev);
    cuda::cudnn_backward_filter(s.shape, s.x.raw_data(), dy.raw_data(), grads[1].raw_data(), stream,
                                dev.index, workspace_on(dev, keep));
  }
  if (needs[0]) {
    grads[0] = Tensor::empty(s.input_shape, dy.dtype(), dev);
    cuda::cudnn_backward_data(s.shape, s.weight.raw_data(), dy.raw_data(), grads[0].raw_data(),
                              stream, dev.index, workspace_on(dev, keep));
  }
  return grads;
}

Tensor cudnn_conv2d(const cpu::ConvGeometry& g, const Tensor& input, const Tensor& weight,
                    const Tensor& bias, kernels::Activation act) {
  const Tensor x = input.detach().contiguous();
  const Tensor w = weight.detach().contiguous();
  const Tensor b = bias.defined() ? bias.detach().contiguous() : Tensor();
  const Device dev = x.device();
  const cuda::CudnnShape shape = cudnn_shape(g, x.size(0), w.size(0));
  Tensor out = Tensor::empty({x.size(0), w.size(0), g.out_h, g.out_w}, x.dtype(), dev);
  {
    Tensor keep;
    cuda::cudnn_forward(shape, x.raw_data(), w.raw_data(), out.raw_data(), stream_for(dev),
                        dev.index, workspace_on(dev, keep));
  }
  kernels_for(dev).bias_act(x.dtype(), x.size(0), w.size(0), g.out_h * g.out_w,
                            b.defined() ? b.raw_data() : nullptr, out.raw_data(), act,
                            stream_for(dev));
  if (!any_requires_grad({input, weight, bias})) return out;
  auto saved = std::make_shared<CudnnSaved>(
      CudnnSaved{shape, x.shape(), x, w, act == kernels::Activation::none ? Tensor() : out.detach(),
                 act, half_operands()});
  return record(kOp, out, {input, weight, bias},
                [saved](const Tensor& grad_output, const std::vector<bool>& needs) {
                  return cudnn_backward(*saved, grad_output, needs);
                });
}

Tensor fast_conv2d(const cpu::ConvGeometry& g, const Tensor& input, const Tensor& weight,
                   const Tensor& bias, kernels::Activation act) {
  if (use_cudnn(input)) return cudnn_conv2d(g, input, weight, bias, act);
  const Tensor x = input.detach().contiguous();
  const Tensor w = weight.detach().contiguous();
  const Tensor b = bias.defined() ? bias.detach().contiguous() : Tensor();
  Tensor col, out;
  {
    NoGradGuard no_grad;
    out = fast_forward(g, x, w, b, act, col);
  }
  if (!any_requires_grad({input, weight, bias})) return out;
  const bool weight_grad = grad_enabled() && weight.requires_grad();
  auto saved = std::make_shared<FastSaved>(
      FastSaved{g, x.shape(), w, weight_grad ? col : Tensor(),
                act == kernels::Activation::none ? Tensor() : out.detach(), act, half_operands()});
  return record(kOp, out, {input, weight, bias},
                [saved](const Tensor& grad_output, const std::vector<bool>& needs) {
                  return fast_backward(*saved, grad_output, needs);
                });
}

}  // namespace

Tensor conv2d_device(const cpu::ConvGeometry& g, const Tensor& input, const Tensor& weight,
                     const Tensor& bias, kernels::Activation act) {
  RINGLET_CHECK(input.dtype() == DType::f32 || input.dtype() == DType::f64, DTypeError, kOp,
                ": dtype ", input.dtype(), " is not supported (f32 and f64 are)");
  if (input.size(0) > 0 && !deterministic()) return fast_conv2d(g, input, weight, bias, act);
  Tensor out = exact_conv2d(g, input, weight, bias);
  return act == kernels::Activation::relu ? relu(out) : out;
}

}  // namespace ringlet::tensor
