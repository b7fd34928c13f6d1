#pragma once
// Synchronous model averaging (SMA, as in CROSSBOW, Koliousis et al. 2019): k
// learner replicas w_j, each with its own momentum u_j, and a central average
// model z with momentum on it. Per learner-iteration:
//
//   g     = grad(w_j) + weight_decay * w_j
//   u_j   = -lr * g + momentum * u_j
//   w_old = w_j;  w_j = w_j + u_j
//   c_j   = alpha * (w_old - z)
//   w_j   = w_j - c_j
//   Delta = sum over all learners (all ranks) of c_j
//   z     = z + Delta + average_momentum * (z - z_prev)
//
// sma_learner_step() does the first five lines for one learner and adds c_j
// to a Delta buffer; the caller sums Delta over its learners, then over ranks
// (one allreduce), and every rank calls AverageModel::step() with the same
// Delta, so every rank holds the same z. With alpha = 0 learners never see z.
#include <cstddef>
#include <vector>

namespace burstpool {

class DeviceModel;  // device_model.hpp

struct SmaOptions {
  float alpha = 0.1f;             // pull towards the average model
  float momentum = 0.9f;          // each learner's own momentum
  float average_momentum = 0.9f;  // mu_z, momentum on the average model
  float weight_decay = 0.0f;
};

// One learner's update, over n parameters: w (its replica) and u (its
// momentum) in place, delta += c_j. Learners may run it concurrently, each
// with its own delta buffer.
void sma_learner_step(const SmaOptions& options, float* w, float* u, const float* grad, const float* z, float lr,
                      float* delta, size_t n);

// The same step on a device's copy of the learner (DeviceModel::axpby
// pieces, the same float operations in the same order): its parameters,
// momentum (u_j) and parameter gradients (overwritten with g); z
// (param_count floats) goes up, and c_j comes back into `c`, overwriting it.
// Uses scratch_a (z) and scratch_b (c). Returns when c is there.
void sma_device_step(DeviceModel& device, const SmaOptions& options, float lr, const float* z, float* c, size_t n);

// The average model kept on the device instead ([sync] sma_average =
// device): z in scratch_a and z_prev in scratch_c, put there once by
// sma_device_load_average and then moved by sma_device_average_step, the
// float operations of AverageModel::step in its order, so the device's copy
// stays bit for bit the host's. Per iteration only c_j comes back and the
// summed Delta goes up (the allreduce's staging); z and the parameters
// never cross.
void sma_device_load_average(DeviceModel& device, const float* z, const float* z_prev, size_t n);
void sma_device_resident_step(DeviceModel& device, const SmaOptions& options, float lr, float* c, size_t n);
void sma_device_average_step(DeviceModel& device, float average_momentum, const float* delta, size_t n);

class AverageModel {
 public:
  AverageModel(const float* init, size_t n, float average_momentum);
  const float* data() const { return z_.data(); }
  // z and z_prev to write or read back (checkpoints), each of size() floats.
  float* z() { return z_.data(); }
  float* previous() { return z_prev_.data(); }
  size_t size() const { return z_.size(); }
  // z = z + delta + average_momentum * (z - z_prev), from the global Delta.
  void step(const float* delta);

 private:
  float mu_;
  std::vector<float> z_, z_prev_;
};

}  // namespace burstpool
