#pragma once
// Training a job: data, model, optimizer, evaluation, progress, metrics and the
// final checkpoint. This is the one-rank loop; the burst-parallel executor
// (runtime issue) slots in where `train_step` runs the model.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "burstpool/job.hpp"

namespace burstpool {

struct EvalPoint {
  int64_t step = 0;
  double epoch = 0;
  double accuracy = 0, loss = 0;
};

struct TrainResult {
  std::string job, model;
  int ranks = 1, threads = 1, batch_size = 0;
  int64_t steps = 0;
  double epochs = 0;
  double final_loss = NAN;     // mean training loss over the last log window
  double test_accuracy = NAN;  // last evaluation; NaN when there is no test set
  double train_seconds = 0, eval_seconds = 0, wall_seconds = 0;
  double samples_per_second = 0;          // training only
  double forward_gflop_per_sample = 0;    // model's forward FLOPs / 1e9
  double achieved_gflops = 0;             // 3 x forward FLOPs x samples / train_seconds
  std::vector<EvalPoint> evals;
};

TrainResult train(const JobConfig& job);
nlohmann::json metrics_json(const TrainResult& r);
// Writes JSON atomically (temporary file, then rename).
void write_json(const std::string& path, const nlohmann::json& j);

}  // namespace burstpool
