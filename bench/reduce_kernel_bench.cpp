// reduce_kernel_bench: the collectives' device reduction kernel (dst = dst + src) against a
// device-to-device copy of the same buffer, measured in the same run on the same GPU: the copy
// is the memory-bound limit the kernel should reach (it moves 3 bytes per byte of dst: two
// reads and a write; the copy 2). Per size, the median over --reps of the mean time of 10
// back-to-back launches (then a device synchronize), both as effective GB/s (1 GB = 1e9 B) and
// as the ratio kernel / copy. Checks the kernel's result against the host kernel first.
// Without a GPU it prints why and exits 77.
//
// usage: reduce_kernel_bench [--sizes 1M,16M,256M] [--reps 20] [--dtype float|bfloat16|half]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/kernel_bench_args.h"
#include "bench/program_main.h"
#include "collectives/cuda/reduce.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "core/env.h"
#include "core/error.h"
#include "device/cuda/device_runtime.h"
#include "device/runtime.h"

using namespace ringlet;
namespace dcuda = ringlet::device::cuda;
using Clock = std::chrono::steady_clock;

namespace {

device::Runtime& gpu() { return device::runtime(core::Device::cuda(0)); }

void* upload(const std::vector<char>& host) {
  void* d = gpu().malloc(host.size());
  RINGLET_CHECK(d != nullptr, OutOfMemoryError, host.size(), " bytes do not fit on the GPU");
  gpu().copy_async(d, host.data(), host.size(), gpu().compute_stream());
  gpu().synchronize(gpu().compute_stream());
  return d;
}

// Seconds per call: the median over `reps` of (10 calls, then synchronize) / 10.
template <class F>
double time_per_call(int reps, F call) {
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    for (int k = 0; k < 10; ++k) call();
    gpu().synchronize(gpu().compute_stream());
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count() / 10);
  }
  return bench::median(times);
}

struct Options {
  std::vector<std::size_t> sizes{1 << 20, 16 << 20, 256 << 20};
  int reps = 20;
  core::DType dtype = core::DType::f32;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    RINGLET_CHECK(flag == "--sizes" || flag == "--reps" || flag == "--dtype", ValueError,
                  "unknown flag '", flag, "'");
    RINGLET_CHECK(i + 1 < argc, ValueError, flag, " needs a value");
    const std::string value = argv[++i];
    if (flag == "--sizes") {
      o.sizes.clear();
      for (const auto& part : bench::split_commas(value))
        o.sizes.push_back(bench::parse_size(part));
    } else if (flag == "--reps") {
      o.reps = static_cast<int>(core::parse_int(value, "--reps"));
      RINGLET_CHECK(o.reps >= 1, ValueError, "--reps must be >= 1, not ", o.reps);
    } else if (flag == "--dtype") {
      o.dtype = bench::parse_float_dtype(value);
    } else {
      RINGLET_THROW(ValueError, "unknown flag '", flag, "'");
    }
  }
  return o;
}

// One row of the table (and its JSON line): the kernel checked against the host kernel, then
// timed against a device-to-device copy of the same bytes.
void bench_size(std::size_t bytes, core::DType dtype, int reps) {
  const std::size_t es = core::dtype_size(dtype);
  const std::size_t count = bytes / es;
  std::vector<char> a(count * es), b(count * es);
  for (std::size_t i = 0; i < count * es; ++i) {
    a[i] = static_cast<char>(i % 7);  // small values in every byte: finite in every dtype
    b[i] = static_cast<char>(i % 5);
  }
  void* const stream = gpu().compute_stream();
  void* dst = upload(a);
  void* src = upload(b);
  void* copy = upload(a);
  collectives::cuda::reduce_into(dst, src, count, dtype, collectives::ReduceOp::sum, 0, stream);
  std::vector<char> got(a.size());
  gpu().copy_async(got.data(), dst, got.size(), stream);
  gpu().synchronize(stream);
  collectives::reduce_into(a.data(), b.data(), count, dtype, collectives::ReduceOp::sum);
  RINGLET_CHECK(std::memcmp(got.data(), a.data(), a.size()) == 0, Error,
                "the device kernel's sum differs from the host kernel's");

  const double reduce_s = time_per_call(reps, [&] {
    collectives::cuda::reduce_into(dst, src, count, dtype, collectives::ReduceOp::sum, 0, stream);
  });
  const double copy_s = time_per_call(reps, [&] { gpu().copy_async(copy, src, a.size(), stream); });
  const double reduce_gbps = 3.0 * a.size() / reduce_s / 1e9;
  const double copy_gbps = 2.0 * a.size() / copy_s / 1e9;
  std::printf("  %12zu %10s %12.1f %12.1f %8.3f\n", a.size(),
              std::string(core::dtype_name(dtype)).c_str(), reduce_gbps, copy_gbps,
              reduce_gbps / copy_gbps);
  std::printf("%s\n", nlohmann::json{{"bench", "reduce_kernel_bench"},
                                     {"bytes", a.size()},
                                     {"type", std::string(core::dtype_name(dtype))},
                                     {"reduce_gbps", reduce_gbps},
                                     {"copy_gbps", copy_gbps},
                                     {"ratio", reduce_gbps / copy_gbps}}
                          .dump()
                          .c_str());
  gpu().free(dst);
  gpu().free(src);
  gpu().free(copy);
}

int run(const Options& o) {
  if (!dcuda::built_with_cuda() || dcuda::device_count() == 0) {
    std::puts(dcuda::built_with_cuda() ? "skipped: no CUDA device"
                                       : "skipped: ringlet was built without CUDA");
    return 77;
  }
  std::printf("# %12s %10s %12s %12s %8s\n", "bytes", "type", "reduce GB/s", "copy GB/s", "ratio");
  for (const std::size_t bytes : o.sizes) bench_size(bytes, o.dtype, o.reps);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ringlet::bench::program_main(
      "reduce_kernel_bench",
      "usage: reduce_kernel_bench [--sizes 1M,16M,256M] [--reps 20] [--dtype "
      "float|bfloat16|half]\n",
      argc, argv, parse, run);
}
