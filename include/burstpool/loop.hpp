#pragma once
// The one control flow of a training run, for every kind of run: the plan's
// steps (data parallel or burst), the small-batch learners' iterations and
// the background job's steps (in its own thread, between the foreground's
// layers). The run supplies the work of a step; the loop owns what happens
// around it, in the same order on every rank, so every collective started
// there matches across ranks:
//
//   the step's first part (up to this rank's loss) -> the ranks' agreement
//   starts (one small non-blocking reduction over the run's communicator:
//   stop wishes, non-finite losses, rank 0's checkpoint clock, the loss sum)
//   -> the step's middle part, which the reduction overlaps -> the agreement
//   started agreement_lag() steps before is awaited (this step's own when
//   the lag is 0); a non-finite loss there ends the run on every rank with
//   the same error -> the step's last part (told that agreement) ->
//   checkpoint when due, but not after the last step or a stop (the run's
//   final checkpoint follows) -> a progress line every [train] log_every
//   steps, at the last one and at a stop -> on a stop, the end ->
//   evaluation when the run says it is due -> the end when its target
//   accuracy was reached.
//
// For a run with a result (the foreground's), the loop also times the steps
// and keeps the training figures and the run log (src/run/run_record.hpp):
// the progress window's loss and rate, the result's train seconds, final
// loss, rate, stop and wall seconds, and the log's start, progress and end
// records. The run prints its own progress line from those figures and adds
// what only it knows (steps and epochs, time splits, its final checkpoint)
// after the loop.
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "burstpool/error.hpp"

namespace burstpool {

struct JobConfig;
struct TrainResult;
class RunRecord;  // src/run/run_record.hpp

// A run's own stop request (a background job asked to stop by its
// foreground), as Agreement::stop reports it; signals are positive.
constexpr int kStopRequested = -1;

// What the ranks of a run agreed on after a step.
struct Agreement {
  // The stop agreed: the largest stop signal any rank received (stop.hpp),
  // else kStopRequested if any rank's run asked to stop, else 0 to go on.
  int stop = 0;
  bool non_finite = false;       // some rank's loss was not finite
  bool checkpoint_late = false;  // rank 0: [output] checkpoint_seconds have passed since the last checkpoint
  double loss_sum = 0;           // the ranks' losses, summed (0 where a rank holds no loss)
};

// The per-step reduction behind Agreement: start() sends this rank's part
// without waiting, finish() waits (under the wait policy of comm/wait.hpp, so
// a background job may have the core meanwhile) and returns what all agreed.
// Every rank of comm calls both, in the same steps.
class StepAgreement {
 public:
  explicit StepAgreement(MPI_Comm comm) : comm_(comm) {}
  ~StepAgreement();
  StepAgreement(const StepAgreement&) = delete;
  StepAgreement& operator=(const StepAgreement&) = delete;
  // stop_wish: a signal number, kStopRequested or 0.
  void start(int stop_wish, double loss, bool checkpoint_late);
  Agreement finish();

 private:
  static constexpr int kFields = 6;  // SIGTERM, SIGUSR1, another signal, a request, non-finite, late; then the loss
  MPI_Comm comm_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  // Summed: counts of each stop wish and flag, and the loss. Left to leak
  // if a step throws with the reduction pending (it may still write here).
  std::unique_ptr<double[]> sums_ = std::make_unique<double[]>(kFields + 1);
};

// A run's loss became non-finite, agreed by all its ranks (so each may end
// the run, or a background job alone, without waiting for the others).
struct Diverged : Error {
  using Error::Error;
};

// A progress line's figures over the steps since the last one, as the loop
// measured them.
struct WindowFigures {
  double loss = 0;                // the mean step loss (Agreement::loss_sum) over the agreements in
  double samples_per_second = 0;  // over the steps' own time (no evaluations or checkpoints)
  int64_t steps = 0;
};

// Where a run is at a progress line, for the run log.
struct ProgressPoint {
  int64_t step = 0;  // steps (iterations) done
  double epoch = 0;
  double lr = 0;
};

struct LoopEnd {
  int stop = 0;                 // the agreed stop (Agreement::stop), 0 if none
  bool reached_target = false;  // ended by the target accuracy
};

class RunSteps {
 public:
  virtual ~RunSteps();
  virtual bool finished() const = 0;
  virtual int64_t steps_done() const = 0;  // steps taken, resumed ones included

  // One step, in three parts around the ranks' agreement. begin: the work up
  // to this rank's share of the step's loss (the shares of the run's ranks
  // sum to the loss; 0 where a rank holds none). middle: the work the
  // agreement's reduction overlaps (an update, a backward pass, a
  // synchronisation). end: the rest, told what was agreed and the step's
  // seconds; not called when a loss was non-finite (the loop throws
  // Diverged). A run that drops a stopped step's update does so in end(),
  // leaving steps_done() as it was.
  virtual double step_begin() = 0;
  virtual void step_middle() {}
  virtual void step_end(const Agreement& /*agreed*/, double /*seconds*/) {}
  // The samples the step trained, all ranks together (asked before step_end).
  virtual int64_t step_samples() const { return 0; }
  // This rank's stop wish for the agreement: by default the stop signal this
  // process received (stop.hpp).
  virtual int stop_wish() const;
  // Steps between an agreement's start and the step that waits for it: 0,
  // the step waits for its own. A lag of L lets a step's reduction take L
  // more steps (a run whose ranks never otherwise wait for each other then
  // does not wait for the link at every step: a small message can queue
  // behind a background thread's large ones) at the cost of acting on a
  // stop, a non-finite loss or rank 0's checkpoint clock L steps late, on
  // every rank at the same step. The loop waits for the ones in flight
  // before it returns. The same on every rank.
  virtual int agreement_lag() const { return 0; }

  virtual void checkpoint() = 0;  // collective
  // A progress line for the steps since the last one (`window`); returns
  // where the run is, for the run log.
  virtual ProgressPoint progress(const WindowFigures& /*window*/) { return {}; }
  // An evaluation, if the run's cadence says one is due (`last`: the run's
  // last step). Returns true when it reached the target accuracy that ends
  // the run.
  virtual bool evaluate(bool /*last*/) { return false; }

  const JobConfig& job_config() const { return job_; }
  MPI_Comm comm() const { return comm_; }
  // The foreground's result: the loop keeps its training figures
  // (train_seconds, final_loss, samples_per_second, achieved_gflops from
  // forward_gflop_per_sample, wall_seconds, stopped_by) and writes its run
  // log records (start, progress, end). nullptr for a run that reports
  // otherwise (the background job).
  TrainResult* result() const { return result_; }
  // Seconds since the job's first run started (the result's earlier runs
  // included), from this object's construction.
  double wall() const;
  // How errors name the run and its steps: "training", "step".
  const std::string& what() const { return what_; }
  const std::string& unit() const { return unit_; }
  // Test hook: the loop throws on world rank `rank` at step `step`, just
  // after the step's agreement started (the others are left waiting in it).
  void inject_failure(int rank, int64_t step) { fail_rank_ = rank, fail_step_ = step; }
  int fail_rank() const { return fail_rank_; }
  int64_t fail_step() const { return fail_step_; }
  // steps_done() when run_loop first ran these steps (a run may be looped in
  // pieces), -1 before: a loss that is non-finite there comes from the
  // weights or the data, not from training.
  int64_t first_step() const { return first_step_; }

 protected:
  // comm: the ranks that agree after each step. result: as result() says,
  // and must outlive this object.
  RunSteps(const JobConfig& job, MPI_Comm comm, TrainResult* result, std::string what = "training",
           std::string unit = "step");
  // With agreement_lag() > 0, before a collective outside the steps: waits
  // until every rank of comm() is here and counts the wait as training. The
  // ranks drift apart by up to the lag's steps, and a rank ahead would
  // otherwise wait in that collective, in time that is not training's, where
  // with lag 0 it waits in its steps. Nothing with lag 0. Collective. The
  // loop calls it before a checkpoint; a run calls it before its evaluation
  // (only the run knows when one is due).
  void meet_ranks();
  const JobConfig& job_;

 private:
  MPI_Comm comm_;
  TrainResult* result_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::unique_ptr<RunRecord> record_;  // what the loop keeps across its calls
  std::string what_, unit_;
  int fail_rank_ = -1;
  int64_t fail_step_ = -1;
  int64_t first_step_ = -1;
  friend LoopEnd run_loop(RunSteps& run);
};

// Runs steps until the run is finished, a stop is agreed or an evaluation
// reaches the target. Throws Diverged on every rank when a loss is non-finite.
LoopEnd run_loop(RunSteps& run);

// Reads a test hook's "rank:step" from the environment variable `name` into
// run.inject_failure; nothing when it is unset.
void inject_failure_from_env(RunSteps& run, const char* name);

}  // namespace burstpool
