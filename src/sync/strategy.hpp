#pragma once
// How the small-batch learners stay together (docs/learners.md): one
// SyncStrategy per run, driven by the learners' loop (src/sync/small_batch.cpp),
// which owns the learners, their batches, the schedule, progress,
// evaluation, checkpoints and stops. A strategy owns what is its own: each
// learner's update after its backward, what happens after every learner has
// stepped (sma's average model, local-sgd's periodic averages, shadow's
// background thread), the model the job stands for, what its checkpoints
// keep beyond the replicas, and the metrics keys it adds.
//
// Adding a strategy: one file under src/sync/ that defines its factory, and
// one line in src/sync/registry.cpp; [sync] strategy then accepts its name.
// Its device work goes through DeviceModel's generic pieces (sgd_step,
// axpby, copy_in, copy_out), so the device interface does not grow with it.
//
// This header is internal (it exposes the Learner, src/sync/learners.hpp).
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "burstpool/trainer.hpp"
#include "sync/learner_checkpoint.hpp"
#include "sync/learners.hpp"
#include "sync/registry.hpp"

namespace burstpool {

// A rank's learners as a strategy sees them. Learner 0 always exists.
class LearnerTeam {
 public:
  explicit LearnerTeam(std::vector<std::unique_ptr<Learner>>& learners) : all(learners) {}
  std::vector<std::unique_ptr<Learner>>& all;
  size_t n = 0;  // parameters per replica (set once learner 0 exists)
  Learner& first() { return *all[0]; }

  // Every replica's host copies made current, before the host reads them.
  void to_host();
  // The mean over every replica of every rank of one of their flat arrays
  // (`of`: params or state), into `out` (collective; to_host first).
  const float* mean(std::vector<float>& out, float* (*of)(Learner&));
  // Every replica set to `values` (n floats, host memory), device copies too
  // (to_host first: a device copy takes the host's momentum and state along).
  void set_all(const float* values);
};

// The metrics keys a strategy adds to the run's metrics JSON (integers).
using StrategyCounts = decltype(TrainResult::strategy_counts);

class SyncStrategy {
 public:
  virtual ~SyncStrategy() = default;
  // With a device: true, each replica's parameters and momentum live there
  // and learner_step runs there; false, they live on the host (parameters go
  // up before each forward, gradients come back after backward).
  virtual bool device_resident() const { return true; }
  // A new learner's own buffers (Learner::momentum, scratch), before its values.
  virtual void prepare(Learner&) {}
  // Once, when learner 0 holds the starting model, before the other learners
  // are made and before a resume reads checkpoint_vectors() back.
  virtual void attach(LearnerTeam&) {}
  // Once, collective, after a resume (or none), before the first iteration.
  virtual void begin(LearnerTeam&) {}
  // What a new replica starts from (host memory, n floats): default learner 0.
  virtual const float* starting_values(LearnerTeam& team);
  // On the loop's thread before the learners of an iteration at rate lr run.
  virtual void before_iteration(LearnerTeam&, float /*lr*/) {}
  // Learner j's step on its own thread: learner_begins(j), its forward and
  // backward, learner_step (its update: with l.device_step the gradients are
  // on the device, else in the host Model's grads), then learner_ends(j),
  // also when the step threw. Between begins and ends the replica is that
  // thread's alone.
  virtual void learner_begins(int /*learner*/) {}
  virtual void learner_step(Learner& l, float lr) = 0;
  virtual void learner_ends(int /*learner*/) {}
  // Collective, after every learner of iteration `iteration` (0-based) stepped.
  virtual void after_iteration(LearnerTeam&, int64_t /*iteration*/) {}
  // The model the job stands for (collective; replicas on the host): default
  // the mean of every replica, in `buffer`.
  virtual const float* job_model(LearnerTeam& team, std::vector<float>& buffer);
  // For a strategy whose own thread moves the replicas outside their steps
  // (shadow): held by the loop while it reads or changes replica j between
  // steps (evaluation, checkpoints). Default: nothing to hold.
  virtual std::unique_lock<std::mutex> hold_replica(int /*learner*/) { return {}; }
  // What checkpoints keep beyond the replicas: vectors the same on every
  // rank, and the progress fields the strategy owns (LearnerProgress::reset_lr).
  virtual std::vector<StrategyVector> checkpoint_vectors() { return {}; }
  virtual void save(LearnerProgress&) const {}
  virtual void restore(const LearnerProgress&) {}
  // Once, every rank, after the last iteration: its metrics keys.
  virtual StrategyCounts finish() { return {}; }
  // After finish: this rank's seconds its strategy's own thread waited to
  // synchronise, beside the learners' steps (RankTimes::background_sync).
  virtual double background_seconds() const { return 0; }
};

}  // namespace burstpool
