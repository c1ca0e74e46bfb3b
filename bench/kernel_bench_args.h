// The arguments the kernel benchmarks share (reduce_kernel_bench, host_reduce_bench,
// tensor_loops_bench): sizes with K/M/G suffixes (1024-based, as nccl-tests), comma lists, the
// dtype names nccl-tests uses for the three float types, the median of repeated timings, and
// the host kernels' timing (time_per_call).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/isa.h"

namespace ringlet::bench {

inline std::size_t parse_size(const std::string& text) {
  std::size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &used);
  } catch (const std::exception&) {
    RINGLET_THROW(ValueError, "bad size '", text, "' (a number with K, M or G)");
  }
  const std::string unit = text.substr(used);
  if (unit.empty()) return v;
  if (unit == "K") return v << 10;
  if (unit == "M") return v << 20;
  if (unit == "G") return v << 30;
  RINGLET_THROW(ValueError, "bad size '", text, "' (use K, M or G)");
}

inline std::vector<std::string> split_commas(const std::string& value) {
  std::vector<std::string> parts;
  for (std::size_t at = 0; at <= value.size();) {
    const std::size_t comma = std::min(value.find(',', at), value.size());
    parts.push_back(value.substr(at, comma - at));
    at = comma + 1;
  }
  return parts;
}

// "float", "bfloat16" or "half".
inline core::DType parse_float_dtype(const std::string& name) {
  if (name == "float") return core::DType::f32;
  if (name == "bfloat16") return core::DType::bf16;
  if (name == "half") return core::DType::f16;
  RINGLET_THROW(ValueError, "--dtype '", name, "' is not float, bfloat16 or half");
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// "# levels this CPU runs: baseline avx2 avx512 (in use: avx512)": the host kernels' header.
inline void print_isa_levels() {
  std::printf("# levels this CPU runs:");
  for (const core::Isa isa : core::supported_isas()) {
    std::printf(" %s", std::string(core::isa_name(isa)).c_str());
  }
  std::printf(" (in use: %s)\n", std::string(core::isa_name(core::active_isa())).c_str());
}

// Seconds per call of a host kernel: calls are batched to about 2 ms, and the median of `reps`
// batches taken.
template <class F>
double time_per_call(int reps, F call) {
  using Clock = std::chrono::steady_clock;
  const auto probe = Clock::now();
  call();
  const double once = std::chrono::duration<double>(Clock::now() - probe).count();
  const int batch = std::clamp(static_cast<int>(2e-3 / std::max(once, 1e-9)), 1, 10000);
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    for (int k = 0; k < batch; ++k) call();
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count() / batch);
  }
  return median(times);
}

}  // namespace ringlet::bench
