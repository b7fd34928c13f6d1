#pragma once
// Checkpoints: an HDF5 model file (architecture + /weights/<layer>/<param>)
// plus /optimizer/velocity/<layer>/<param>, /progress attributes (step,
// seed, checksum) and the run's record (evaluations, seconds) as the
// attribute "run" of /history.
//
// Writing is atomic and keeps the previous checkpoint: the new one is written
// to "<path>.tmp.<pid>" and flushed, the current "<path>" becomes
// "<path>.prev", and the new file is renamed to "<path>". Whenever the process
// dies, "<path>" or "<path>.prev" is a complete checkpoint.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "burstpool/model.hpp"
#include "burstpool/optimizer.hpp"

namespace burstpool {

struct CheckpointInfo {
  int64_t step = 0;  // training steps completed
  uint64_t seed = 0;
  std::string history;  // the run's record so far (run_history, trainer.hpp); "" in older files
};

void write_checkpoint(const std::string& path, Model& model, Sgd& sgd, CheckpointInfo info);
// Loads weights, state and velocity into a model built from the same spec;
// throws Error naming the file when it is unreadable, belongs to another
// model, or fails its checksum.
CheckpointInfo read_checkpoint(const std::string& path, Model& model, Sgd& sgd);

// The newest valid checkpoint among "<path>" and "<path>.prev": `validate`
// reads a candidate completely and returns the step it holds, or throws Error
// naming the file and the reason (for example read_checkpoint). Invalid
// candidates are reported in `rejected`, one line each. Empty when neither
// file exists; throws when files exist but none is valid.
struct Resumed {
  int64_t step = 0;
  std::string file;     // "<path>" or "<path>.prev"
  std::string history;  // resume_training fills it from the file
};
std::optional<Resumed> newest_checkpoint(const std::string& path,
                                         const std::function<int64_t(const std::string&)>& validate,
                                         std::vector<std::string>& rejected);

}  // namespace burstpool
