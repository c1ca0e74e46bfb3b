// The arguments the kernel benchmarks share (reduce_kernel_bench, host_reduce_bench): sizes
// with K/M/G suffixes (1024-based, as nccl-tests), comma lists, the dtype names nccl-tests uses
// for the three float types, and the median of repeated timings.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

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

}  // namespace ringlet::bench
