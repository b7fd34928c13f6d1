#pragma once
// The one control flow of a training run, for every kind of run: the plan's
// steps (data parallel or burst), the small-batch learners' iterations and
// the background job's steps (in its own thread, between the foreground's
// layers). The run supplies the steps; the loop decides what happens between
// them, in the same order on every rank, so every collective the run starts
// there matches across ranks:
//
//   step (the work, and the ranks' agreement on going on: stop signals,
//   non-finite losses) -> checkpoint when due, but not after the last step
//   or a stop (the run's final checkpoint follows) -> a progress line every
//   [train] log_every steps, at the last one and at a stop -> on a stop,
//   the end -> evaluation when the run says it is due -> the end when its
//   target accuracy was reached.
#include <chrono>
#include <cstdint>

namespace burstpool {

struct JobConfig;

class RunSteps {
 public:
  virtual ~RunSteps() = default;
  virtual bool finished() const = 0;
  // One step. Returns what the ranks agreed on: 0 to go on, else the stop
  // signal (stop.hpp) that ends the run after this step.
  virtual int step() = 0;
  virtual int64_t steps_done() const = 0;  // steps taken, resumed ones included
  // Whether a checkpoint is due after step `steps_done() - 1`, `since` the
  // last one; collective where it has to agree. Default: [output]
  // checkpoint_every and checkpoint_seconds (rank 0's clock, over the world).
  virtual bool checkpoint_due(std::chrono::steady_clock::time_point since) const;
  virtual void checkpoint() = 0;  // collective
  virtual void progress() {}      // a progress line for the steps since the last one
  // An evaluation, if the run's cadence says one is due (`last`: the run's
  // last step). Returns true when it reached the target accuracy that ends
  // the run.
  virtual bool evaluate(bool /*last*/) { return false; }
  const JobConfig& job_config() const { return job_; }

 protected:
  explicit RunSteps(const JobConfig& job) : job_(job) {}
  const JobConfig& job_;
};

struct LoopEnd {
  int stop_signal = 0;          // the agreed stop, 0 if none
  bool reached_target = false;  // ended by the target accuracy
};

// Runs steps until the run is finished, a stop is agreed or an evaluation
// reaches the target.
LoopEnd run_loop(RunSteps& run);

}  // namespace burstpool
