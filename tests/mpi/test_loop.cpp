// The run loop's agreement with a lag (RunSteps::agreement_lag): every rank
// acts on a stop, a loss sum and a non-finite loss at the same step, exactly
// `lag` steps after the step that started the agreement, and the loop takes
// in the ones still in flight before it returns; a rank ahead waits for the
// others as training, where the run meets its ranks (RunSteps::meet_ranks);
// the median step leaves a stray pause out.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "burstpool/job.hpp"
#include "burstpool/loop.hpp"
#include "burstpool/trainer.hpp"

namespace burstpool {
namespace {

// Steps whose loss on rank r is (r + 1) x step; one rank wishes to stop at
// `stop_at`, one rank's loss is NaN at `nan_at`. It keeps what each step was
// told, and drops a stopped step's update as the background job does.
class ToyRun final : public RunSteps {
 public:
  ToyRun(const JobConfig& job, int lag, int64_t steps, TrainResult* result = nullptr)
      : RunSteps(job, MPI_COMM_WORLD, result), lag_(lag), steps_(steps) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  bool finished() const override { return done_ >= steps_; }
  int64_t steps_done() const override { return done_; }
  double step_begin() override {
    if (done_ == slow_at && rank_ == size_ - 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    if (done_ == nan_at && rank_ == 0) return std::numeric_limits<double>::quiet_NaN();
    return (rank_ + 1.0) * static_cast<double>(done_);
  }
  void step_end(const Agreement& agreed, double) override {
    told.push_back(agreed);
    if (!agreed.stop) ++done_;
  }
  int stop_wish() const override { return done_ == stop_at && rank_ == size_ - 1 ? kStopRequested : 0; }
  int agreement_lag() const override { return lag_; }
  void checkpoint() override { MPI_Barrier(MPI_COMM_WORLD); }  // a checkpoint's collective (outside training)
  bool evaluate(bool) override {  // an evaluation: the ranks meet, then its collective (outside training)
    if (done_ == meet_at) {
      meet_ranks();
      MPI_Barrier(MPI_COMM_WORLD);
    }
    return false;
  }

  int64_t stop_at = -1, nan_at = -1;
  int64_t slow_at = -1;  // the last rank sleeps 0.3 s in this step
  int64_t meet_at = -1;  // after this many steps the run meets its ranks
  std::vector<Agreement> told;  // per step, what the loop said in step_end
  int size() const { return size_; }

 private:
  int lag_;
  int64_t steps_, done_ = 0;
  int rank_ = 0, size_ = 1;
};

class LaggedAgreement : public ::testing::TestWithParam<int> {};

TEST_P(LaggedAgreement, EveryStepIsToldTheAgreementStartedLagStepsBefore) {
  const int lag = GetParam();
  JobConfig job;
  ToyRun run(job, lag, 12);
  const LoopEnd end = run_loop(run);
  EXPECT_EQ(end.stop, 0);
  EXPECT_EQ(run.steps_done(), 12);
  ASSERT_EQ(run.told.size(), 12u);
  const double ranks_weight = run.size() * (run.size() + 1) / 2.0;  // the sum of (r + 1) over the ranks
  for (int64_t k = 0; k < 12; ++k) {
    const double expected = k < lag ? 0.0 : ranks_weight * static_cast<double>(k - lag);  // none in yet: Agreement{}
    EXPECT_EQ(run.told[k].loss_sum, expected) << "step " << k << ", lag " << lag;
    EXPECT_EQ(run.told[k].stop, 0);
  }
}

TEST_P(LaggedAgreement, AStopIsActedOnLagStepsLaterOnEveryRank) {
  const int lag = GetParam();
  JobConfig job;
  ToyRun run(job, lag, 40);
  run.stop_at = 5;  // the last rank's wish, at the step that starts with 5 steps done
  const LoopEnd end = run_loop(run);
  EXPECT_EQ(end.stop, kStopRequested);
  // Steps 5 .. 5 + lag - 1 went on (told nothing yet); the one `lag` later was told and dropped its update.
  EXPECT_EQ(run.steps_done(), 5 + lag);
  ASSERT_EQ(run.told.size(), static_cast<size_t>(6 + lag));
  EXPECT_EQ(run.told.back().stop, kStopRequested);
  long long steps = run.steps_done(), lowest = 0, highest = 0;
  MPI_Allreduce(&steps, &lowest, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&steps, &highest, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(lowest, highest) << "the ranks stopped at different steps";
}

TEST_P(LaggedAgreement, ANonFiniteLossEndsTheRunOnEveryRankNamingItsStep) {
  const int lag = GetParam();
  JobConfig job;
  // NaN at step 4 of 6: with a lag of 2 or more it comes in only after the last step, when the loop
  // takes in the agreements still in flight; it must still end the run.
  ToyRun run(job, lag, 6);
  run.nan_at = 4;
  try {
    run_loop(run);
    ADD_FAILURE() << "no Diverged with lag " << lag;
  } catch (const Diverged& e) {
    EXPECT_NE(std::string(e.what()).find("at step 4"), std::string::npos) << e.what();
  }
  EXPECT_EQ(run.told.size(), static_cast<size_t>(std::min(4 + lag, 6))) << "steps that finished before the error";
}

// A run of `steps` whose last rank sleeps 0.3 s in step 4; with meet_at >= 0
// the run meets its ranks after that many steps. Its result.
TrainResult run_with_a_slow_step(const JobConfig& job, int lag, int64_t steps, int64_t meet_at = -1) {
  TrainResult result;
  ToyRun run(job, lag, steps, &result);
  run.slow_at = 4;
  run.meet_at = meet_at;
  run_loop(run);
  return result;
}

TEST_P(LaggedAgreement, ARankAheadWaitsForTheOthersAsTraining) {
  // The last rank sleeps 0.3 s in step 4; with a lag of 3 the others run on to step 6, where the run meets
  // its ranks before an evaluation, and wait there. That wait is training time on every rank, as the same
  // wait in their steps is with lag 0, so each rank's training seconds hold the 0.3 s.
  const int lag = GetParam();
  const TrainResult result = run_with_a_slow_step(JobConfig{}, lag, 8, 6);
  EXPECT_GE(result.train_seconds, 0.28) << "lag " << lag << ": a rank's wait for the slow one is missing";
}

TEST_P(LaggedAgreement, ARankAheadWaitsForTheOthersAsTrainingBeforeACheckpoint) {
  // As above, with the loop's checkpoint after 6 steps in place of the evaluation: the loop meets the ranks.
  const int lag = GetParam();
  JobConfig job;
  job.checkpoint_path = "not written: the toy run's checkpoint is a barrier";
  job.checkpoint_every = 6;
  const TrainResult result = run_with_a_slow_step(job, lag, 8);
  EXPECT_GE(result.train_seconds, 0.28) << "lag " << lag << ": a rank's wait for the slow one is missing";
}

TEST_P(LaggedAgreement, TheMedianStepLeavesOutAStrayPause) {
  // One step of 9 holds the last rank's 0.3 s sleep (and, on the others, the wait for it): the mean step
  // carries it, the median step does not.
  const int lag = GetParam();
  const TrainResult result = run_with_a_slow_step(JobConfig{}, lag, 9);
  EXPECT_GT(result.median_step_seconds, 0.0);
  EXPECT_LT(result.median_step_seconds, 0.01) << "lag " << lag;
  EXPECT_GT(result.train_seconds / 9, 0.03) << "lag " << lag << ": the pause is not in the mean";
}

INSTANTIATE_TEST_SUITE_P(Lags, LaggedAgreement, ::testing::Values(0, 1, 3));

}  // namespace
}  // namespace burstpool
