// Linked instead of the CUDA kernels when ringlet is built without CUDA.
#include "collectives/cuda/reduce.h"
#include "core/error.h"

namespace ringlet::collectives::cuda {

void reduce_into(void*, const void*, std::size_t, DType, ReduceOp, int, void*) {
  RINGLET_THROW(NotBuiltError, "cuda::reduce_into: ringlet was built without CUDA");
}
int reduce_many(void*, const void* const*, int, std::size_t, DType, ReduceOp, int, void*) {
  RINGLET_THROW(NotBuiltError, "cuda::reduce_many: ringlet was built without CUDA");
}
void divide_by(void*, std::size_t, DType, int, int, void*) {
  RINGLET_THROW(NotBuiltError, "cuda::divide_by: ringlet was built without CUDA");
}

}  // namespace ringlet::collectives::cuda
