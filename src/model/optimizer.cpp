#include "burstpool/optimizer.hpp"

#include <cmath>

#include "layers/kernels.hpp"

namespace burstpool {

Sgd::Sgd(Model& model, SgdOptions options)
    : model_(model), options_(options), velocity_(Tensor::zeros(model.params().shape())) {}

void Sgd::step(float lr) { step(lr, {{0, model_.params().size()}}); }

void Sgd::step(float lr, const std::vector<std::pair<size_t, size_t>>& ranges) {
  float* w = model_.params().data();
  const float* g = model_.grads().data();
  float* v = velocity_.data();
  const float mu = options_.momentum, wd = options_.weight_decay;
  const bool nesterov = options_.nesterov;
  for (const auto& [offset, count] : ranges) {
    const size_t end = offset + count;
#pragma omp parallel for simd if (parallel : cpu::worth_threads(count))
    for (size_t i = offset; i < end; ++i) {
      const float grad = g[i] + wd * w[i];
      const float vel = mu * v[i] + grad;
      v[i] = vel;
      w[i] -= lr * (nesterov ? grad + mu * vel : vel);
    }
  }
}

float LrSchedule::at(int64_t step) const {
  if (warmup_steps > 0 && step < warmup_steps)
    return base_lr * static_cast<float>(step + 1) / static_cast<float>(warmup_steps);
  switch (kind) {
    case Kind::constant: return base_lr;
    case Kind::step: return step_size > 0 ? base_lr * std::pow(gamma, static_cast<float>(step / step_size)) : base_lr;
    case Kind::cosine: {
      const int64_t span = std::max<int64_t>(1, total_steps - warmup_steps);
      const double t = std::min(1.0, static_cast<double>(step - warmup_steps) / span);
      return static_cast<float>(min_lr + 0.5 * (base_lr - min_lr) * (1.0 + std::cos(M_PI * t)));
    }
  }
  return base_lr;
}

LrSchedule::Kind LrSchedule::parse_kind(const std::string& name, bool& ok) {
  ok = true;
  if (name == "constant") return Kind::constant;
  if (name == "step") return Kind::step;
  if (name == "cosine") return Kind::cosine;
  ok = false;
  return Kind::constant;
}

}  // namespace burstpool
