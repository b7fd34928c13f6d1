#include "burstpool/sma.hpp"

#include <algorithm>

#include "burstpool/device_model.hpp"

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

void sma_device_step(DeviceModel& d, const SmaOptions& o, float lr, const float* z, float* c, size_t n) {
  d.copy_in(DeviceModel::Buffer::scratch_a, -1, 0, z, n);
  sma_device_resident_step(d, o, lr, c, n);
}

void sma_device_load_average(DeviceModel& d, const float* z, const float* z_prev, size_t n) {
  d.copy_in(DeviceModel::Buffer::scratch_a, -1, 0, z, n);
  d.copy_in(DeviceModel::Buffer::scratch_c, -1, 0, z_prev, n);
}

void sma_device_resident_step(DeviceModel& d, const SmaOptions& o, float lr, float* c, size_t n) {
  using B = DeviceModel::Buffer;
  d.axpby(o.weight_decay, B::parameters, 1.0f, B::parameter_gradient);  // g = grad + wd w
  d.axpby(-lr, B::parameter_gradient, o.momentum, B::momentum);         // u = -lr g + momentum u
  d.axpby(1.0f, B::parameters, 0.0f, B::scratch_b);                      // c = w
  d.axpby(-1.0f, B::scratch_a, 1.0f, B::scratch_b);                      // c = w - z
  d.axpby(o.alpha, B::scratch_b, 0.0f, B::scratch_b);                    // c = alpha (w - z)
  d.axpby(1.0f, B::momentum, 1.0f, B::parameters);                       // w = w + u
  d.axpby(-1.0f, B::scratch_b, 1.0f, B::parameters);                     // w = w + u - c
  d.copy_out(B::scratch_b, -1, 0, c, n);
}

void sma_device_average_step(DeviceModel& d, float mu, const float* delta, size_t n) {
  using B = DeviceModel::Buffer;  // a: z, c: z_prev, d: Delta, b: the momentum term
  d.copy_in(B::scratch_d, -1, 0, delta, n);
  d.axpby(1.0f, B::scratch_a, 0.0f, B::scratch_b);   // t = z
  d.axpby(-1.0f, B::scratch_c, 1.0f, B::scratch_b);  // t = z - z_prev
  d.axpby(mu, B::scratch_b, 0.0f, B::scratch_b);     // t = mu (z - z_prev)
  d.axpby(1.0f, B::scratch_a, 0.0f, B::scratch_c);   // z_prev = z
  d.axpby(1.0f, B::scratch_d, 1.0f, B::scratch_a);   // z = z + Delta
  d.axpby(1.0f, B::scratch_b, 1.0f, B::scratch_a);   // z = z + Delta + mu (z - z_prev)
}

AverageModel::AverageModel(const float* init, size_t n, float average_momentum)
    : mu_(average_momentum), z_(init, init + n), z_prev_(init, init + n) {}

void AverageModel::step(const float* delta) {
  for (size_t i = 0; i < z_.size(); ++i) {
    const float z = z_[i];
    z_[i] = z + delta[i] + mu_ * (z - z_prev_[i]);
    z_prev_[i] = z;
  }
}

}  // namespace burstpool
