// Row-major GEMM through OpenBLAS: C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C, where
// op(X) is X or X^T; lda/ldb/ldc are row strides in elements of the matrices as stored.
// OpenBLAS uses core::num_threads() threads (RINGLET_NUM_THREADS).
#pragma once

#include <cstdint>

namespace ringlet::tensor::cpu {

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
          std::int64_t ldc);
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
          const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double beta,
          double* c, std::int64_t ldc);

}  // namespace ringlet::tensor::cpu
