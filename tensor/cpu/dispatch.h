// Runtime dtype -> C++ type dispatch for CPU kernels, and element conversions.
// Usage: dispatch_floating(t.dtype(), "exp", [&]<class T>() { kernel<T>(...); });
// Half and BFloat16 are storage types: kernels compute in float and convert at the edges.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/dtype.h"
#include "core/error.h"

namespace ringlet::tensor::cpu {

using core::BFloat16;
using core::DType;
using core::Half;

template <class D, class S>
inline D convert(S value) {
  if constexpr (std::is_same_v<S, D>) {
    return value;
  } else if constexpr (std::is_same_v<S, Half>) {
    return convert<D>(core::half_to_float(value.bits));
  } else if constexpr (std::is_same_v<S, BFloat16>) {
    return convert<D>(core::bf16_to_float(value.bits));
  } else if constexpr (std::is_same_v<D, Half>) {
    return Half{core::float_to_half(static_cast<float>(value))};
  } else if constexpr (std::is_same_v<D, BFloat16>) {
    return BFloat16{core::float_to_bf16(static_cast<float>(value))};
  } else {
    return static_cast<D>(value);
  }
}

// f32, f64 only: the types arithmetic kernels support.
template <class F>
decltype(auto) dispatch_floating(DType dtype, const char* op, F&& fn) {
  switch (dtype) {
    case DType::f32: return fn.template operator()<float>();
    case DType::f64: return fn.template operator()<double>();
    default:
      RINGLET_THROW(DTypeError, op, ": dtype ", dtype,
                    " is not supported (f32 and f64 are; convert f16/bf16 with .to(DType::f32))");
  }
}

// f32, f64, i64, i32, u8: the types comparisons, copies and integer arithmetic support.
template <class F>
decltype(auto) dispatch_numeric(DType dtype, const char* op, F&& fn) {
  switch (dtype) {
    case DType::f32: return fn.template operator()<float>();
    case DType::f64: return fn.template operator()<double>();
    case DType::i64: return fn.template operator()<std::int64_t>();
    case DType::i32: return fn.template operator()<std::int32_t>();
    case DType::u8: return fn.template operator()<std::uint8_t>();
    default:
      RINGLET_THROW(DTypeError, op, ": dtype ", dtype,
                    " is not supported (convert f16/bf16 with .to(DType::f32))");
  }
}

// Every dtype, storage types included: for copies and conversions.
template <class F>
decltype(auto) dispatch_all(DType dtype, F&& fn) {
  switch (dtype) {
    case DType::f32: return fn.template operator()<float>();
    case DType::f64: return fn.template operator()<double>();
    case DType::f16: return fn.template operator()<Half>();
    case DType::bf16: return fn.template operator()<BFloat16>();
    case DType::i64: return fn.template operator()<std::int64_t>();
    case DType::i32: return fn.template operator()<std::int32_t>();
    case DType::u8: return fn.template operator()<std::uint8_t>();
  }
  RINGLET_THROW(DTypeError, "unknown dtype code ", static_cast<int>(dtype));
}

}  // namespace ringlet::tensor::cpu
