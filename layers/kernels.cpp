#include "layers/kernels.hpp"

#include <cblas.h>
#ifdef BURSTPOOL_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

#include <algorithm>

#include "burstpool/error.hpp"

namespace burstpool::cpu {

namespace {

// One GEMM on the calling thread alone. With oneDNN in the build its sgemm
// runs (JIT kernels for this processor: on the linear layers' GEMMs 1.2-1.4x
// OpenBLAS's best kernel and 4.6-7.3x the one OpenBLAS 0.3.21 picks by
// itself on Emerald Rapids, perf/results/gemm_compare.txt); oneDNN would
// thread it with OpenMP by itself, so the caller's thread count is held to
// one around the call.
void gemm_one_thread(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha, const float* a,
                     int lda, const float* b, int ldb, float beta, float* c, int ldc) {
#ifdef BURSTPOOL_HAVE_ONEDNN
  const int saved = omp_get_max_threads();
  if (saved > 1) omp_set_num_threads(1);
  const dnnl_status_t status = dnnl_sgemm(ta == CblasTrans ? 'T' : 'N', tb == CblasTrans ? 'T' : 'N', m, n, k, alpha,
                                          a, lda, b, ldb, beta, c, ldc);
  if (saved > 1) omp_set_num_threads(saved);
  BP_CHECK(status == dnnl_success, "dnnl_sgemm({}x{}x{}) failed with status {}", m, n, k, static_cast<int>(status));
#else
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}

}  // namespace

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
    gemm_one_thread(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
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
      gemm_one_thread(ta, tb, hi - lo, n, k, alpha, a_part, lda, b, ldb, beta, c + static_cast<size_t>(lo) * ldc, ldc);
    } else {  // columns lo..hi of C use columns (or rows, if transposed) lo..hi of B
      const float* b_part = trans_b ? b + static_cast<size_t>(lo) * ldb : b + lo;
      gemm_one_thread(ta, tb, m, hi - lo, k, alpha, a, lda, b_part, ldb, beta, c + lo, ldc);
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
