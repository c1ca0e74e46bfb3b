// How a JSON value becomes a TrainConfig member, exactly (config files and command-line values
// alike): an integer member takes a JSON integer within its type's range (not a boolean, not a
// fraction, never wrapped), a real a finite JSON number, a boolean a JSON boolean, a string a
// JSON string. Anything else throws ConfigValueError saying what the key takes and what it
// got; the caller names the key and where the value came from.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "core/error.h"

namespace ringlet::trainer {

struct ConfigValueError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Whether v is a JSON integer that T holds.
template <class T>
bool fits_integer(const nlohmann::json& v) {
  using Limits = std::numeric_limits<T>;
  if (v.is_number_unsigned()) {
    return v.get<std::uint64_t>() <= static_cast<std::uint64_t>(Limits::max());
  }
  if (!v.is_number_integer()) return false;
  const auto value = v.get<std::int64_t>();
  if (value < 0) return value >= static_cast<std::int64_t>(Limits::min());
  return static_cast<std::uint64_t>(value) <= static_cast<std::uint64_t>(Limits::max());
}

template <class T>
T config_value(const nlohmann::json& v) {
  const auto fail = [&](const std::string& takes) {
    throw ConfigValueError(
        core::str("takes ", takes, ", got ", v.dump(), " (", v.type_name(), ")"));
  };
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) fail("true or false");
  } else if constexpr (std::is_integral_v<T>) {
    using Limits = std::numeric_limits<T>;
    if (!fits_integer<T>(v)) {
      fail(core::str("a whole number in [", +Limits::min(), ", ", +Limits::max(), "]"));
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number() || !std::isfinite(v.get<double>())) fail("a finite number");
  } else {
    if (!v.is_string()) fail("a string");
  }
  return v.get<T>();
}

}  // namespace ringlet::trainer
