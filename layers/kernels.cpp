#include "kernels.hpp"

#include <cblas.h>

#include <algorithm>

namespace burstpool::cpu {

// BLAS runs single-threaded (see configure_threads); threads come from
// OpenMP only, so BLAS's own pool never fights OpenMP's for the cores. Large
// products outside a parallel region are split along their wider output
// dimension into one slice per thread.
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const double work = static_cast<double>(m) * n * k;
  if (threads == 1 || work < 4.0e6) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const bool split_rows = m >= n;
  const int extent = split_rows ? m : n;
  const int parts = std::min(threads, std::max(1, extent / 16));
#pragma omp parallel for num_threads(parts) schedule(static)
  for (int p = 0; p < parts; ++p) {
    const int lo = static_cast<int>(static_cast<long long>(extent) * p / parts);
    const int hi = static_cast<int>(static_cast<long long>(extent) * (p + 1) / parts);
    if (hi <= lo) continue;
    if (split_rows) {  // rows lo..hi of C use rows (or columns, if transposed) lo..hi of A
      const float* a_part = trans_a ? a + lo : a + static_cast<size_t>(lo) * lda;
      cblas_sgemm(CblasRowMajor, ta, tb, hi - lo, n, k, alpha, a_part, lda, b, ldb, beta,
                  c + static_cast<size_t>(lo) * ldc, ldc);
    } else {  // columns lo..hi of C use columns (or rows, if transposed) lo..hi of B
      const float* b_part = trans_b ? b + static_cast<size_t>(lo) * ldb : b + lo;
      cblas_sgemm(CblasRowMajor, ta, tb, m, hi - lo, k, alpha, a, lda, b_part, ldb, beta, c + lo, ldc);
    }
  }
}

void write_grad(float* dst, const float* src, size_t n, bool accumulate) {
  if (accumulate) {
#pragma omp parallel for simd if (parallel : worth_threads(n))
    for (size_t i = 0; i < n; ++i) dst[i] += src[i];
  } else {
#pragma omp parallel for simd if (parallel : worth_threads(n))
    for (size_t i = 0; i < n; ++i) dst[i] = src[i];
  }
}

uint64_t hash_name(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

}  // namespace burstpool::cpu
