#pragma once
// Checkpoints: an HDF5 model file (architecture + /weights/<layer>/<param>)
// plus /optimizer/velocity/<layer>/<param> and /progress attributes (step,
// seed). Written to a temporary file in the same folder and renamed over the
// target, so a reader never sees a half-written checkpoint.
#include <cstdint>
#include <string>

#include "burstpool/model.hpp"
#include "burstpool/optimizer.hpp"

namespace burstpool {

struct CheckpointInfo {
  int64_t step = 0;
  uint64_t seed = 0;
};

void write_checkpoint(const std::string& path, Model& model, Sgd& sgd, CheckpointInfo info);
// Loads weights, state and velocity into a model built from the same spec.
CheckpointInfo read_checkpoint(const std::string& path, Model& model, Sgd& sgd);

}  // namespace burstpool
