#include "sync/strategy.hpp"

#include <algorithm>

#include "burstpool/runtime.hpp"

namespace burstpool {

void LearnerTeam::to_host() {
  for (auto& l : all) l->sync_host();
}

const float* LearnerTeam::mean(std::vector<float>& out, float* (*of)(Learner&)) {
  std::fill(out.begin(), out.end(), 0.0f);
  for (auto& l : all) {
    const float* values = of(*l);
    for (size_t i = 0; i < out.size(); ++i) out[i] += values[i];
  }
  sum_over_world(out.data(), out.size());
  const float inv = 1.0f / static_cast<float>(all.size() * static_cast<size_t>(world().size));
  for (float& v : out) v *= inv;
  return out.data();
}

void LearnerTeam::set_all(const float* values) {
  for (auto& l : all) {
    std::copy(values, values + n, l->params());
    if (l->device_step) l->sync_device();
  }
}

const float* SyncStrategy::starting_values(LearnerTeam& team) {
  Learner& first = team.first();
  if (first.device_step) first.sync_host();
  return first.params();
}

const float* SyncStrategy::job_model(LearnerTeam& team, std::vector<float>& buffer) {
  return team.mean(buffer, [](Learner& l) { return l.params(); });
}

}  // namespace burstpool
