#include "burstpool/loop.hpp"

#include <signal.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <utility>
#include <vector>

#include "comm/wait.hpp"
#include "burstpool/job.hpp"
#include "burstpool/runtime.hpp"
#include "burstpool/stop.hpp"
#include "burstpool/trace.hpp"
#include "burstpool/trainer.hpp"
#include "run/run_record.hpp"

namespace burstpool {
namespace {

using Clock = std::chrono::steady_clock;

// Which of the agreement's stop counts a wish adds to: SIGTERM, SIGUSR1,
// another signal, a run's request. The first one counted wins, so the
// agreed stop is the largest signal (SIGTERM over SIGUSR1), as one MPI_MAX
// would give, in the one summing reduction that also carries the loss.
int stop_field(int wish) {
  if (wish == SIGTERM) return 0;
  if (wish == SIGUSR1) return 1;
  return wish > 0 ? 2 : 3;
}

int agreed_stop(const double* sums) {
  if (sums[0] > 0) return SIGTERM;
  if (sums[1] > 0) return SIGUSR1;
  if (sums[2] > 0) return SIGHUP;  // only SIGTERM and SIGUSR1 are handled (stop.hpp); any other, named as "another"
  return sums[3] > 0 ? kStopRequested : 0;
}

[[noreturn]] void throw_diverged(const RunSteps& run, double loss, int64_t step, bool first) {
  if (first)
    throw Diverged(fmt::format("{} loss is {} at the first {} {}: the model's weights or the data hold non-finite "
                               "values, or the input is out of range",
                               run.what(), loss, run.unit(), step));
  throw Diverged(fmt::format("{} loss became non-finite ({}) at {} {} (try a lower [optimizer] lr)", run.what(), loss,
                             run.unit(), step));
}

bool checkpoint_late(const RunSteps& run, Clock::time_point last_checkpoint) {
  const JobConfig& job = run.job_config();
  if (job.checkpoint_path.empty() || job.checkpoint_seconds <= 0) return false;
  int rank = 0;
  MPI_Comm_rank(run.comm(), &rank);
  return rank == 0 && seconds_since(last_checkpoint) >= job.checkpoint_seconds;
}

bool checkpoint_due(const RunSteps& run, const Agreement& agreed) {
  const JobConfig& job = run.job_config();
  if (job.checkpoint_path.empty()) return false;
  return agreed.checkpoint_late || (job.checkpoint_every > 0 && run.steps_done() % job.checkpoint_every == 0);
}

// The agreements in flight, oldest first: a ring of lag + 1, so a step can
// start its own before it waits for the one started lag steps earlier.
class AgreementQueue {
 public:
  AgreementQueue(MPI_Comm comm, int lag) : steps_(static_cast<size_t>(lag) + 1) {
    for (size_t i = 0; i < steps_.size(); ++i) slots_.push_back(std::make_unique<StepAgreement>(comm));
  }
  void start(int64_t step, int stop_wish, double loss, bool late) {
    const size_t i = (head_ + count_++) % slots_.size();
    steps_[i] = step;
    slots_[i]->start(stop_wish, loss, late);
  }
  // Waits for the oldest once every slot is in flight (`all`: whenever one
  // is); nothing when none is due.
  std::optional<std::pair<int64_t, Agreement>> due(bool all = false) {
    if (count_ == 0 || (!all && count_ < slots_.size())) return std::nullopt;
    const size_t i = head_;
    head_ = (head_ + 1) % slots_.size(), --count_;
    return std::pair{steps_[i], slots_[i]->finish()};
  }

 private:
  std::vector<std::unique_ptr<StepAgreement>> slots_;
  std::vector<int64_t> steps_;  // the step each slot's agreement started at
  size_t head_ = 0, count_ = 0;
};

// An agreement come in: the run's error on a non-finite loss, else its loss
// in the record.
void take_in(const RunSteps& run, const std::pair<int64_t, Agreement>& in, RunRecord* record) {
  const auto& [step, agreed] = in;
  if (agreed.non_finite) throw_diverged(run, agreed.loss_sum, step, step == run.first_step());
  if (record) record->loss(agreed.loss_sum);
}

// One step, its agreement started and the one due taken in (Agreement{}:
// none is due yet), recorded in `record` (if any) and, over the same time
// points, in the trace's step events (when it records).
Agreement agreed_step(RunSteps& run, AgreementQueue& agreements, Clock::time_point last_checkpoint,
                      RunRecord* record) {
  const auto t0 = Clock::now();
  const int64_t step = run.steps_done();
  if (record) tracer().begin_step(step, t0);
  const double loss = run.step_begin();
  agreements.start(step, run.stop_wish(), loss, checkpoint_late(run, last_checkpoint));
  if (step == run.fail_step() && world().rank == run.fail_rank())
    throw Error(fmt::format("test failure injected at {} {} {}", run.what(), run.unit(), step));
  run.step_middle();
  const auto in = agreements.due();
  if (in) take_in(run, *in, record);
  const Agreement agreed = in ? in->second : Agreement{};
  const auto t1 = Clock::now();
  const double seconds = std::chrono::duration<double>(t1 - t0).count();
  if (record) tracer().end_step(t1);
  const int64_t samples = run.step_samples();
  run.step_end(agreed, seconds);
  if (record) record->step(seconds, samples);
  return agreed;
}

}  // namespace

StepAgreement::~StepAgreement() {
  // Left by an exception with the reduction pending: the run is ending with
  // an error (and other ranks may never join), so neither wait for it nor
  // free what it may still write into.
  if (request_ != MPI_REQUEST_NULL) (void)sums_.release();
}

void StepAgreement::start(int stop_wish, double loss, bool late) {
  double* s = sums_.get();
  for (int i = 0; i <= kFields; ++i) s[i] = 0;
  if (stop_wish != 0) s[stop_field(stop_wish)] = 1;
  s[4] = std::isfinite(loss) ? 0 : 1;
  s[5] = late ? 1 : 0;
  s[6] = loss;
  BP_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, s, kFields + 1, MPI_DOUBLE, MPI_SUM, comm_, &request_));
}

Agreement StepAgreement::finish() {
  BP_CHECK(request_ != MPI_REQUEST_NULL, "StepAgreement::finish without start");
  wait_all(1, &request_);
  const double* s = sums_.get();
  Agreement a;
  a.stop = agreed_stop(s);
  a.non_finite = s[4] > 0;
  a.checkpoint_late = s[5] > 0;
  a.loss_sum = s[6];
  return a;
}

RunSteps::RunSteps(const JobConfig& job, MPI_Comm comm, TrainResult* result, std::string what, std::string unit)
    : job_(job), comm_(comm), result_(result), what_(std::move(what)), unit_(std::move(unit)) {}

RunSteps::~RunSteps() = default;

int RunSteps::stop_wish() const { return stop_signal(); }

void RunSteps::meet_ranks() {
  if (agreement_lag() == 0) return;
  const auto t0 = Clock::now();
  MPI_Request request = MPI_REQUEST_NULL;
  BP_MPI_CHECK(MPI_Ibarrier(comm_, &request));
  wait_all(1, &request);
  if (record_) record_->waited(seconds_since(t0));
}

double RunSteps::wall() const { return (result_ ? result_->earlier_wall_seconds : 0.0) + seconds_since(start_); }

LoopEnd run_loop(RunSteps& run) {
  const JobConfig& job = run.job_config();
  AgreementQueue agreements(run.comm(), run.agreement_lag());
  LoopEnd end;
  Clock::time_point last_checkpoint = Clock::now();
  if (run.first_step_ < 0) run.first_step_ = run.steps_done();
  if (run.result() && !run.record_) run.record_ = std::make_unique<RunRecord>(run);
  RunRecord* record = run.record_.get();
  while (!run.finished()) {
    const Agreement agreed = agreed_step(run, agreements, last_checkpoint, record);
    const int64_t done = run.steps_done();
    const bool last = run.finished();
    if (!last && !agreed.stop && checkpoint_due(run, agreed)) {
      run.meet_ranks();
      run.checkpoint();
      last_checkpoint = Clock::now();
    }
    if (record && (done % job.log_every == 0 || last || agreed.stop)) record->progress();
    if (agreed.stop) {  // the run's final checkpoint and metrics follow, no evaluation: the scheduler's kill may be near
      end.stop = agreed.stop;
      break;
    }
    if (run.evaluate(last)) {
      end.reached_target = true;
      break;
    }
  }
  // The lagged agreements still in flight: their losses, a divergence. Waiting for them is
  // the training's time, as it would have been in the steps without the lag.
  const auto t0 = Clock::now();
  while (const auto in = agreements.due(true)) take_in(run, *in, record);
  if (record) record->waited(seconds_since(t0));
  if (record) record->finish(end);
  return end;
}

void inject_failure_from_env(RunSteps& run, const char* name) {
  const char* hook = std::getenv(name);
  int rank = -1;
  long long step = -1;
  if (hook && std::sscanf(hook, "%d:%lld", &rank, &step) == 2) run.inject_failure(rank, step);
}

}  // namespace burstpool
