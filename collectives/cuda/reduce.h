// The collectives' reduction kernels on device memory: the CUDA counterparts of
// reduce_kernels.h, for every dtype x op (f32 f64 f16 bf16 i32 i64 x sum prod min max; avg is
// sum, then divide_by). Same semantics as the host kernels, bit for bit: integers wrap, min/max
// propagate NaN, f16/bf16 are widened to f32, combined and rounded back once (to nearest even).
// Plain C++ header (no CUDA types): `stream` is a cudaStream_t, nullptr for the default stream.
// The calls enqueue and return; errors of the launch are thrown, errors of the kernel surface
// at the next synchronizing call. Built without CUDA, they throw NotBuiltError.
#pragma once

#include <cstddef>

#include "collectives/types.h"

namespace ringlet::collectives::cuda {

// dst[i] = op(dst[i], src[i]) for `count` elements on `device`. dst and src must not overlap
// unless equal.
void reduce_into(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op,
                 int device, void* stream = nullptr);
// dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[sources-1][i], combined in that order (the
// bits of a chain of reduce_into calls); dst may be any of the sources. Returns the kernel
// launches it queued (one per 8 sources).
int reduce_many(void* dst, const void* const* srcs, int sources, std::size_t count, DType dtype,
                ReduceOp op, int device, void* stream = nullptr);
// data[i] /= divisor (integers: truncating division), as the host divide_by.
void divide_by(void* data, std::size_t count, DType dtype, int divisor, int device,
               void* stream = nullptr);

}  // namespace ringlet::collectives::cuda
