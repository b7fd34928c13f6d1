#include "burstpool/sma.hpp"

#include <algorithm>

namespace burstpool {

void sma_learner_step(const SmaOptions& o, float* w, float* u, const float* grad, const float* z, float lr,
                      float* delta, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) {
    const float g = grad[i] + o.weight_decay * w[i];
    u[i] = -lr * g + o.momentum * u[i];
    const float c = o.alpha * (w[i] - z[i]);  // w[i] is still w_old here
    w[i] = w[i] + u[i] - c;
    delta[i] += c;
  }
}

AverageModel::AverageModel(const float* init, size_t n, float average_momentum)
    : mu_(average_momentum), z_(init, init + n), z_prev_(init, init + n) {}

void AverageModel::restore(const float* z, const float* z_prev) {
  std::copy(z, z + z_.size(), z_.begin());
  std::copy(z_prev, z_prev + z_prev_.size(), z_prev_.begin());
}

void AverageModel::step(const float* delta) {
  for (size_t i = 0; i < z_.size(); ++i) {
    const float z = z_[i];
    z_[i] = z + delta[i] + mu_ * (z - z_prev_[i]);
    z_prev_[i] = z;
  }
}

}  // namespace burstpool
