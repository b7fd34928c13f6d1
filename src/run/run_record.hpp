#pragma once
// What run_loop keeps of a foreground run (one with a TrainResult): the
// training figures of its result and the run log's records (start,
// progress, end). Private to the loop (src/run/loop.cpp).
#include <cstdint>

#include "burstpool/loop.hpp"

namespace burstpool {

class RunRecord {
 public:
  // Writes the run log's start record.
  explicit RunRecord(RunSteps& run);
  // A step the ranks agreed on: its seconds, its loss (Agreement::loss_sum)
  // and the samples it trained.
  void step(double seconds, double loss, int64_t samples);
  // The run's progress line over the steps since the last one, and its record.
  void progress();
  // The result's figures at the loop's end, and the end record.
  void finish(const LoopEnd& end);

 private:
  WindowFigures window() const;

  RunSteps& run_;
  TrainResult& r_;
  double window_loss_ = 0, window_seconds_ = 0;
  int64_t window_steps_ = 0, window_samples_ = 0;
  double run_seconds_ = 0;  // this run's, from its start or resume
  int64_t run_samples_ = 0;
};

}  // namespace burstpool
