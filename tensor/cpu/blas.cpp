// OpenBLAS calls. The thread count is applied before each call when it changed, so
// core::set_num_threads() takes effect for BLAS too. Degenerate shapes are handled here:
// OpenBLAS rejects (prints to stderr and skips) leading dimensions below max(1, columns) even
// where they are never read, so single-row operands get a valid one, and k == 0 (an empty
// sum) is computed directly as C = beta * C.
#include "tensor/cpu/blas.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <limits>

#include "core/error.h"
#include "core/threads.h"

namespace ringlet::tensor::cpu {
namespace {

void apply_thread_setting() {
  static std::atomic<int> applied{0};
  const int wanted = core::num_threads();
  if (applied.exchange(wanted) != wanted) openblas_set_num_threads(wanted);
}

CBLAS_TRANSPOSE op(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

int as_int(std::int64_t value, const char* what) {
  RINGLET_CHECK(value >= 0 && value <= std::numeric_limits<int>::max(), ValueError, "gemm: ", what,
                " = ", value, " does not fit a BLAS int");
  return static_cast<int>(value);
}

// The row stride of a row-major matrix stored as rows x cols: any value >= max(1, cols) is
// fine for a single row; otherwise it must already be valid.
int leading(std::int64_t ld, std::int64_t rows, std::int64_t cols, const char* what) {
  const std::int64_t least = std::max<std::int64_t>(cols, 1);
  if (rows <= 1) return as_int(std::max(ld, least), what);
  RINGLET_CHECK(ld >= least, ValueError, "gemm: ", what, " = ", ld, " is less than the ", cols,
                " columns of a ", rows, "x", cols, " operand");
  return as_int(ld, what);
}

template <class T, class Blas>
void gemm_impl(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
               const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
               std::int64_t ldc, Blas blas) {
  if (m == 0 || n == 0) return;
  const int ldc_i = leading(ldc, m, n, "ldc");
  if (k == 0) {
    for (std::int64_t i = 0; i < m; ++i) {
      T* row = c + i * ldc_i;
      // beta == 0 overwrites (NaN in uninitialized C must not survive), as BLAS does.
      for (std::int64_t j = 0; j < n; ++j) row[j] = beta == T(0) ? T(0) : beta * row[j];
    }
    return;
  }
  const int lda_i = trans_a ? leading(lda, k, m, "lda") : leading(lda, m, k, "lda");
  const int ldb_i = trans_b ? leading(ldb, n, k, "ldb") : leading(ldb, k, n, "ldb");
  apply_thread_setting();
  blas(CblasRowMajor, op(trans_a), op(trans_b), as_int(m, "m"), as_int(n, "n"), as_int(k, "k"),
       alpha, a, lda_i, b, ldb_i, beta, c, ldc_i);
}

}  // namespace

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
          std::int64_t ldc) {
  gemm_impl<float>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, cblas_sgemm);
}

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
          const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double beta,
          double* c, std::int64_t ldc) {
  gemm_impl<double>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, cblas_dgemm);
}

}  // namespace ringlet::tensor::cpu
