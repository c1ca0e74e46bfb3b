// Host reduction kernels: argument checks, then a call through the reduction table of the
// instruction-set level in use (collectives/reduce_table.h; the loops are reduce_loops.h).
#include "collectives/reduce_kernels.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <string>

#include "collectives/reduce_table.h"
#include "core/copy.h"
#include "core/error.h"

namespace ringlet::collectives {

namespace {

bool known_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::f64:
    case DType::f16:
    case DType::bf16:
    case DType::i32:
    case DType::i64:
    case DType::u8: return true;
  }
  return false;
}

// The table column of `op`; avg is sum (the caller divides once at the end with divide_by).
std::size_t op_column(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return 0;
    case ReduceOp::prod: return 1;
    case ReduceOp::min: return 2;
    case ReduceOp::max: return 3;
    case ReduceOp::band: return 4;
    case ReduceOp::bor: return 5;
    case ReduceOp::bxor: return 6;
  }
  RINGLET_THROW(ValueError, "reduce_into: unknown reduce op code ", static_cast<int>(op),
                " (choices: sum, prod, min, max, avg, band, bor, bxor)");
}

}  // namespace

const ReduceTable& reduce_table(core::Isa isa) {
  // Which levels run here is asked once: the tables are looked up on every reduction call.
  static const std::array<const ReduceTable*, 3> tables = [] {
    std::array<const ReduceTable*, 3> usable{&reduce_table_baseline(), nullptr, nullptr};
#if defined(__x86_64__)
    if (core::isa_supported(core::Isa::avx2)) usable[1] = &reduce_table_avx2();
    if (core::isa_supported(core::Isa::avx512)) usable[2] = &reduce_table_avx512();
#endif
    return usable;
  }();
  return core::table_for_isa(tables, isa, "reduction kernels");
}

void reduce_into(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op) {
  reduce_pair(dst, dst, src, count, dtype, op, core::active_isa());
}

void reduce_pair(void* dst, const void* a, const void* src, std::size_t count, DType dtype,
                 ReduceOp op) {
  reduce_pair(dst, a, src, count, dtype, op, core::active_isa());
}

void reduce_pair(void* dst, const void* a, const void* src, std::size_t count, DType dtype,
                 ReduceOp op, core::Isa isa) {
  // Validate before the count == 0 shortcut, so a bad dtype or op fails the same way for
  // every count (ranks with an empty chunk must not accept what the others reject).
  RINGLET_CHECK(known_dtype(dtype), DTypeError, "reduce_into: unsupported dtype code ",
                static_cast<int>(dtype));
  const std::size_t column = op_column(op);
  const auto combine = reduce_table(isa).combine[static_cast<std::size_t>(dtype)][column];
  RINGLET_CHECK(combine != nullptr, DTypeError, "reduce_into: ", reduce_op_name(op),
                " is for the integer dtypes (i32 i64 u8), not ", dtype);
  if (count == 0) return;
  RINGLET_CHECK(dst != nullptr && a != nullptr && src != nullptr, ValueError,
                "reduce_into: null buffer for ", count, " elements of ", dtype);
  combine(dst, a, src, count);
}

void reduce_many(void* dst, const void* const* srcs, int sources, std::size_t count, DType dtype,
                 ReduceOp op) {
  RINGLET_CHECK(sources >= 1, ValueError, "reduce_many: no source");
  const std::size_t es = core::dtype_size(dtype);
  constexpr std::size_t kBlockBytes = 16 * 1024;  // stays in L1 while every source is added
  const std::size_t block = std::max<std::size_t>(1, kBlockBytes / es);
  alignas(64) std::byte scratch[kBlockBytes + 64];
  for (std::size_t begin = 0; begin < count; begin += block) {
    const std::size_t n = std::min(block, count - begin);
    const auto at = [&](const void* p) { return static_cast<const std::byte*>(p) + begin * es; };
    core::copy(scratch, at(srcs[0]), n * es);
    for (int k = 1; k < sources; ++k) reduce_into(scratch, at(srcs[k]), n, dtype, op);
    core::copy(static_cast<std::byte*>(dst) + begin * es, scratch, n * es);
  }
}

void divide_by(void* data, std::size_t count, DType dtype, int divisor) {
  divide_by(data, count, dtype, divisor, core::active_isa());
}

void divide_by(void* data, std::size_t count, DType dtype, int divisor, core::Isa isa) {
  RINGLET_CHECK(known_dtype(dtype), DTypeError, "divide_by: unsupported dtype code ",
                static_cast<int>(dtype));
  // A divisor is a rank count; requiring > 0 also rules out INT_MIN / -1.
  RINGLET_CHECK(divisor > 0, ValueError, "divide_by: divisor must be positive, got ", divisor);
  if (count == 0 || divisor == 1) return;
  RINGLET_CHECK(data != nullptr, ValueError, "divide_by: null buffer for ", count, " elements of ",
                dtype);
  reduce_table(isa).divide[static_cast<std::size_t>(dtype)](data, count, divisor);
}

}  // namespace ringlet::collectives
