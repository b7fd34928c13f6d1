#pragma once
// SGD with momentum (optionally Nesterov) and L2 weight decay, with PyTorch's
// update rule so results are comparable:
//   g = grad + wd * w;  v = mu * v + g;  step = nesterov ? g + mu * v : v;  w -= lr * step
// and learning-rate schedules over training steps.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "burstpool/model.hpp"

namespace burstpool {

struct SgdOptions {
  float momentum = 0.9f;
  bool nesterov = false;
  float weight_decay = 0.0f;
};

class Sgd {
 public:
  Sgd(Model& model, SgdOptions options);
  void step(float lr);  // applies the model's current gradients to every parameter
  // Only to parameters in [offset, offset + count) ranges: those of the layers
  // this rank runs under a burst plan (others keep their initial values).
  void step(float lr, const std::vector<std::pair<size_t, size_t>>& ranges);
  Tensor& velocity() { return velocity_; }  // same layout as Model::params()
  const SgdOptions& options() const { return options_; }

 private:
  Model& model_;
  SgdOptions options_;
  Tensor velocity_;
};

struct LrSchedule {
  enum class Kind { constant, step, cosine };
  Kind kind = Kind::constant;
  float base_lr = 0.1f;
  int64_t warmup_steps = 0;  // linear ramp from base_lr / warmup_steps up to base_lr
  int64_t step_size = 0;     // kind=step: multiply by gamma every step_size steps
  float gamma = 0.1f;
  float min_lr = 0.0f;       // kind=cosine: the floor reached at total_steps
  int64_t total_steps = 1;

  float at(int64_t step) const;  // learning rate of training step `step` (0-based)
  static Kind parse_kind(const std::string& name, bool& ok);
};

}  // namespace burstpool
