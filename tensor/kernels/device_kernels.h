// The kernels a device (cuda, emu) offers the op layer, as one interface with two
// implementations compiled from the same source (device_kernels_impl.h): by nvcc for CUDA
// (tensor/cuda/device_kernels.cu) and by g++ for the emulated device (tensor/emu/kernels.cpp).
// Operands are Views (strided.h) already broadcast to the output's shape; every call queues
// its work on `stream` and returns. Dtypes follow the CPU kernels: arithmetic on f32/f64,
// integer-friendly ops on i64/i32/u8 too, copies between any two dtypes.
#pragma once

#include "core/device.h"
#include "tensor/kernels/elementwise.h"
#include "tensor/kernels/nn.h"
#include "tensor/kernels/strided.h"

namespace ringlet::tensor::kernels {

using Stream = void*;  // the device's stream handle

// The hyperparameters of one multi-tensor Adam/AdamW step.
struct AdamParams {
  double beta1, beta2, eps, weight_decay;
  double lr;
  bool decoupled;  // AdamW
};
// One tensor of it: contiguous, n elements, with its own bias corrections.
struct AdamTensor {
  void* param;
  const void* grad;
  void *m, *v, *vmax;  // vmax: amsgrad only, else nullptr
  std::int64_t n;
  double step_size;              // lr / (1 - beta1^t)
  double bias_correction2_sqrt;  // sqrt(1 - beta2^t)
};

struct SgdParams {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
};
// One tensor of a multi-tensor SGD step: contiguous, n elements.
struct SgdTensor {
  void* param;
  const void* grad;
  void* buf;  // momentum buffer, nullptr without momentum
  std::int64_t n;
  bool first;  // the momentum buffer starts from the gradient
};

class DeviceKernels {
 public:
  virtual ~DeviceKernels() = default;
  virtual void fill(const View& out, double value, Stream stream) = 0;
  // out = in, converting the dtype (f16/bf16 round to nearest even).
  virtual void copy(const View& out, const View& in, Stream stream) = 0;
  virtual void binary(BinaryOp op, const View& out, const View& a, const View& b,
                      Stream stream) = 0;
  virtual void unary(const UnaryParams& op, const View& out, const View& in, Stream stream) = 0;
  // grad_in = g * d op(x) / dx, with y = op(x).
  virtual void unary_backward(const UnaryParams& op, const View& grad_in, const View& g,
                              const View& x, const View& y, Stream stream) = 0;
  virtual void compare(CompareOp op, const View& out, const View& a, const View& b,
                       Stream stream) = 0;  // out is u8
  virtual void where(const View& out, const View& cond, const View& a, const View& b,
                     Stream stream) = 0;
  virtual void add_scaled(const View& out, const View& a, const View& b, double alpha,
                          Stream stream) = 0;
  // out = (sum of in over the dims where out has size 1 and in does not); out has
  // in's rank, divided by `divisor` (1 for a sum, the count for a mean). Accumulates in double
  // (floating) or i64 (integers, whose out is i64), in the input's row-major order, one thread per
  // output element.
  virtual void sum(const View& out, const View& in, double divisor, Stream stream) = 0;

  // c[m, n] = op(a)[m, k] op(b)[k, n] + beta c, row-major with row strides lda/ldb/ldc (op is
  // a transpose where asked); f32/f64. cuBLAS on a GPU, OpenBLAS on the emulated device.
  virtual void gemm(DType dtype, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                    std::int64_t k, const void* a, std::int64_t lda, const void* b,
                    std::int64_t ldb, double beta, void* c, std::int64_t ldc, Stream stream) = 0;
  // `batch` GEMMs as one library call: c_i = op(a_i) op(b_i) + beta c_i, with x_i = x + i *
  // stride_x (elements; a stride of 0 shares the operand), row-major as gemm().
  virtual void gemm_batched(DType dtype, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                            std::int64_t k, const void* a, std::int64_t lda, std::int64_t stride_a,
                            const void* b, std::int64_t ldb, std::int64_t stride_b, double beta,
                            void* c, std::int64_t ldc, std::int64_t stride_c, std::int64_t batch,
                            Stream stream) = 0;
  // In place over contiguous data seen as [outer, channels, inner]: x = act(x + bias[channel])
  // (bias may be null: the activation only). A convolution's or a linear layer's epilogue.
  virtual void bias_act(DType dtype, std::int64_t outer, std::int64_t channels, std::int64_t inner,
                        const void* bias, void* data, Activation act, Stream stream) = 0;
  // Convolution's column matrix [rows, batch * L] of contiguous NCHW images, and its adjoint.
  virtual void im2col(DType dtype, const ConvShape& g, std::int64_t batch, const void* image,
                      void* col, Stream stream) = 0;
  virtual void col2im(DType dtype, const ConvShape& g, std::int64_t batch, const void* col,
                      void* image, Stream stream) = 0;
  // out = in * mask with mask[i] = scale where counter_uniform(seed, i) < keep, else 0.
  virtual void dropout(DType dtype, std::int64_t n, std::uint64_t seed, double keep, double scale,
                       const void* in, void* out, void* mask, Stream stream) = 0;
  // grad[o] = the sum of dy's channel o over batch and plane (nn.h's ConvBiasRunFn and
  // ChannelTotalFn); `partial` is device scratch of batch * channels f64.
  virtual void conv_bias_grad(DType dtype, std::int64_t batch, std::int64_t channels,
                              std::int64_t plane, const void* dy, void* grad, double* partial,
                              Stream stream) = 0;
  virtual void max_pool2d(DType dtype, const PoolShape& g, std::int64_t planes, const void* in,
                          void* out, std::int64_t* where, Stream stream) = 0;
  virtual void max_pool2d_backward(DType dtype, const PoolShape& g, std::int64_t planes,
                                   const void* grad_out, const std::int64_t* where, void* grad_in,
                                   Stream stream) = 0;
  virtual void avg_pool2d(DType dtype, const PoolShape& g, std::int64_t planes, const void* in,
                          void* out, Stream stream) = 0;
  virtual void avg_pool2d_backward(DType dtype, const PoolShape& g, std::int64_t planes,
                                   const void* grad_out, void* grad_in, Stream stream) = 0;
  // out = input gathered along `dim` by a contiguous i64 index of `index_shape` (nn.h's
  // GatherFn; bad[i] = 1 where index[i] is out of range); and its adjoint into a contiguous
  // grad_in of `in_shape`.
  virtual void gather(DType dtype, const View& in, int dim, const View& index, void* out,
                      std::uint8_t* bad, Stream stream) = 0;
  virtual void gather_backward(DType dtype, const View& grad_in, int dim, const View& index,
                               const void* g, Stream stream) = 0;
  // Batch norm over a contiguous [batch, channels, spatial] input, the CPU kernel's arithmetic
  // (nn.h): statistics (f64 per channel), running-stat update, normalization, and the
  // backward's per-channel sums and input gradient. Parameters may be strided (stride_*).
  // The sums take device scratch `partial`: batch * channels f64 for the statistics, twice
  // that for the backward's sums.
  virtual void batch_norm_stats(DType dtype, const BnShape& l, double eps, const void* x,
                                double* mean, double* var, double* invstd, double* partial,
                                Stream stream) = 0;
  // Synchronized batch norm: the per-channel sums of x (centered: of (x - mean)^2) over batch
  // and spatial dims, not yet divided, so that they can be summed across ranks first.
  virtual void batch_norm_channel_sums(DType dtype, const BnShape& l, bool centered, const void* x,
                                       const double* mean, double* sums, double* partial,
                                       Stream stream) = 0;
  virtual void batch_norm_eval_stats(DType dtype, std::int64_t channels, double eps,
                                     const void* running_mean, std::int64_t stride_mean,
                                     const void* running_var, std::int64_t stride_var, double* mean,
                                     double* invstd, Stream stream) = 0;
  virtual void batch_norm_update_running(DType dtype, std::int64_t channels, double momentum,
                                         double count, const double* mean, const double* var,
                                         void* running_mean, std::int64_t stride_mean,
                                         void* running_var, std::int64_t stride_var,
                                         Stream stream) = 0;
  virtual void batch_norm_normalize(DType dtype, const BnShape& l, const void* x,
                                    const double* mean, const double* invstd, const void* w,
                                    std::int64_t stride_w, const void* b, std::int64_t stride_b,
                                    void* y, Activation act, Stream stream) = 0;
  virtual void batch_norm_backward_sums(DType dtype, const BnShape& l, const void* x,
                                        const void* dy, const double* mean, const double* invstd,
                                        double* sum_dy, double* sum_dy_xhat, double* partial,
                                        Stream stream) = 0;
  virtual void batch_norm_backward_input(DType dtype, const BnShape& l, const void* x,
                                         const void* dy, const double* mean, const double* invstd,
                                         const void* w, std::int64_t stride_w, const double* sum_dy,
                                         const double* sum_dy_xhat, double count, bool training,
                                         void* dx, Stream stream) = 0;
  // Along lanes of contiguous tensors (nn.h's Lanes).
  virtual void softmax(DType dtype, bool log, const Lanes& lanes, const void* in, void* out,
                       Stream stream) = 0;
  virtual void softmax_backward(DType dtype, bool log, const Lanes& lanes, const void* g,
                                const void* y, void* out, Stream stream) = 0;
  virtual void extreme(DType dtype, bool max, const Lanes& lanes, const void* in, void* values,
                       std::int64_t* indices, Stream stream) = 0;
  // Cross-entropy rows of contiguous logits [rows, classes] with i64 labels; lse is f64 [rows].
  virtual void cross_entropy(DType dtype, std::int64_t rows, std::int64_t classes, double eps,
                             const void* logits, const std::int64_t* labels, void* loss,
                             double* lse, Stream stream) = 0;
  virtual void cross_entropy_backward(DType dtype, std::int64_t rows, std::int64_t classes,
                                      double eps, int reduction, const void* logits,
                                      const std::int64_t* labels, const double* lse, const void* g,
                                      void* grad, Stream stream) = 0;
  // Records a label outside [0, classes) in the device's sticky error words `error` with `code`
  // (device/sticky_error.h); the host sees it at its next synchronization.
  virtual void check_labels(std::int64_t n, std::int64_t classes, const std::int64_t* labels,
                            std::uint64_t* error, std::uint64_t code, Stream stream) = 0;
  // One SGD step over `count` tensors of one dtype, as few launches as the kernel's table takes
  // (kMaxMultiTensors a launch), PyTorch's foreach SGD. `lr`: the rate in device memory (f64),
  // read when the kernel runs (a captured step's rate changes between replays); null: o.lr.
  virtual void sgd(DType dtype, const SgdTensor* tensors, int count, const SgdParams& o,
                   const double* lr, Stream stream) = 0;
  // One Adam/AdamW step over `count` tensors, as few launches as that.
  virtual void adam(DType dtype, const AdamTensor* tensors, int count, const AdamParams& o,
                    Stream stream) = 0;
};

// The kernels of a device kind (DeviceError for cpu; NotBuiltError for cuda without CUDA).
DeviceKernels& device_kernels(core::Device device);
// The two implementations (defined in their executors' libraries).
DeviceKernels& emu_kernels();
DeviceKernels& cuda_kernels();

}  // namespace ringlet::tensor::kernels
