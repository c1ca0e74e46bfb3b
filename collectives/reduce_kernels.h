// Reduction kernels on host memory: dst[i] = op(dst[i], src[i]) for every dtype x op the
// collectives support (f32 f64 f16 bf16 i32 i64 x sum prod min max). f16/bf16 are widened to
// f32, combined, and rounded back once. avg is sum here; the caller divides at the end with
// divide_by. The loops are compiled for each instruction-set level (core/isa.h) and give the
// same bits at every level; the forms without an Isa use core::active_isa().
#pragma once

#include <cstddef>

#include "collectives/types.h"
#include "core/isa.h"

namespace ringlet::collectives {

void reduce_into(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op);
// dst[i] = op(a[i], b[i]): the out-of-place form (a == dst is reduce_into). dst must not
// overlap b, nor a unless a == dst.
void reduce_pair(void* dst, const void* a, const void* b, std::size_t count, DType dtype,
                 ReduceOp op);
void reduce_pair(void* dst, const void* a, const void* b, std::size_t count, DType dtype,
                 ReduceOp op, core::Isa isa);
// dst[i] = srcs[0][i] op srcs[1][i] op ... in that order (the bits of a chain of reduce_into
// calls); dst may be any of the sources (it is written block by block from a scratch block).
void reduce_many(void* dst, const void* const* srcs, int sources, std::size_t count, DType dtype,
                 ReduceOp op);
// dst[i] /= divisor (integers: truncating division, as PyTorch's avg on integers).
void divide_by(void* data, std::size_t count, DType dtype, int divisor);
void divide_by(void* data, std::size_t count, DType dtype, int divisor, core::Isa isa);

}  // namespace ringlet::collectives
