// One element of the host reduction: the ops (sum prod min max, integers wrapping) and the
// branch-free f16/bf16 conversions (core/half_convert.h), as the portable loops of
// reduce_loops.h apply them and as the vector loops' tails do. Included only by reduce_loops.h (one
// translation unit per instruction-set level), so everything has internal linkage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/half_convert.h"

namespace ringlet::collectives {

namespace {

using namespace core::lanes;  // NOLINT: bits_to, the f16/bf16 conversions and formats

// Signed integer overflow is undefined in C++; collectives wrap like PyTorch and NCCL do,
// so integer sums and products are done in the unsigned type of the same width.
template <class T>
T wrapping_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <class T>
T wrapping_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}

struct SumOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return wrapping_add(a, b);
    } else {
      return a + b;
    }
  }
};
struct ProdOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return wrapping_mul(a, b);
    } else {
      return a * b;
    }
  }
};
// min/max propagate NaN like torch.minimum/maximum: a NaN in either operand gives NaN.
// When b is NaN the comparison is false and b is chosen; `a != a` catches a NaN in a.
// Written as selects (no std::min, no branches) so they vectorize as compare + blend.
struct MinOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return (a < b || a != a) ? a : b;
    } else {
      return a < b ? a : b;
    }
  }
};
struct MaxOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return (a > b || a != a) ? a : b;
    } else {
      return a > b ? a : b;
    }
  }
};

// The bitwise ops, for the integer dtypes only.
struct BandOp {
  template <class T>
  static T apply(T a, T b) {
    return static_cast<T>(a & b);
  }
};
struct BorOp {
  template <class T>
  static T apply(T a, T b) {
    return static_cast<T>(a | b);
  }
};
struct BxorOp {
  template <class T>
  static T apply(T a, T b) {
    return static_cast<T>(a ^ b);
  }
};

}  // namespace

}  // namespace ringlet::collectives
