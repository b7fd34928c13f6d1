#include "burstpool/sma.hpp"

#include <algorithm>

namespace burstpool {

SmaState::SmaState(const float* init, size_t params, int learners, SmaOptions options)
    : options_(options),
      w_(learners, std::vector<float>(init, init + params)),
      u_(learners, std::vector<float>(params, 0.0f)),
      z_(init, init + params),
      z_prev_(init, init + params) {}

void SmaState::learner_step(int j, const float* grad, float lr, float* delta) {
  float* w = w_[j].data();
  float* u = u_[j].data();
  const float* z = z_.data();
  const SmaOptions& o = options_;
  const size_t n = z_.size();
#pragma omp simd
  for (size_t i = 0; i < n; ++i) {
    const float g = grad[i] + o.weight_decay * w[i];
    u[i] = -lr * g + o.momentum * u[i];
    const float c = o.alpha * (w[i] - z[i]);  // w[i] is still w_old here
    w[i] = w[i] + u[i] - c;
    delta[i] += c;
  }
}

void SmaState::average_step(const float* delta) {
  const float mu = options_.average_momentum;
  for (size_t i = 0; i < z_.size(); ++i) {
    const float z = z_[i];
    z_[i] = z + delta[i] + mu * (z - z_prev_[i]);
    z_prev_[i] = z;
  }
}

void SmaState::reset_learners() {
  for (auto& w : w_) std::copy(z_.begin(), z_.end(), w.begin());
}

}  // namespace burstpool
