// ops_bench: CPU throughput of the training hot path. GEMM through tensor::matmul against
// cblas_sgemm called directly on the same operands (the "OpenBLAS peak" of this machine, in
// this run), then conv2d forward and backward for the Fashion-MNIST CNN's two conv layers at
// batch 64, against the raw cblas time of the GEMMs inside them (the rest is im2col, col2im
// and layout transposes). Every result is verified; a wrong one makes the exit status 1.
// --device emu|cuda[:N] runs our side there (operands copied over once; each timed run ends
// with a device synchronize); the peak column stays the host's cblas_sgemm, for scale.
// usage: ops_bench [--reps N] [--threads N] [--filter TEXT] [--device cpu]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench/program_main.h"
#include "core/threads.h"
#include "device/runtime.h"
#include "device/stream.h"
#include "tensor/ops.h"

namespace {

using namespace ringlet;
using namespace ringlet::tensor;

struct Config {
  int reps = 40;
  int threads = core::num_threads();
  std::string filter;   // run only the benches whose name contains it
  core::Device device;  // where our side runs
};

struct Result {
  std::string bench, shape;
  double median_ms, gflops, peak_gflops;
  bool ok;
};

struct Timing {
  double ours_ms, peak_ms;  // medians
};

// Times `ours` (after an untimed `setup`) and `peak` alternately, rep by rep, so that both see
// the same machine load; returns the median of each.
Timing paired_median_ms(int reps, const std::function<void()>& setup,
                        const std::function<void()>& ours, const std::function<void()>& peak) {
  const auto time = [](const std::function<void()>& fn) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  };
  for (int i = 0; i < 2; ++i) {  // warm caches, page in buffers, start BLAS threads
    setup();
    ours();
    peak();
  }
  std::vector<double> a, b;
  for (int i = 0; i < reps; ++i) {
    setup();
    a.push_back(time(ours));
    b.push_back(time(peak));
  }
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return {a[a.size() / 2], b[b.size() / 2]};
}

double gflops(double flops, double ms) { return flops / (ms * 1e6); }

struct GemmShape {
  std::string name;
  std::int64_t m, n, k;
  bool trans_a, trans_b;
};

// C[m, n] = op(A) op(B) with op(A) [m, k]; a transposed operand is stored transposed and seen
// through a transpose view, so matmul and cblas read the same memory the same way.
Result bench_gemm(const GemmShape& s, const Config& cfg, Generator& gen) {
  const Tensor a_store = uniform(s.trans_a ? Shape{s.k, s.m} : Shape{s.m, s.k}, -1, 1, gen);
  const Tensor b_store = uniform(s.trans_b ? Shape{s.n, s.k} : Shape{s.k, s.n}, -1, 1, gen);
  const Tensor a_dev = a_store.to(cfg.device), b_dev = b_store.to(cfg.device);
  const Tensor a = s.trans_a ? a_dev.transpose(0, 1) : a_dev;
  const Tensor b = s.trans_b ? b_dev.transpose(0, 1) : b_dev;
  std::vector<float> raw(static_cast<std::size_t>(s.m * s.n));
  Tensor ours;
  const Timing t = paired_median_ms(
      cfg.reps, [] {},
      [&] {
        ours = matmul(a, b);
        device::synchronize(cfg.device);
      },
      [&] {
        cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans,
                    s.trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(s.m),
                    static_cast<int>(s.n), static_cast<int>(s.k), 1.0f, a_store.data<float>(),
                    static_cast<int>(a_store.size(1)), b_store.data<float>(),
                    static_cast<int>(b_store.size(1)), 0.0f, raw.data(), static_cast<int>(s.n));
      });
  // Same library, same operands: only the blocking can differ, so the tolerance is tight.
  const auto got = ours.to_vector<float>();
  const double tol = 1e-5 * static_cast<double>(s.k);
  bool ok = ours.shape() == Shape{s.m, s.n};
  for (std::size_t i = 0; ok && i < got.size(); ++i) ok = std::abs(got[i] - raw[i]) <= tol;
  const double flops = 2.0 * s.m * s.n * s.k;
  const std::string shape = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
                            std::to_string(s.k) + (s.trans_a ? " A^T" : "") +
                            (s.trans_b ? " B^T" : "");
  return {s.name, shape, t.ours_ms, gflops(flops, t.ours_ms), gflops(flops, t.peak_ms), ok};
}

struct ConvLayer {
  std::string name;
  Shape input, weight;
  bool input_grad;  // the first layer's images need no gradient
};

// Direct sum for one output element / one weight or input gradient element, in f64.
double direct_out(const std::vector<float>& x, const std::vector<float>& w,
                  const std::vector<float>& b, const Shape& xs, const Shape& ws, std::int64_t n,
                  std::int64_t o, std::int64_t y, std::int64_t xx) {
  const std::int64_t c_ = xs[1], h = xs[2], wd = xs[3], kh = ws[2], kw = ws[3];
  double total = b[o];
  for (std::int64_t c = 0; c < c_; ++c)
    for (std::int64_t i = 0; i < kh; ++i)
      for (std::int64_t j = 0; j < kw; ++j) {
        const std::int64_t iy = y - 1 + i, ix = xx - 1 + j;  // stride 1, padding 1
        if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
        total += static_cast<double>(x[((n * c_ + c) * h + iy) * wd + ix]) *
                 w[((o * c_ + c) * kh + i) * kw + j];
      }
  return total;
}

double direct_grad_weight(const std::vector<float>& x, const std::vector<float>& go,
                          const Shape& xs, const Shape& ws, std::int64_t o, std::int64_t c,
                          std::int64_t i, std::int64_t j) {
  const std::int64_t n_ = xs[0], c_ = xs[1], h = xs[2], wd = xs[3], o_ = ws[0];
  double total = 0;
  for (std::int64_t n = 0; n < n_; ++n)
    for (std::int64_t y = 0; y < h; ++y)
      for (std::int64_t xx = 0; xx < wd; ++xx) {
        const std::int64_t iy = y - 1 + i, ix = xx - 1 + j;
        if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
        total += static_cast<double>(go[((n * o_ + o) * h + y) * wd + xx]) *
                 x[((n * c_ + c) * h + iy) * wd + ix];
      }
  return total;
}

bool close(double got, double want, double scale) {
  return std::abs(got - want) <= 1e-4 * scale + 1e-4 * std::abs(want);
}

// Spot checks of a backward pass against direct sums: grad_w taps and grad_b.
bool backward_ok(const ConvLayer& layer, const Tensor& x, const Tensor& w, const Tensor& b,
                 const std::vector<float>& xv, const std::vector<float>& gov) {
  const std::int64_t n = layer.input[0], c = layer.input[1], h = layer.input[2],
                     wd = layer.input[3], o = layer.weight[0];
  const double scale = std::sqrt(static_cast<double>(n * h * wd));
  const auto gwv = w.grad().to_vector<float>(), gbv = b.grad().to_vector<float>();
  bool ok = !layer.input_grad || x.grad().shape() == layer.input;
  for (std::int64_t k = 0; ok && k < 4; ++k) {
    const std::int64_t oo = (k * 5) % o, cc = (k * 3) % c, i = k % 3, j = (k + 1) % 3;
    const double want = direct_grad_weight(xv, gov, layer.input, layer.weight, oo, cc, i, j);
    ok = close(gwv[((oo * c + cc) * 3 + i) * 3 + j], want, scale);
  }
  for (std::int64_t oo = 0; ok && oo < o; ++oo) {
    double want = 0;
    for (std::int64_t nn = 0; nn < n; ++nn)
      for (std::int64_t p = 0; p < h * wd; ++p) want += gov[(nn * o + oo) * h * wd + p];
    ok = close(gbv[oo], want, scale);
  }
  return ok;
}

std::vector<Result> bench_conv(const ConvLayer& layer, const Config& cfg, Generator& gen) {
  Tensor x = uniform(layer.input, -1, 1, gen).to(cfg.device);
  const Tensor w = uniform(layer.weight, -0.3, 0.3, gen).to(cfg.device).requires_grad_();
  const Tensor b = uniform({layer.weight[0]}, -0.3, 0.3, gen).to(cfg.device).requires_grad_();
  if (layer.input_grad) x.requires_grad_();
  Conv2dOptions opt;
  opt.padding = {1, 1};
  const std::int64_t n = layer.input[0], c = layer.input[1], h = layer.input[2],
                     wd = layer.input[3], o = layer.weight[0];
  const std::int64_t rows = c * layer.weight[2] * layer.weight[3], cols = n * h * wd;
  const Tensor grad_out = uniform({n, o, h, wd}, -1, 1, gen).to(cfg.device);

  // The GEMMs inside, through cblas directly on buffers of the same sizes: forward
  // [O, rows] x [rows, cols]; backward grad_w = dy [O, cols] x col^T and, for a layer whose
  // input needs a gradient, W^T x dy.
  std::vector<float> wa(static_cast<std::size_t>(o * rows), 0.1f);
  std::vector<float> col(static_cast<std::size_t>(rows * cols), 0.2f);
  std::vector<float> wide(static_cast<std::size_t>(o * cols), 0.3f);
  std::vector<float> gw(wa.size()), gcol(col.size());
  const int O = static_cast<int>(o), R = static_cast<int>(rows), L = static_cast<int>(cols);

  Tensor out;
  const Timing fwd = paired_median_ms(
      cfg.reps, [] {},
      [&] {
        out = conv2d(x, w, b, opt);
        device::synchronize(cfg.device);
      },
      [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, O, L, R, 1.0f, wa.data(), R,
                    col.data(), L, 0.0f, wide.data(), L);
      });
  const auto fresh_graph = [&] {
    for (const Tensor& t : {x, w, b}) t.set_grad(Tensor());
    out = conv2d(x, w, b, opt);
  };
  const Timing bwd = paired_median_ms(
      cfg.reps, fresh_graph,
      [&] {
        out.backward(grad_out);
        device::synchronize(cfg.device);
      },
      [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, O, R, L, 1.0f, wide.data(), L,
                    col.data(), L, 0.0f, gw.data(), R);
        if (layer.input_grad) {
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, R, L, O, 1.0f, wa.data(), R,
                      wide.data(), L, 0.0f, gcol.data(), L);
        }
      });

  // Spot checks against direct sums: output corners and centres, grad_w taps, grad_b.
  const auto xv = x.to_vector<float>(), wv = w.to_vector<float>(), bv = b.to_vector<float>();
  const auto ov = out.to_vector<float>(), gov = grad_out.to_vector<float>();
  bool fwd_ok = out.shape() == Shape{n, o, h, wd};
  for (std::int64_t k = 0; fwd_ok && k < 16; ++k) {
    const std::int64_t nn = (k * 7) % n, oo = (k * 5) % o, y = (k * 3) % h, xx = (k * 11) % wd;
    const double want = direct_out(xv, wv, bv, layer.input, layer.weight, nn, oo, y, xx);
    fwd_ok = close(ov[((nn * o + oo) * h + y) * wd + xx], want, std::sqrt(rows));
  }
  const bool bwd_ok = backward_ok(layer, x, w, b, xv, gov);

  const double fwd_flops = 2.0 * o * rows * cols;
  const double bwd_flops = fwd_flops * (layer.input_grad ? 2 : 1);
  const std::string shape = shape_str(layer.input) + " * " + shape_str(layer.weight);
  return {{layer.name + " fwd", shape, fwd.ours_ms, gflops(fwd_flops, fwd.ours_ms),
           gflops(fwd_flops, fwd.peak_ms), fwd_ok},
          {layer.name + " bwd", shape, bwd.ours_ms, gflops(bwd_flops, bwd.ours_ms),
           gflops(bwd_flops, bwd.peak_ms), bwd_ok}};
}

Config parse(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--reps" || arg == "--threads") && i + 1 < argc) {
      const int value = std::atoi(argv[++i]);
      if (value < 1) throw core::ValueError(arg + " needs a positive integer");
      (arg == "--reps" ? cfg.reps : cfg.threads) = value;
    } else if (arg == "--filter" && i + 1 < argc) {
      cfg.filter = argv[++i];
    } else if (arg == "--device" && i + 1 < argc) {
      cfg.device = core::parse_device(argv[++i]);
      if (!cfg.device.is_cpu()) device::check_device(cfg.device);
    } else {
      throw core::ValueError("unknown argument '" + arg + "', or it needs a value");
    }
  }
  return cfg;
}

int run(const Config& cfg) {
  core::set_num_threads(cfg.threads);
  openblas_set_num_threads(cfg.threads);  // the raw cblas calls run with the same count
  Generator gen(2024);

  // Square sizes, then the conv layers' GEMMs at batch 64 (conv1: 1->32 on 28x28, conv2:
  // 32->64 on 14x14; rows = C*3*3, cols = 64*H*W).
  const std::vector<GemmShape> gemms = {
      {"gemm", 256, 256, 256, false, false},
      {"gemm", 512, 512, 512, false, false},
      {"gemm", 1024, 1024, 1024, false, false},
      {"conv1 fwd gemm", 32, 50176, 9, false, false},
      {"conv2 fwd gemm", 64, 12544, 288, false, false},
      {"conv2 grad_w gemm", 64, 288, 12544, false, true},
      {"conv2 grad_col gemm", 288, 12544, 64, true, false},
  };
  const std::vector<ConvLayer> layers = {
      {"conv1", {64, 1, 28, 28}, {32, 1, 3, 3}, false},
      {"conv2", {64, 32, 14, 14}, {64, 32, 3, 3}, true},
  };

  std::vector<Result> results;
  const auto wanted = [&](const std::string& name) {
    return name.find(cfg.filter) != std::string::npos;
  };
  for (const auto& g : gemms) {
    if (wanted(g.name)) results.push_back(bench_gemm(g, cfg, gen));
  }
  for (const auto& layer : layers) {
    if (!wanted(layer.name)) continue;
    for (auto& r : bench_conv(layer, cfg, gen)) results.push_back(r);
  }

  std::printf(
      "# ops_bench: f32 on %s, %d thread(s), median of %d runs; peak = the host's cblas_sgemm "
      "on the same GEMM shape(s)\n",
      cfg.device.str().c_str(), cfg.threads, cfg.reps);
  std::printf("%-20s %-34s %10s %9s %11s %7s %6s\n", "bench", "shape", "median_ms", "GFLOP/s",
              "peak GF/s", "ratio", "check");
  int wrong = 0;
  for (const auto& r : results) {
    std::printf("%-20s %-34s %10.3f %9.1f %11.1f %7.2f %6s\n", r.bench.c_str(), r.shape.c_str(),
                r.median_ms, r.gflops, r.peak_gflops, r.gflops / r.peak_gflops,
                r.ok ? "ok" : "WRONG");
    wrong += r.ok ? 0 : 1;
  }
  for (const auto& r : results) {
    std::printf(
        "{\"bench\": \"%s\", \"shape\": \"%s\", \"median_ms\": %.4f, \"gflops\": %.2f, "
        "\"peak_gflops\": %.2f, \"ratio\": %.3f, \"threads\": %d, \"device\": \"%s\", "
        "\"ok\": %s}\n",
        r.bench.c_str(), r.shape.c_str(), r.median_ms, r.gflops, r.peak_gflops,
        r.gflops / r.peak_gflops, cfg.threads, cfg.device.str().c_str(), r.ok ? "true" : "false");
  }
  if (wrong > 0) {
    std::fprintf(stderr, "ops_bench: %d result(s) failed verification\n", wrong);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ringlet::bench::program_main(
      "ops_bench", "usage: ops_bench [--reps N] [--threads N] [--filter TEXT] [--device cpu]\n",
      argc, argv, parse, run);
}
