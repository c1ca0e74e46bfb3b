// host_reduce_bench: the collectives' host reduction kernel (dst = dst + src, in place, as the
// ring's reduce-scatter steps run it) at every instruction-set level this CPU runs
// (core/isa.h), against memcpy of the same bytes in the same run. Per size and dtype, the
// median over --reps of the mean time of back-to-back calls lasting about 2 ms, as effective
// GB/s (1 GB = 1e9 B; the kernel moves 3 bytes per byte of dst: two reads and a write, the
// copy 2), the ratio kernel / copy, and the speed-up over the baseline level. Every level's
// result is checked against the baseline's bits first.
//
// usage: host_reduce_bench [--sizes 64K,1M,16M] [--reps 15] [--dtype float,half,bfloat16]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/kernel_bench_args.h"
#include "bench/program_main.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "core/env.h"
#include "core/error.h"
#include "core/isa.h"

using namespace ringlet;

namespace {

struct Options {
  std::vector<std::size_t> sizes{64 << 10, 1 << 20, 16 << 20};
  int reps = 15;
  std::vector<core::DType> dtypes;  // empty: float, half, bfloat16
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
      for (const auto& part : bench::split_commas(value)) {
        o.sizes.push_back(bench::parse_size(part));
        RINGLET_CHECK(o.sizes.back() >= 4, ValueError, "--sizes: '", part,
                      "' is less than one float (4 bytes)");
      }
    } else if (flag == "--reps") {
      o.reps = static_cast<int>(core::parse_int(value, "--reps"));
      RINGLET_CHECK(o.reps >= 1, ValueError, "--reps must be >= 1, not ", o.reps);
    } else {
      o.dtypes.clear();
      for (const auto& part : bench::split_commas(value))
        o.dtypes.push_back(bench::parse_float_dtype(part));
    }
  }
  if (o.dtypes.empty())
    o.dtypes = {bench::parse_float_dtype("float"), bench::parse_float_dtype("half"),
                bench::parse_float_dtype("bfloat16")};
  return o;
}

// Small values in every byte: finite in every dtype, and sums stay finite however often the
// timed loop adds src into dst.
std::vector<char> pattern(std::size_t bytes, int period) {
  std::vector<char> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>(i % period);
  return data;
}

// The level's sum must equal the baseline's, bit for bit, before it is timed.
void check_against_baseline(core::Isa isa, core::DType dtype, std::size_t count,
                            const std::vector<char>& a, const std::vector<char>& b) {
  std::vector<char> want = a, got = a;
  collectives::reduce_pair(want.data(), want.data(), b.data(), count, dtype,
                           collectives::ReduceOp::sum, core::Isa::baseline);
  collectives::reduce_pair(got.data(), got.data(), b.data(), count, dtype,
                           collectives::ReduceOp::sum, isa);
  RINGLET_CHECK(want == got, Error, core::isa_name(isa), " ", dtype,
                " sum differs from the baseline's");
}

void bench_point(std::size_t bytes, core::DType dtype, int reps) {
  const std::size_t count = bytes / core::dtype_size(dtype);
  const std::vector<char> a = pattern(count * core::dtype_size(dtype), 7);
  const std::vector<char> b = pattern(a.size(), 5);
  std::vector<char> dst = a, copy(a.size());
  const double copy_s =
      bench::time_per_call(reps, [&] { std::memcpy(copy.data(), b.data(), b.size()); });
  const double copy_gbps = 2.0 * a.size() / copy_s / 1e9;
  double baseline_gbps = 0;
  for (const core::Isa isa : core::supported_isas()) {
    check_against_baseline(isa, dtype, count, a, b);
    const double reduce_s = bench::time_per_call(reps, [&] {
      collectives::reduce_pair(dst.data(), dst.data(), b.data(), count, dtype,
                               collectives::ReduceOp::sum, isa);
    });
    const double gbps = 3.0 * a.size() / reduce_s / 1e9;
    if (isa == core::Isa::baseline) baseline_gbps = gbps;
    const std::string isa_name(core::isa_name(isa));
    const std::string type(core::dtype_name(dtype));
    std::printf("  %12zu %10s %9s %12.2f %12.2f %8.3f %9.2f\n", a.size(), type.c_str(),
                isa_name.c_str(), gbps, copy_gbps, gbps / copy_gbps, gbps / baseline_gbps);
    std::printf("%s\n", nlohmann::json{{"bench", "host_reduce_bench"},
                                       {"bytes", a.size()},
                                       {"type", type},
                                       {"isa", isa_name},
                                       {"reduce_gbps", gbps},
                                       {"copy_gbps", copy_gbps},
                                       {"vs_baseline", gbps / baseline_gbps}}
                            .dump()
                            .c_str());
  }
}

int run(const Options& o) {
  bench::print_isa_levels();
  std::printf("# %12s %10s %9s %12s %12s %8s %9s\n", "bytes", "type", "isa", "reduce GB/s",
              "memcpy GB/s", "ratio", "x base");
  for (const core::DType dtype : o.dtypes) {
    for (const std::size_t bytes : o.sizes) bench_point(bytes, dtype, o.reps);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ringlet::bench::program_main(
      "host_reduce_bench",
      "usage: host_reduce_bench [--sizes 64K,1M,16M] [--reps 15] [--dtype "
      "float,half,bfloat16]\n",
      argc, argv, parse, run);
}
