#pragma once
// Checkpoints of the small-batch strategies (sma, local-sgd, shadow;
// docs/learners.md). Beyond the job's model they hold every learner replica
// of every rank and sma's average model, so --resume continues exactly where
// a run stopped. Layout (HDF5):
//   architecture and /weights/<layer>/<param>: the job's model (z for sma,
//       the replicas' average otherwise) with the average of the replicas'
//       batch-norm statistics, so the file is also a model file;
//   /learners/<g>/{params,state,momentum}: replica g = rank x k + j, flat;
//       momentum is sma's u_j or the replica's SGD velocity; state is absent
//       for models without batch norm;
//   the strategy's own vectors, the same on every rank, at the paths it
//       names (sma: /average/z and /average/z_prev; SyncStrategy,
//       src/sync/strategy.hpp);
//   /progress attributes: strategy, step (iterations done), batches,
//       learners (all ranks together), seed, reset_lr (the float's bits),
//       tuning, checksum (of all of the above);
//   /history attributes run (the run's record: run_history, trainer.hpp)
//       and checksum (of run).
// Replica g takes learner batch g of every iteration on any rank count, so a
// checkpoint of R ranks x k learners resumes on R' ranks x k' learners
// whenever R' x k' = R x k. Written atomically like write_checkpoint, the
// previous file kept as <path>.prev.
#include <cstdint>
#include <string>
#include <vector>

#include "burstpool/model.hpp"

namespace burstpool {

struct LearnerProgress {
  std::string strategy;
  int64_t iteration = 0;  // iterations done
  int64_t batches = 0;    // learner batches taken, all ranks together
  int learners = 0;       // replicas, all ranks together
  uint64_t seed = 0;
  float reset_lr = 0;     // sma: the learning rate at the last restart from z
  bool tuning = false;    // the learner count was still being auto-tuned
  std::string history;    // the run's record so far (run_history, trainer.hpp)
};

// One replica's values on this rank, laid out as its Model's: param_count()
// floats of params and momentum, state().size() floats of state.
struct LearnerTensors {
  float* params;
  float* state;
  float* momentum;
};

// A sync strategy's own vector of `size` floats, the same on every rank,
// kept in checkpoints at `path` (an HDF5 dataset path, "/average/z").
struct StrategyVector {
  std::string path;
  float* data;
  size_t size;
};

// Collective over MPI_COMM_WORLD, every rank with the same number of
// replicas (`mine`, in order j). Rank 0 takes the others' replicas one at a
// time (memory for one replica, not all) and writes. `model` names the
// tensors (any replica of the spec); job_params, job_state (the job's
// model) and `vectors` (the strategy's) are read on rank 0 only.
void write_learner_checkpoint(const std::string& path, Model& model, const float* job_params, const float* job_state,
                              const std::vector<LearnerTensors>& mine, const std::vector<StrategyVector>& vectors,
                              const LearnerProgress& progress);

// Reads all of a checkpoint and checks it against its checksum, `model`'s
// spec, `strategy` and the vectors it keeps (their paths and sizes);
// returns its progress. Throws Error naming the file: a checkpoint of
// another model, of an ssgd run or another strategy, missing or wrongly
// sized data, or a checksum mismatch.
LearnerProgress check_learner_checkpoint(const std::string& path, Model& model, const std::string& strategy,
                                         const std::vector<StrategyVector>& vectors);

// From a checked checkpoint: replicas [first, first + mine.size()) into
// `mine`, and the strategy's vectors into `vectors`.
LearnerProgress read_learner_checkpoint(const std::string& path, Model& model, int first,
                                        const std::vector<LearnerTensors>& mine,
                                        const std::vector<StrategyVector>& vectors);

}  // namespace burstpool
