// OpenBLAS's cblas_sgemm against oneDNN's dnnl_sgemm, one thread, on the
// GEMMs burstpool's linear layers run at batch 64 (forward, weight gradient,
// input gradient of mlp, lenet5 and vgg_small) and on 512^3. Both are
// row-major C = op(A) op(B). Each round times every shape with both
// libraries back to back (alternating which goes first), so machine noise
// hits both; prints one line per shape: the median milliseconds of each and
// their ratio. Decides which library runs burstpool's CPU GEMMs.
// Usage: bp_gemm_compare [rounds (7)]
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

struct Shape {
  const char* what;
  int m, n, k;
  bool ta, tb;
};

const Shape kShapes[] = {
    {"mlp fc1 forward", 64, 512, 784, false, true},       {"mlp fc1 dW", 512, 784, 64, true, false},
    {"mlp fc2 forward", 64, 256, 512, false, true},       {"mlp fc2 dW", 256, 512, 64, true, false},
    {"mlp fc2 dX", 64, 512, 256, false, false},           {"lenet5 fc1 forward", 64, 120, 400, false, true},
    {"lenet5 fc1 dW", 120, 400, 64, true, false},         {"lenet5 fc1 dX", 64, 400, 120, false, false},
    {"vgg_small fc1 forward", 64, 256, 1152, false, true}, {"vgg_small fc1 dW", 256, 1152, 64, true, false},
    {"vgg_small fc1 dX", 64, 1152, 256, false, false},    {"square 512", 512, 512, 512, false, false},
};

double seconds_per_call(const Shape& s, bool onednn, const std::vector<float>& a, const std::vector<float>& b,
                        std::vector<float>& c) {
  const int lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
  auto call = [&] {
    if (onednn)
      dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f,
                 c.data(), s.n);
    else
      cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, s.m, s.n, s.k,
                  1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), s.n);
  };
  call();  // warm-up
  const double work = 2.0 * s.m * s.n * s.k;
  const int calls = std::max(3, static_cast<int>(2e8 / work));  // ~0.2 GFLOP per timing
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) call();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
  openblas_set_num_threads(1);
  std::printf("%-24s %12s %12s %8s\n", "gemm (m n k)", "OpenBLAS ms", "oneDNN ms", "ratio");
  {  // each library's first calls set it up (oneDNN generates its kernels): not timed
    for (const Shape& s : kShapes) {
      std::vector<float> a(static_cast<size_t>(s.m) * s.k, 0.5f), b(static_cast<size_t>(s.k) * s.n, 0.25f),
          c(static_cast<size_t>(s.m) * s.n);
      for (bool onednn : {false, true}) seconds_per_call(s, onednn, a, b, c);
    }
  }
  for (const Shape& s : kShapes) {
    std::vector<float> a(static_cast<size_t>(s.m) * s.k, 0.5f), b(static_cast<size_t>(s.k) * s.n, 0.25f),
        c(static_cast<size_t>(s.m) * s.n);
    std::vector<double> blas, dnnl;
    for (int r = 0; r < rounds; ++r) {
      const bool dnnl_first = r % 2;
      if (dnnl_first) dnnl.push_back(seconds_per_call(s, true, a, b, c));
      blas.push_back(seconds_per_call(s, false, a, b, c));
      if (!dnnl_first) dnnl.push_back(seconds_per_call(s, true, a, b, c));
    }
    const double mb = median(blas) * 1e3, md = median(dnnl) * 1e3;
    std::printf("%-24s %12.4f %12.4f %8.2f   (%d %d %d)\n", s.what, mb, md, mb / md, s.m, s.n, s.k);
  }
  return 0;
}
