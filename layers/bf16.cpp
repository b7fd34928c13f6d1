#include "layers/bf16.hpp"

#include "layers/kernels.hpp"

namespace burstpool {

void bf16_round(const float* from, float* to, size_t n) {
#pragma omp parallel for simd if (parallel : cpu::worth_threads(n))
  for (size_t i = 0; i < n; ++i) to[i] = bf16_round(from[i]);
}

void bf16_round(float* values, size_t n) { bf16_round(values, values, n); }

}  // namespace burstpool
