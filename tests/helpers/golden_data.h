// Shared by the golden tests: loading a file of tests/golden/, and the splitmix64 fill that
// make_nn_golden.py's hash_uniform() reproduces bit for bit (weights and inputs too large to
// store as decimals are regenerated from it on both sides).
#pragma once

#include <cstdint>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/ops/creation.h"

namespace ringlet::testing {

inline nlohmann::json load_golden(const std::string& file) {
  const std::string path = std::string(RINGLET_SOURCE_ROOT) + "/tests/golden/" + file;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return nlohmann::json::parse(in);
}

// The dtype named in a golden file ("f32", "f64", "i64", "u8").
inline core::DType golden_dtype(const std::string& name) {
  if (name == "f32") return core::DType::f32;
  if (name == "f64") return core::DType::f64;
  if (name == "i64") return core::DType::i64;
  if (name == "u8") return core::DType::u8;
  throw std::runtime_error("golden file: unknown dtype " + name);
}
inline core::DType golden_dtype(const nlohmann::json& tensor) {
  return golden_dtype(tensor.at("dtype").get<std::string>());
}

// A stored tensor's values: exact decimals, or "nan", "inf" and "-inf" (JSON has no number for
// them; tests/golden/make_nonfinite_golden.py writes them so).
inline std::vector<double> golden_values(const nlohmann::json& j) {
  std::vector<double> values;
  for (const nlohmann::json& v : j.at("values")) {
    if (!v.is_string()) {
      values.push_back(v.get<double>());
      continue;
    }
    const std::string s = v.get<std::string>();
    if (s == "nan") {
      values.push_back(std::numeric_limits<double>::quiet_NaN());
    } else if (s == "inf" || s == "-inf") {
      values.push_back((s == "inf" ? 1 : -1) * std::numeric_limits<double>::infinity());
    } else {
      throw std::runtime_error("golden file: value \"" + s + "\" is not a number");
    }
  }
  return values;
}

// A stored tensor: {"dtype", "shape", "values"} (values as golden_values reads them).
inline tensor::Tensor golden_tensor(const nlohmann::json& j) {
  return tensor::from_vector(golden_values(j), j.at("shape").get<tensor::Shape>(), golden_dtype(j));
}

// n float32 values uniform in [low, high), element i from splitmix64(seed + (i + 1) * golden).
inline std::vector<float> hash_uniform_values(std::int64_t n, std::uint64_t seed, double low,
                                              double high) {
  std::vector<float> values(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint64_t z = seed + static_cast<std::uint64_t>(i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const double u = static_cast<double>(z >> 11) * 0x1.0p-53;
    values[static_cast<std::size_t>(i)] = static_cast<float>(low + (high - low) * u);
  }
  return values;
}

}  // namespace ringlet::testing
