// One instruction-set level's host reduction loops: a table of plain function pointers per
// dtype x op, filled by reduce_loops.h in that level's translation unit. reduce_kernels.cpp
// validates the arguments and calls through the table of the level in use (core/isa.h).
#pragma once

#include <cstddef>

#include "collectives/types.h"
#include "core/isa.h"

namespace ringlet::collectives {

inline constexpr std::size_t kReduceDTypes = 7;  // DType f32 .. u8, indexed by its value
inline constexpr std::size_t kReduceOps = 7;     // sum prod min max band bor bxor (avg is sum)

struct ReduceTable {
  using Combine = void (*)(void* dst, const void* a, const void* b, std::size_t count);
  using Divide = void (*)(void* data, std::size_t count, int divisor);
  Combine combine[kReduceDTypes][kReduceOps];  // null: the op is not for that dtype
  Divide divide[kReduceDTypes];
};

// Each level's table; the avx2 and avx512 ones exist only in x86-64 builds.
const ReduceTable& reduce_table_baseline();
const ReduceTable& reduce_table_avx2();
const ReduceTable& reduce_table_avx512();

// The table of `isa`, which must be supported on this CPU (ValueError naming what is missing).
const ReduceTable& reduce_table(core::Isa isa);

}  // namespace ringlet::collectives
