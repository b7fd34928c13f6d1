#pragma once
// CPU building blocks shared by the layer families: a row-major GEMM over the
// project's CBLAS, and OpenMP helpers. Internal to the library.
#include <omp.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "burstpool/layer.hpp"
#include "layers/random.hpp"

namespace burstpool::cpu {

// C[M,N] = alpha * op(A) * op(B) + beta * C, all row-major.
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);

// Threads for element-wise loops: parallelise only when the work is large
// (use it as `if (parallel : ...)` on `parallel for simd`: a bare `if` also
// switches off the simd part when false)
// enough to beat OpenMP's fork cost (~1-2 us per region).
inline bool worth_threads(size_t elements) { return elements >= (1u << 15) && omp_get_max_threads() > 1; }

// dst = src (overwrite) or dst += src (accumulate).
void write_grad(float* dst, const float* src, size_t n, bool accumulate);

// mix64, uniform01: layers/random.hpp.
uint64_t hash_name(const std::string& s);

}  // namespace burstpool::cpu
