#pragma once
// What run_loop keeps of a foreground run (one with a TrainResult): the
// training figures of its result and the run log's records (start,
// progress, end). Private to the loop (src/run/loop.cpp).
#include <cstdint>
#include <vector>

#include "burstpool/loop.hpp"

namespace burstpool {

class RunRecord {
 public:
  // Writes the run log's start record.
  explicit RunRecord(RunSteps& run);
  // A step taken: its seconds and the samples it trained.
  void step(double seconds, int64_t samples);
  // A step's loss (Agreement::loss_sum), once its agreement is in: with an
  // agreement lag (RunSteps::agreement_lag), some steps after the step.
  void loss(double loss);
  // Training time outside the steps: the loop's wait, at its end, for the
  // lagged agreements still in flight (the steps' waits without the lag).
  void waited(double seconds);
  // The run's progress line over the steps since the last one, and its record.
  void progress();
  // The result's figures at the loop's end, and the end record.
  void finish(const LoopEnd& end);

 private:
  WindowFigures window() const;
  void keep_step_seconds(double seconds);

  RunSteps& run_;
  TrainResult& r_;
  double window_loss_ = 0, window_seconds_ = 0;
  int64_t window_steps_ = 0, window_samples_ = 0, window_losses_ = 0;
  double run_seconds_ = 0;  // this run's, from its start or resume
  int64_t run_samples_ = 0;
  // Steps' seconds for the median: every stride-th step; when full, every
  // other one is dropped and the stride doubles (a uniform sample, bounded).
  std::vector<float> step_seconds_;
  int64_t step_stride_ = 1, steps_seen_ = 0;
};

}  // namespace burstpool
