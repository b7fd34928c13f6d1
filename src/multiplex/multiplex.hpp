#pragma once
// The trainer's side of multiplexing (include/burstpool/background.hpp): it
// times the foreground's model trained data parallel alone (when the
// foreground has a plan), builds and calibrates the background job, times the
// foreground alone for its first steps, starts the background, and at the end
// turns the rates into the slowdown and both cluster-throughput figures.
#include <memory>
#include <string>
#include <vector>

#include "burstpool/background.hpp"
#include "burstpool/executor.hpp"
#include "burstpool/job.hpp"
#include "comm/wait.hpp"

namespace burstpool {

// Collective over the world: the foreground job's model (`spec`, already
// loaded) and global batch trained data parallel over the world, alone, for `steps` steps (the first
// left out) in a session of its own (own communicator, model, optimizer, data
// and sampler, so the foreground's state and numbers are untouched). Returns
// the slowest rank's mean seconds per step: the reference of
// cluster_throughput_vs_data_parallel for a foreground with a plan.
double data_parallel_step_seconds(const JobConfig& foreground, const ModelSpec& spec, int steps);

class Multiplexer {
 public:
  // Collective over the world: loads the background job named by the
  // foreground's [background] job, builds it and runs its calibration steps.
  Multiplexer(const JobConfig& foreground, Executor& exec);
  ~Multiplexer();
  // After every foreground step (its seconds): the first calibrate_steps
  // steps time the foreground alone; then the background starts.
  void step_finished(double seconds);
  // " | bg ..." for the progress line, or "".
  std::string progress() const;
  // Stops the background (collective over the world, for the report).
  MultiplexResult finish();

 private:
  WaitPolicy polite_waits(bool on) const;
  double alone_mean() const;  // the foreground's seconds per step alone

  JobConfig fg_;
  Executor& exec_;
  ForegroundGate gate_;
  std::unique_ptr<BackgroundJob> bg_;
  std::vector<double> alone_;    // foreground step seconds, alone
  double dp_step_seconds_ = 0;   // data_parallel_step_seconds, for a foreground with a plan
  double shared_seconds_ = 0;    // foreground step seconds while the background ran
  int64_t shared_steps_ = 0;
  bool started_ = false;
};

}  // namespace burstpool
