// Data patterns of the collective benchmarks. Every input is a small integer chosen per
// (rank, element) so that each result is exact in every dtype (bf16 holds integers up to 256):
// sum adds (rank + 1) + i % 7; avg makes the sum a multiple of n so the division is exact; prod
// multiplies 1s and a few 2s; min/max pick from 0..10. Expected values have closed forms (or a
// loop over ranks), so checking needs no second buffer.
#include <algorithm>
#include <type_traits>

#include "bench/collective_bench.h"
#include "core/dtype.h"
#include "core/error.h"

namespace ringlet::bench {
namespace {

using collectives::ReduceOp;
using core::DType;

bool reduces(Collective c) {
  return c == Collective::all_reduce || c == Collective::reduce_scatter;
}

std::int64_t input_value(const Pattern& p, int rank, std::size_t i) {
  const auto r = static_cast<std::int64_t>(rank);
  const auto n = static_cast<std::int64_t>(p.nranks);
  const auto k = static_cast<std::int64_t>(i % 1000003);  // keeps the arithmetic small
  if (!reduces(p.coll)) return (r * 13 + k) % 61 + 1;
  switch (p.op) {
    case ReduceOp::sum: return (r + 1) + k % 7;
    case ReduceOp::avg: return k % 7 + (r == k % n ? n : 0);
    case ReduceOp::prod: return (r + k) % 5 == 0 ? 2 : 1;
    case ReduceOp::min:
    case ReduceOp::max: return (r * 3 + k) % 11;
    default: break;  // the benchmarks' --op takes none of the bitwise ops
  }
  return 0;
}

std::int64_t expected_value(const Pattern& p, std::size_t i, std::size_t block) {
  const auto n = static_cast<std::int64_t>(p.nranks);
  if (p.coll == Collective::all_gather) {
    return input_value(p, static_cast<int>(i / block), i % block);
  }
  if (p.coll == Collective::broadcast) return input_value(p, p.root, i);
  const auto k = static_cast<std::int64_t>(i % 1000003);
  switch (p.op) {
    case ReduceOp::sum: return n * (n + 1) / 2 + n * (k % 7);
    case ReduceOp::avg: return k % 7 + 1;
    case ReduceOp::prod: {
      std::int64_t v = 1;
      for (int r = 0; r < p.nranks; ++r) v *= input_value(p, r, i);
      return v;
    }
    case ReduceOp::min:
    case ReduceOp::max: {
      std::int64_t v = input_value(p, 0, i);
      for (int r = 1; r < p.nranks; ++r) {
        const std::int64_t x = input_value(p, r, i);
        v = p.op == ReduceOp::min ? std::min(v, x) : std::max(v, x);
      }
      return v;
    }
    default: break;
  }
  return 0;
}

// Element conversions: integers are exact in every supported dtype at these magnitudes.
template <class T>
T to_elem(std::int64_t v) {
  if constexpr (std::is_same_v<T, core::Half>) {
    return core::Half{core::float_to_half(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<T, core::BFloat16>) {
    return core::BFloat16{core::float_to_bf16(static_cast<float>(v))};
  } else {
    return static_cast<T>(v);
  }
}

template <class T>
bool same(const T& a, const T& b) {
  if constexpr (std::is_same_v<T, core::Half> || std::is_same_v<T, core::BFloat16>) {
    return a.bits == b.bits;
  } else {
    return a == b;
  }
}

template <class F>
void dispatch(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: f(float{}); return;
    case DType::f64: f(double{}); return;
    case DType::f16: f(core::Half{}); return;
    case DType::bf16: f(core::BFloat16{}); return;
    case DType::i32: f(std::int32_t{}); return;
    case DType::i64: f(std::int64_t{}); return;
    default: break;
  }
  RINGLET_THROW(DTypeError, "collective bench: unsupported dtype ", dtype);
}

}  // namespace

void fill_input(const Pattern& p, int rank, void* data, std::size_t first, std::size_t count) {
  dispatch(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(data);
    for (std::size_t i = 0; i < count; ++i) out[i] = to_elem<T>(input_value(p, rank, first + i));
  });
}

void fill_sentinel(const Pattern& p, void* data, std::size_t count) {
  dispatch(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(data);
    const T sentinel = to_elem<T>(-3);  // every expected value is >= 0
    for (std::size_t i = 0; i < count; ++i) out[i] = sentinel;
  });
}

std::int64_t count_wrong(const Pattern& p, const void* data, std::size_t first, std::size_t count,
                         std::size_t block) {
  std::int64_t wrong = 0;
  dispatch(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(data);
    for (std::size_t i = 0; i < count; ++i) {
      if (!same(in[i], to_elem<T>(expected_value(p, first + i, block)))) ++wrong;
    }
  });
  return wrong;
}

}  // namespace ringlet::bench
