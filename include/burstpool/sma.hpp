#pragma once
// Synchronous model averaging (SMA, ../shared/REFERENCE.md section 3) on flat
// parameter buffers: k learner replicas w_j with their own momentum u_j, and
// a central average model z with momentum on it. Per learner-iteration:
//
//   g     = grad(w_j) + weight_decay * w_j
//   u_j   = -lr * g + momentum * u_j
//   w_old = w_j;  w_j = w_j + u_j
//   c_j   = alpha * (w_old - z)
//   w_j   = w_j - c_j
//   Delta = sum over all learners (all ranks) of c_j
//   z     = z + Delta + average_momentum * (z - z_prev)
//
// learner_step() does the first five lines for one learner and adds c_j into
// a Delta buffer; the caller sums Delta over its learners (in place) and then
// over ranks (one allreduce), and calls average_step() everywhere, so every
// rank holds the same z. With alpha = 0 the learners never see z.
//
// This is the update rule only; the trainer wiring (learners as threads, the
// sync key, auto-tuning) is issue #6's remaining work.
#include <cstddef>
#include <vector>

namespace burstpool {

struct SmaOptions {
  float alpha = 0.1f;             // pull towards the average model
  float momentum = 0.9f;          // each learner's own momentum
  float average_momentum = 0.9f;  // mu_z, momentum on the average model
  float weight_decay = 0.0f;
};

class SmaState {
 public:
  // k learners, every replica and the average start at `init` (size params).
  SmaState(const float* init, size_t params, int learners, SmaOptions options);

  size_t size() const { return z_.size(); }
  int learners() const { return static_cast<int>(w_.size()); }
  float* learner(int j) { return w_[j].data(); }
  const float* learner(int j) const { return w_[j].data(); }
  const float* average() const { return z_.data(); }

  // One learner's update from its gradient (of the loss only); adds c_j to
  // delta. Learners touch only their own replica and momentum, so different
  // learners may run this concurrently if each has its own delta buffer.
  void learner_step(int j, const float* grad, float lr, float* delta);
  // The average model's update from the global Delta (all learners, all ranks).
  void average_step(const float* delta);
  // At a learning-rate drop: every replica restarts from the average model
  // (momentum kept).
  void reset_learners();

 private:
  SmaOptions options_;
  std::vector<std::vector<float>> w_, u_;
  std::vector<float> z_, z_prev_;
};

}  // namespace burstpool
