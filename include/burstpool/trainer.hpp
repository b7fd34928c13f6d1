#pragma once
// Training a job on every rank of MPI_COMM_WORLD: data, plan (data parallel
// unless the job names one), executor, optimizer, evaluation, progress,
// metrics and the final checkpoint. Collective: every rank calls it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <mpi.h>
#include <nlohmann/json.hpp>

#include "burstpool/background.hpp"
#include "burstpool/checkpoint.hpp"
#include "burstpool/job.hpp"
#include "burstpool/json_io.hpp"
#include "burstpool/model.hpp"
#include "burstpool/optimizer.hpp"

namespace burstpool {

class Executor;
struct Dataset;

struct EvalPoint {
  int64_t step = 0;
  double epoch = 0;
  double accuracy = 0, loss = 0;
};

// One rank's training time, split. compute, transfer, allreduce and idle sum
// to the rank's training seconds; for learners (docs/learners.md) compute is
// the learners' steps and allreduce the loop's synchronisation after them.
// background_sync runs beside them (shadow's averaging thread: its seconds
// waiting for its allreduce) and is not part of that sum.
struct RankTimes {
  double compute = 0, transfer = 0, allreduce = 0, idle = 0;  // seconds in training steps
  double peak_resident_bytes = 0;  // the rank's largest resident memory (peak_resident_bytes())
  double background_sync = 0;
  // This rank's training seconds in this run (since a resume), which the
  // parts above sum to; ranks differ by the waits that fall outside steps.
  double train = 0;
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
  // The median of this run's steps' seconds (a uniform sample of them on long
  // runs): the steady step, without the first steps' start-up or a stray pause.
  double median_step_seconds = 0;
  double forward_gflop_per_sample = 0;    // model's forward FLOPs / 1e9
  double achieved_gflops = 0;             // 3 x forward FLOPs x samples / train_seconds
  std::vector<EvalPoint> evals;
  std::vector<RankTimes> per_rank;  // on rank 0: every rank's time split
  struct Layer {
    std::string name;
    std::vector<int> ranks;
    double transfer = 0, allreduce = 0;  // seconds per step, the largest over ranks
  };
  std::vector<Layer> per_layer;  // with [parallel] layer_timing
  std::optional<MultiplexResult> multiplex;  // with a [background] job

  std::string strategy = "ssgd";  // [sync] strategy
  int learners = 1;               // per rank, at the end
  struct Tuning {
    int learners;
    double samples_per_second;
  };
  std::vector<Tuning> tuning;     // the auto-tuner's trials, in order
  // A learner strategy's own metrics keys (SyncStrategy::finish; shadow:
  // shadow_rounds, its background averaging rounds on rank 0).
  std::vector<std::pair<std::string, int64_t>> strategy_counts;
  double target_accuracy = 0;     // [train] target_accuracy; 0: none
  double time_to_target_seconds = NAN, epochs_to_target = NAN;  // training seconds, epochs; NaN: not reached
  double wall_to_target_seconds = NAN;  // wall seconds from the start, loading and evaluations included
  // [parallel] plan = auto: the plan's file, the planner's predicted step and its prediction for
  // data parallelism, which it judged slower or equal (0: not planned here).
  std::string plan_file;
  double predicted_step_seconds = 0, predicted_data_parallel_step_seconds = 0;
  // One training step of this run, measured: the median step, as the
  // simulator predicts a steady one (batch / samples_per_second if unknown).
  double measured_step_seconds() const {
    return median_step_seconds > 0 ? median_step_seconds : batch_size / std::max(1e-9, samples_per_second);
  }
  std::string stopped_by;  // the signal that ended training early (include/burstpool/stop.hpp); "": none
  std::string device = "CPU";  // where the layers ran (DeviceModel::describe)
  std::vector<std::pair<std::string, int>> hosts;  // each host and its ranks (world_hosts)
  // After --resume: the seconds of the runs before it, included in
  // train_seconds and wall_seconds (restore_run_history).
  double earlier_train_seconds = 0, earlier_wall_seconds = 0;
};

TrainResult train(const JobConfig& job);
// train() hands a job on to one of two loops: ssgd, data parallel or a burst
// plan (src/run/plan_run.cpp), or the small-batch learners: sma, shadow,
// local-sgd (src/sync/small_batch.cpp).
TrainResult train_plan(const JobConfig& job);
TrainResult train_small_batch(const JobConfig& job);

// Both trainers at the start: the result's fields fixed by the job and the
// world (threads as configure_threads sets them up).
TrainResult start_result(const JobConfig& job);

// Both trainers' evaluation: test samples [lo, hi) in eval mode, in batches
// of up to the plan's global batch, through `exec` (the foreground's whole
// plan over the world, or a learner's replica on its own rank). Collective
// over the world: each rank passes its own range (the whole test set when
// exec spans the world) and the counts are summed; the loss is the mean over
// the test set. `base`: the job's context (job_context), eval mode is set here.
EvalPoint evaluate_test_set(Executor& exec, const Dataset& test, size_t lo, size_t hi, const Context& base);

// Both trainers after an evaluation: records it in r (evaluation seconds
// included), prints it on rank 0 ("eval @ <unit> <p.step>"), and notes the
// first time [train] target_accuracy is reached. Returns true when training
// should stop there (stop_at_target).
bool record_evaluation(TrainResult& r, const JobConfig& job, const EvalPoint& p, const char* unit,
                       double eval_seconds, double wall_seconds, bool chatty);
nlohmann::json metrics_json(const TrainResult& r);

// Both trainers at the end (collective over MPI_COMM_WORLD): this rank's
// split `mine`, its idle set to what the others leave of `run_seconds` (this
// run's training seconds, since a resume) and its peak memory added, into
// r.per_rank on rank 0, one entry per rank in rank order.
void gather_rank_times(TrainResult& r, RankTimes mine, double run_seconds);

// What a checkpoint keeps of a run's record (JSON text), so that the metrics
// after --resume cover the whole run: the evaluations, the training,
// evaluation and wall seconds so far (`wall_seconds` now) and when the target
// was reached. restore_run_history puts it back into a fresh result ("" from
// a checkpoint without one: nothing).
std::string run_history(const TrainResult& r, double wall_seconds);
void restore_run_history(TrainResult& r, const std::string& history);

// Both trainers' progress lines: "12m05s", "3h07m", or "?" when unknown.
std::string eta(double seconds);

// Every trainer on --resume (collective over `comm`): rank 0 of comm picks
// the newest checkpoint at the job's path that `validate` accepts
// (newest_checkpoint) and warns of refused ones; every rank gets its choice.
// Empty when there is none yet (rank 0 says so); throws without a path.
std::optional<Resumed> choose_checkpoint(const JobConfig& job,
                                         const std::function<int64_t(const std::string&)>& validate, MPI_Comm comm);

// Every trainer on --resume: throws Error naming `file` unless the
// checkpoint's seed (which fixes data order and masks) is the job's.
void require_seed(const std::string& file, uint64_t seed, const JobConfig& job);

// An ssgd job (the foreground, or a background job on its own communicator)
// on --resume: the chosen checkpoint's weights, statistics and momentum into
// model and sgd on every rank of comm (collective). Throws Error when the
// file was trained with another seed. Empty: no checkpoint yet.
std::optional<Resumed> resume_training(const JobConfig& job, Model& model, Sgd& sgd, MPI_Comm comm);

}  // namespace burstpool
