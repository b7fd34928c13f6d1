// Single-thread SGEMM rate: the ceiling burstpool's CPU kernels are compared
// with. Prints "sgemm_gflops <median>" for OpenBLAS at n x n x n and, in
// builds with oneDNN (whose sgemm then runs burstpool's GEMMs), a second line
// "onednn_sgemm_gflops <median>".
// Usage: bp_sgemm_rate [n (512)] [repeats (9)]
#include <cblas.h>
#ifdef BURSTPOOL_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

// Median GFLOP/s of `reps` calls of gemm(), after one untimed call.
template <class Gemm>
double median_rate(int n, int reps, Gemm gemm) {
  gemm();
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    gemm();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(2.0 * n * n * double(n) / s / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 512;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 9;
  openblas_set_num_threads(1);
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n, 0.0f);
  std::printf("sgemm_gflops %.2f\n", median_rate(n, reps, [&] {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                            0.0f, c.data(), n);
              }));
#ifdef BURSTPOOL_HAVE_ONEDNN
  std::printf("onednn_sgemm_gflops %.2f\n", median_rate(n, reps, [&] {
                dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
              }));
#endif
  return 0;
}
