// The device kernels, once, over an executor Exec with
//   template <class F> static void launch(Stream stream, std::int64_t n, const F& f);
// which runs f(i) for every i in [0, n) on the device, queued on `stream`: a grid-stride CUDA
// kernel (tensor/cuda/device_kernels.cu) or a task on the emulated stream's thread
// (tensor/emu/kernels.cpp); and
//   template <class T> static void gemm(Stream, bool ta, bool tb, m, n, k, const T* a, lda,
//                                       const T* b, ldb, T beta, T* c, ldc);
//   template <class T> static void gemm_batched(Stream, ta, tb, m, n, k, a, lda, stride_a, b,
//                                               ldb, stride_b, T beta, c, ldc, stride_c, batch);
// (cuBLAS, or OpenBLAS on the stream's thread). Included by exactly those two files.
#pragma once

#include <initializer_list>
#include <utility>

#include "core/error.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/kernels/device_kernels.h"

namespace ringlet::tensor::kernels {

// out[i] = f(in_0[i], ..., in_{K-1}[i]) over one iteration shape.
template <class TOut, class TIn, int K, class F>
struct MapKernel {
  TOut* out;
  const TIn* in[K > 0 ? K : 1];
  Indexer<K + 1> index;
  F f;

  RINGLET_HD void operator()(std::int64_t i) const {
    std::int64_t off[K + 1];
    index.offsets(i, off);
    apply(off, std::make_integer_sequence<int, K>());
  }
  template <int... I>
  RINGLET_HD void apply(const std::int64_t (&off)[K + 1], std::integer_sequence<int, I...>) const {
    out[off[0]] = f(in[I][off[I + 1]]...);
  }
};

template <class TOut, class TIn>
struct ConvertFn {
  RINGLET_HD TOut operator()(TIn x) const { return convert<TOut>(x); }
};
template <class T>
struct ConstantFn {
  T value;
  RINGLET_HD T operator()() const { return value; }
};
template <class T>
struct WhereKernel {
  T* out;
  const std::uint8_t* cond;
  const T* a;
  const T* b;
  Indexer<4> index;
  RINGLET_HD void operator()(std::int64_t i) const {
    std::int64_t off[4];
    index.offsets(i, off);
    out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
  }
};

// One output element per index: walks the reduced sub-space of `in` in row-major order, the
// innermost reduced dim as a plain loop.
template <class TOut, class TIn, class Acc>
struct SumKernel {
  TOut* out;
  const TIn* in;
  int ndim;     // of the output's index space
  int reduced;  // reduced dims, outermost first
  std::int64_t out_sizes[kMaxDims], out_strides[kMaxDims], in_strides[kMaxDims];
  std::int64_t red_sizes[kMaxDims], red_strides[kMaxDims];
  std::int64_t reduced_count;
  double divisor;

  RINGLET_HD void operator()(std::int64_t j) const {
    std::int64_t base = 0, out_off = 0, rest = j;
    for (int d = ndim - 1; d >= 0; --d) {
      const std::int64_t i = rest % out_sizes[d];
      rest /= out_sizes[d];
      base += i * in_strides[d];
      out_off += i * out_strides[d];
    }
    Acc acc = 0;
    const std::int64_t inner = reduced > 0 ? red_sizes[reduced - 1] : 1;
    const std::int64_t step = reduced > 0 ? red_strides[reduced - 1] : 0;
    for (std::int64_t r = 0; r < reduced_count; r += inner) {
      std::int64_t off = base, left = r / inner;
      for (int d = reduced - 2; d >= 0; --d) {
        off += (left % red_sizes[d]) * red_strides[d];
        left /= red_sizes[d];
      }
      for (std::int64_t i = 0; i < inner; ++i) acc += static_cast<Acc>(in[off + i * step]);
    }
    if (divisor != 1.0) {
      out[out_off] = static_cast<TOut>(static_cast<double>(acc) / divisor);
    } else {
      out[out_off] = static_cast<TOut>(acc);
    }
  }
};

template <class Exec>
class KernelsImpl final : public DeviceKernels {
  // Fills a multi-tensor kernel's table with tensors[0, count) (fill(slot, tensor) for each
  // non-empty one) and calls run() each time kMaxMultiTensors are in, or the last ones are.
  template <class Entry, class Fill, class Run>
  static void for_table(const Entry* tensors, int count, TensorRanges& ranges, Fill fill, Run run) {
    ranges.count = 0;
    std::int64_t total = 0;
    for (int i = 0; i < count; ++i) {
      if (tensors[i].n == 0) continue;
      total += tensors[i].n;
      ranges.end[ranges.count] = total;
      fill(ranges.count, tensors[i]);
      if (++ranges.count == kMaxMultiTensors) {
        run();
        ranges.count = 0;
        total = 0;
      }
    }
    if (ranges.count > 0) run();
  }

 public:
  void fill(const View& out, double value, Stream stream) override {
    dispatch_all(out.dtype, "fill", [&]<class T>() {
      map<T, T, 0>(out, {}, ConstantFn<T>{convert<T>(value)}, stream);
    });
  }

  void copy(const View& out, const View& in, Stream stream) override {
    dispatch_all(out.dtype, "copy", [&]<class TOut>() {
      dispatch_all(in.dtype, "copy", [&]<class TIn>() {
        map<TOut, TIn, 1>(out, {&in}, ConvertFn<TOut, TIn>{}, stream);
      });
    });
  }

  void binary(BinaryOp op, const View& out, const View& a, const View& b, Stream stream) override {
    dispatch_arith(a.dtype, integer_friendly(op), binary_name(op), [&]<class T>() {
      with_binary(op, [&](auto kind) {
        map<T, T, 2>(out, {&a, &b}, BinaryFn<T, kind()>{}, stream);
      });
    });
  }

  void unary(const UnaryParams& op, const View& out, const View& in, Stream stream) override {
    dispatch_arith(in.dtype, integer_friendly(op.kind), unary_name(op.kind), [&]<class T>() {
      with_unary(op.kind, [&](auto kind) {
        map<T, T, 1>(out, {&in}, UnaryFn<T, kind()>{op.p0, op.p1}, stream);
      });
    });
  }

  void unary_backward(const UnaryParams& op, const View& grad_in, const View& g, const View& x,
                      const View& y, Stream stream) override {
    dispatch_arith(g.dtype, false, unary_name(op.kind), [&]<class T>() {
      with_unary(op.kind, [&](auto kind) {
        map<T, T, 3>(grad_in, {&g, &x, &y}, UnaryGradFn<T, kind()>{op.p0, op.p1}, stream);
      });
    });
  }

  void compare(CompareOp op, const View& out, const View& a, const View& b,
               Stream stream) override {
    dispatch_arith(a.dtype, true, compare_name(op), [&]<class T>() {
      with_compare(op, [&](auto kind) {
        map<std::uint8_t, T, 2>(out, {&a, &b}, CompareFn<T, kind()>{}, stream);
      });
    });
  }

  void where(const View& out, const View& cond, const View& a, const View& b,
             Stream stream) override {
    dispatch_arith(a.dtype, true, "where", [&]<class T>() {
      const View* views[4] = {&out, &cond, &a, &b};
      Exec::launch(stream, out.numel(),
                   WhereKernel<T>{out.as<T>(), cond.as<const std::uint8_t>(), a.as<const T>(),
                                  b.as<const T>(), Indexer<4>::make(views)});
    });
  }

  void add_scaled(const View& out, const View& a, const View& b, double alpha,
                  Stream stream) override {
    dispatch_arith(a.dtype, false, "add_scaled", [&]<class T>() {
      map<T, T, 2>(out, {&a, &b}, AddScaledFn<T>{static_cast<T>(alpha)}, stream);
    });
  }

  void sum(const View& out, const View& in, double divisor, Stream stream) override {
    dispatch_arith(in.dtype, true, "sum", [&]<class T>() {
      constexpr bool floating = std::is_floating_point_v<T>;
      using TOut = std::conditional_t<floating, T, std::int64_t>;
      using Acc = std::conditional_t<floating, double, std::int64_t>;
      SumKernel<TOut, T, Acc> k{};
      k.out = out.as<TOut>();
      k.in = in.as<const T>();
      k.reduced_count = 1;
      for (int d = 0; d < in.ndim; ++d) {
        if (out.sizes[d] == 1 && in.sizes[d] != 1) {
          k.red_sizes[k.reduced] = in.sizes[d];
          k.red_strides[k.reduced] = in.strides[d];
          ++k.reduced;
          k.reduced_count *= in.sizes[d];
        } else if (out.sizes[d] != 1) {
          k.out_sizes[k.ndim] = out.sizes[d];
          k.out_strides[k.ndim] = out.strides[d];
          k.in_strides[k.ndim] = in.strides[d];
          ++k.ndim;
        }
      }
      k.divisor = divisor;
      if (out.numel() > 0) Exec::launch(stream, out.numel(), k);
    });
  }

  void gemm(DType dtype, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
            const void* a, std::int64_t lda, const void* b, std::int64_t ldb, double beta, void* c,
            std::int64_t ldc, Stream stream) override {
    dispatch_arith(dtype, false, "matmul", [&]<class T>() {
      if constexpr (std::is_floating_point_v<T>) {  // integers never get here
        Exec::template gemm<T>(stream, trans_a, trans_b, m, n, k, static_cast<const T*>(a), lda,
                               static_cast<const T*>(b), ldb, static_cast<T>(beta),
                               static_cast<T*>(c), ldc);
      }
    });
  }

  void gemm_batched(DType dtype, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                    std::int64_t k, const void* a, std::int64_t lda, std::int64_t stride_a,
                    const void* b, std::int64_t ldb, std::int64_t stride_b, double beta, void* c,
                    std::int64_t ldc, std::int64_t stride_c, std::int64_t batch,
                    Stream stream) override {
    if (batch == 0) return;
    dispatch_arith(dtype, false, "matmul", [&]<class T>() {
      if constexpr (std::is_floating_point_v<T>) {  // integers never get here
        Exec::template gemm_batched<T>(stream, trans_a, trans_b, m, n, k, static_cast<const T*>(a),
                                       lda, stride_a, static_cast<const T*>(b), ldb, stride_b,
                                       static_cast<T>(beta), static_cast<T*>(c), ldc, stride_c,
                                       batch);
      }
    });
  }

  void bias_act(DType dtype, std::int64_t outer, std::int64_t channels, std::int64_t inner,
                const void* bias, void* data, Activation act, Stream stream) override {
    const std::int64_t n = outer * channels * inner;
    if (n == 0 || (bias == nullptr && act == Activation::none)) return;
    dispatch_arith(dtype, false, "bias and activation", [&]<class T>() {
      if constexpr (std::is_floating_point_v<T>) {
        launch(
            stream, n,
            BiasActFn<T>{channels, inner, static_cast<const T*>(bias), static_cast<T*>(data), act});
      }
    });
  }

  void im2col(DType dtype, const ConvShape& g, std::int64_t batch, const void* image, void* col,
              Stream stream) override {
    dispatch_arith(dtype, false, "conv2d", [&]<class T>() {
      launch(stream, g.rows() * batch * g.cols(),
             Im2colFn<T>{g, batch, static_cast<const T*>(image), static_cast<T*>(col)});
    });
  }

  void col2im(DType dtype, const ConvShape& g, std::int64_t batch, const void* col, void* image,
              Stream stream) override {
    dispatch_arith(dtype, false, "conv2d backward", [&]<class T>() {
      launch(stream, batch * g.channels * g.height * g.width,
             Col2imFn<T>{g, batch, static_cast<const T*>(col), static_cast<T*>(image)});
    });
  }

  void dropout(DType dtype, std::int64_t n, std::uint64_t seed, double keep, double scale,
               const void* in, void* out, void* mask, Stream stream) override {
    dispatch_arith(dtype, false, "dropout", [&]<class T>() {
      launch(stream, n,
             DropoutFn<T>{seed, keep, static_cast<T>(scale), static_cast<const T*>(in),
                          static_cast<T*>(out), static_cast<T*>(mask)});
    });
  }

  void conv_bias_grad(DType dtype, std::int64_t batch, std::int64_t channels, std::int64_t plane,
                      const void* dy, void* grad, double* partial, Stream stream) override {
    dispatch_arith(dtype, false, "conv2d backward", [&]<class T>() {
      launch(stream, batch * channels, ConvBiasRunFn<T>{plane, static_cast<const T*>(dy), partial});
      launch(stream, channels, ChannelTotalFn<T>{batch, channels, partial, static_cast<T*>(grad)});
    });
  }

  void max_pool2d(DType dtype, const PoolShape& g, std::int64_t planes, const void* in, void* out,
                  std::int64_t* where, Stream stream) override {
    dispatch_arith(dtype, false, "max_pool2d", [&]<class T>() {
      launch(stream, planes * g.out_h * g.out_w,
             MaxPoolFn<T>{g, static_cast<const T*>(in), static_cast<T*>(out), where});
    });
  }

  void max_pool2d_backward(DType dtype, const PoolShape& g, std::int64_t planes,
                           const void* grad_out, const std::int64_t* where, void* grad_in,
                           Stream stream) override {
    dispatch_arith(dtype, false, "max_pool2d backward", [&]<class T>() {
      launch(stream, planes * g.height * g.width,
             MaxPoolBackwardFn<T>{g, static_cast<const T*>(grad_out), where,
                                  static_cast<T*>(grad_in)});
    });
  }

  void avg_pool2d(DType dtype, const PoolShape& g, std::int64_t planes, const void* in, void* out,
                  Stream stream) override {
    dispatch_arith(dtype, false, "avg_pool2d", [&]<class T>() {
      launch(stream, planes * g.out_h * g.out_w,
             AvgPoolFn<T>{g, static_cast<const T*>(in), static_cast<T*>(out)});
    });
  }

  void avg_pool2d_backward(DType dtype, const PoolShape& g, std::int64_t planes,
                           const void* grad_out, void* grad_in, Stream stream) override {
    dispatch_arith(dtype, false, "avg_pool2d backward", [&]<class T>() {
      launch(stream, planes * g.height * g.width,
             AvgPoolBackwardFn<T>{g, static_cast<const T*>(grad_out), static_cast<T*>(grad_in)});
    });
  }

  void gather(DType dtype, const View& in, int dim, const View& index, void* out, std::uint8_t* bad,
              Stream stream) override {
    dispatch_arith(dtype, true, "gather", [&]<class T>() {
      GatherFn<T> f{};
      f.ndim = index.ndim;
      f.dim = dim;
      for (int d = 0; d < index.ndim; ++d) {
        f.sizes[d] = index.sizes[d];
        f.in_strides[d] = in.strides[d];
      }
      f.size = in.sizes[dim];
      f.in = in.as<const T>();
      f.index = index.as<const std::int64_t>();
      f.out = static_cast<T*>(out);
      f.bad = bad;
      launch(stream, index.numel(), f);
    });
  }

  void gather_backward(DType dtype, const View& grad_in, int dim, const View& index, const void* g,
                       Stream stream) override {
    dispatch_arith(dtype, false, "gather backward", [&]<class T>() {
      GatherBackwardFn<T> f{};
      f.ndim = grad_in.ndim;
      f.dim = dim;
      for (int d = 0; d < grad_in.ndim; ++d) {
        f.in_sizes[d] = grad_in.sizes[d];
        f.index_sizes[d] = index.sizes[d];
      }
      f.g = static_cast<const T*>(g);
      f.index = index.as<const std::int64_t>();
      f.grad_in = grad_in.as<T>();
      launch(stream, grad_in.numel(), f);
    });
  }

  void batch_norm_stats(DType dtype, const BnShape& l, double eps, const void* x, double* mean,
                        double* var, double* invstd, double* partial, Stream stream) override {
    dispatch_arith(dtype, false, "batch_norm", [&]<class T>() {
      const auto* px = static_cast<const T*>(x);
      const std::int64_t runs = l.batch * l.channels;
      launch(stream, runs, BnRunSumFn<T, BnRun::x>{l, px, nullptr, nullptr, partial});
      launch(stream, l.channels, BnMeanFn{l, partial, mean});
      launch(stream, runs, BnRunSumFn<T, BnRun::centered_square>{l, px, nullptr, mean, partial});
      launch(stream, l.channels, BnVarFn{l, eps, partial, var, invstd});
    });
  }

  void batch_norm_channel_sums(DType dtype, const BnShape& l, bool centered, const void* x,
                               const double* mean, double* sums, double* partial,
                               Stream stream) override {
    dispatch_arith(dtype, false, "batch_norm", [&]<class T>() {
      const auto* px = static_cast<const T*>(x);
      const std::int64_t runs = l.batch * l.channels;
      if (centered) {
        launch(stream, runs, BnRunSumFn<T, BnRun::centered_square>{l, px, nullptr, mean, partial});
      } else {
        launch(stream, runs, BnRunSumFn<T, BnRun::x>{l, px, nullptr, nullptr, partial});
      }
      launch(stream, l.channels, ChannelTotalFn<double>{l.batch, l.channels, partial, sums});
    });
  }

  void batch_norm_eval_stats(DType dtype, std::int64_t channels, double eps,
                             const void* running_mean, std::int64_t stride_mean,
                             const void* running_var, std::int64_t stride_var, double* mean,
                             double* invstd, Stream stream) override {
    dispatch_arith(dtype, false, "batch_norm", [&]<class T>() {
      launch(stream, channels,
             BnEvalStatsFn<T>{eps, static_cast<const T*>(running_mean),
                              static_cast<const T*>(running_var), stride_mean, stride_var, mean,
                              invstd});
    });
  }

  void batch_norm_update_running(DType dtype, std::int64_t channels, double momentum, double count,
                                 const double* mean, const double* var, void* running_mean,
                                 std::int64_t stride_mean, void* running_var,
                                 std::int64_t stride_var, Stream stream) override {
    dispatch_arith(dtype, false, "batch_norm", [&]<class T>() {
      launch(stream, channels,
             BnRunningFn<T>{momentum, count / (count - 1), mean, var, static_cast<T*>(running_mean),
                            static_cast<T*>(running_var), stride_mean, stride_var});
    });
  }

  void batch_norm_normalize(DType dtype, const BnShape& l, const void* x, const double* mean,
                            const double* invstd, const void* w, std::int64_t stride_w,
                            const void* b, std::int64_t stride_b, void* y, Activation act,
                            Stream stream) override {
    dispatch_arith(dtype, false, "batch_norm", [&]<class T>() {
      launch(
          stream, l.batch * l.channels * l.spatial,
          BnNormalizeFn<T>{l, static_cast<const T*>(x), mean, invstd, static_cast<const T*>(w),
                           static_cast<const T*>(b), stride_w, stride_b, static_cast<T*>(y), act});
    });
  }

  void batch_norm_backward_sums(DType dtype, const BnShape& l, const void* x, const void* dy,
                                const double* mean, const double* invstd, double* sum_dy,
                                double* sum_dy_xhat, double* partial, Stream stream) override {
    dispatch_arith(dtype, false, "batch_norm backward", [&]<class T>() {
      const auto* px = static_cast<const T*>(x);
      const auto* pdy = static_cast<const T*>(dy);
      const std::int64_t runs = l.batch * l.channels;
      double* centered = partial + runs;
      launch(stream, runs, BnRunSumFn<T, BnRun::dy>{l, px, pdy, nullptr, partial});
      launch(stream, runs, BnRunSumFn<T, BnRun::dy_centered>{l, px, pdy, mean, centered});
      launch(stream, l.channels,
             BnBackwardTotalsFn{l, partial, centered, invstd, sum_dy, sum_dy_xhat});
    });
  }

  void batch_norm_backward_input(DType dtype, const BnShape& l, const void* x, const void* dy,
                                 const double* mean, const double* invstd, const void* w,
                                 std::int64_t stride_w, const double* sum_dy,
                                 const double* sum_dy_xhat, double count, bool training, void* dx,
                                 Stream stream) override {
    dispatch_arith(dtype, false, "batch_norm backward", [&]<class T>() {
      launch(stream, l.batch * l.channels * l.spatial,
             BnBackwardInputFn<T>{l, static_cast<const T*>(x), static_cast<const T*>(dy), mean,
                                  invstd, static_cast<const T*>(w), stride_w, sum_dy, sum_dy_xhat,
                                  count, training, static_cast<T*>(dx)});
    });
  }

  void softmax(DType dtype, bool log, const Lanes& lanes, const void* in, void* out,
               Stream stream) override {
    dispatch_arith(dtype, false, log ? "log_softmax" : "softmax", [&]<class T>() {
      const auto* x = static_cast<const T*>(in);
      auto* y = static_cast<T*>(out);
      if (log) {
        launch(stream, lanes.count(), SoftmaxLaneFn<T, true>{lanes, x, y});
      } else {
        launch(stream, lanes.count(), SoftmaxLaneFn<T, false>{lanes, x, y});
      }
    });
  }

  void softmax_backward(DType dtype, bool log, const Lanes& lanes, const void* g, const void* y,
                        void* out, Stream stream) override {
    dispatch_arith(dtype, false, "softmax backward", [&]<class T>() {
      const auto* gp = static_cast<const T*>(g);
      const auto* yp = static_cast<const T*>(y);
      auto* o = static_cast<T*>(out);
      if (log) {
        launch(stream, lanes.count(), SoftmaxBackwardLaneFn<T, true>{lanes, gp, yp, o});
      } else {
        launch(stream, lanes.count(), SoftmaxBackwardLaneFn<T, false>{lanes, gp, yp, o});
      }
    });
  }

  void extreme(DType dtype, bool max, const Lanes& lanes, const void* in, void* values,
               std::int64_t* indices, Stream stream) override {
    dispatch_arith(dtype, true, max ? "max" : "min", [&]<class T>() {
      const auto* x = static_cast<const T*>(in);
      auto* v = static_cast<T*>(values);
      if (max) {
        launch(stream, lanes.count(), ExtremeLaneFn<T, true>{lanes, x, v, indices});
      } else {
        launch(stream, lanes.count(), ExtremeLaneFn<T, false>{lanes, x, v, indices});
      }
    });
  }

  void cross_entropy(DType dtype, std::int64_t rows, std::int64_t classes, double eps,
                     const void* logits, const std::int64_t* labels, void* loss, double* lse,
                     Stream stream) override {
    dispatch_arith(dtype, false, "cross_entropy", [&]<class T>() {
      launch(stream, rows,
             CrossEntropyRowFn<T>{classes, eps, static_cast<const T*>(logits), labels,
                                  static_cast<T*>(loss), lse});
    });
  }

  void cross_entropy_backward(DType dtype, std::int64_t rows, std::int64_t classes, double eps,
                              int reduction, const void* logits, const std::int64_t* labels,
                              const double* lse, const void* g, void* grad,
                              Stream stream) override {
    dispatch_arith(dtype, false, "cross_entropy backward", [&]<class T>() {
      launch(stream, rows * classes,
             CrossEntropyGradFn<T>{rows, classes, eps, reduction, static_cast<const T*>(logits),
                                   labels, lse, static_cast<const T*>(g), static_cast<T*>(grad)});
    });
  }

  void check_labels(std::int64_t n, std::int64_t classes, const std::int64_t* labels,
                    std::uint64_t* error, std::uint64_t code, Stream stream) override {
    if (n > 0) launch(stream, n, LabelCheckFn{classes, labels, error, code});
  }

  void sgd(DType dtype, const SgdTensor* tensors, int count, const SgdParams& o, const double* lr,
           Stream stream) override {
    dispatch_arith(dtype, false, "SGD", [&]<class T>() {
      if constexpr (std::is_floating_point_v<T>) {  // integers never get here
        MultiSgdFn<T> f{};
        f.step = SgdStep<T>{static_cast<T>(o.weight_decay), static_cast<T>(o.momentum),
                            static_cast<T>(1 - o.dampening), o.weight_decay != 0, o.nesterov};
        f.neg_lr = static_cast<T>(-o.lr);
        f.lr = lr;
        for_table(
            tensors, count, f.ranges,
            [&](int slot, const SgdTensor& t) {
              f.p[slot] = static_cast<T*>(t.param);
              f.grad[slot] = static_cast<const T*>(t.grad);
              f.buf[slot] = static_cast<T*>(t.buf);
              f.first[slot] = t.first;
            },
            [&] { launch(stream, f.ranges.end[f.ranges.count - 1], f); });
      }
    });
  }

  void adam(DType dtype, const AdamTensor* tensors, int count, const AdamParams& o,
            Stream stream) override {
    dispatch_arith(dtype, false, "Adam", [&]<class T>() {
      if constexpr (std::is_floating_point_v<T>) {  // integers never get here
        MultiAdamFn<T> f{};
        f.step.wd = static_cast<T>(o.weight_decay);
        f.step.decay = static_cast<T>(1 - o.lr * o.weight_decay);
        f.step.beta1 = static_cast<T>(o.beta1);
        f.step.beta2 = static_cast<T>(o.beta2);
        f.step.one_minus_beta1 = static_cast<T>(1 - o.beta1);
        f.step.one_minus_beta2 = static_cast<T>(1 - o.beta2);
        f.step.eps = static_cast<T>(o.eps);
        f.step.l2 = !o.decoupled && o.weight_decay != 0;
        f.step.decoupled = o.decoupled;
        for_table(
            tensors, count, f.ranges,
            [&](int slot, const AdamTensor& t) {
              f.p[slot] = static_cast<T*>(t.param);
              f.grad[slot] = static_cast<const T*>(t.grad);
              f.m[slot] = static_cast<T*>(t.m);
              f.v[slot] = static_cast<T*>(t.v);
              f.vmax[slot] = static_cast<T*>(t.vmax);
              f.bc2_sqrt[slot] = static_cast<T>(t.bias_correction2_sqrt);
              f.neg_step_size[slot] = static_cast<T>(-t.step_size);
            },
            [&] { launch(stream, f.ranges.end[f.ranges.count - 1], f); });
      }
    });
  }

 private:
  template <class F>
  static void launch(Stream stream, std::int64_t n, const F& f) {
    if (n > 0) Exec::launch(stream, n, f);
  }

  template <class TOut, class TIn, int K, class F>
  static void map(const View& out, std::initializer_list<const View*> in, F f, Stream stream) {
    MapKernel<TOut, TIn, K, F> kernel{};
    kernel.out = out.as<TOut>();
    const View* views[K + 1];
    views[0] = &out;
    int k = 0;
    for (const View* v : in) {
      kernel.in[k] = v->as<const TIn>();
      views[++k] = v;
    }
    kernel.index = Indexer<K + 1>::make(views);
    kernel.f = f;
    const std::int64_t n = out.numel();
    if (n > 0) Exec::launch(stream, n, kernel);
  }

  // Every dtype (copies, fills): the CPU kernels' dispatch.
  template <class Fn>
  static void dispatch_all(DType dtype, const char* /*op*/, Fn&& fn) {
    cpu::dispatch_all(dtype, std::forward<Fn>(fn));
  }

  // f32/f64, plus i64/i32/u8 where the op is defined on integers.
  template <class Fn>
  static void dispatch_arith(DType dtype, bool integers, const char* op, Fn&& fn) {
    switch (dtype) {
      case DType::f32: return fn.template operator()<float>();
      case DType::f64: return fn.template operator()<double>();
      case DType::i64:
        if (integers) return fn.template operator()<std::int64_t>();
        break;
      case DType::i32:
        if (integers) return fn.template operator()<std::int32_t>();
        break;
      case DType::u8:
        if (integers) return fn.template operator()<std::uint8_t>();
        break;
      default: break;
    }
    RINGLET_THROW(DTypeError, op, ": dtype ", dtype, " is not supported on the device (",
                  integers ? "f32, f64, i64, i32 and u8 are" : "f32 and f64 are", ")");
  }
};

}  // namespace ringlet::tensor::kernels
