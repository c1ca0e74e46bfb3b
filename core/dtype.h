// Element types. f32 is the working type, f64 serves gradient checks, f16/bf16 are storage
// types with conversion (arithmetic on them happens in f32), integers hold labels and pixels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string_view>

namespace ringlet::core {

enum class DType : std::uint8_t { f32, f64, f16, bf16, i64, i32, u8 };

std::size_t dtype_size(DType dtype);  // bytes per element
std::string_view dtype_name(DType dtype);
bool is_floating(DType dtype);  // f32 f64 f16 bf16
std::ostream& operator<<(std::ostream& out, DType dtype);

// IEEE binary16 and bfloat16 conversions; float -> half/bf16 rounds to nearest even.
float half_to_float(std::uint16_t bits);
std::uint16_t float_to_half(float value);
float bf16_to_float(std::uint16_t bits);
std::uint16_t float_to_bf16(float value);

// Storage-only element types: distinct from uint16_t so that templates can tell them apart.
struct Half {
  std::uint16_t bits;
};
struct BFloat16 {
  std::uint16_t bits;
};

// The DType of a C++ element type.
template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<Half>() {
  return DType::f16;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return DType::bf16;
}
template <>
constexpr DType dtype_of<std::int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<std::int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<std::uint8_t>() {
  return DType::u8;
}

}  // namespace ringlet::core
