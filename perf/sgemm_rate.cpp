// Single-thread SGEMM rate of the linked BLAS: the ceiling burstpool's CPU
// kernels are compared with. Prints "sgemm_gflops <median>" for sizes n x n x n.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 512;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 9;
  openblas_set_num_threads(1);
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n, 0.0f);
  std::vector<double> rates;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(2.0 * n * n * double(n) / s / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  std::printf("sgemm_gflops %.2f\n", rates[rates.size() / 2]);
  return 0;
}
