// An ssgd run: data parallel or any burst plan over the world's ranks,
// optionally with a background job beside it (src/multiplex/multiplex.cpp),
// its steps driven by run_loop (burstpool/loop.hpp) as the learners' are
// (src/sync/small_batch.cpp); the helpers both use (progress, evaluation
// records, checkpoint cadence, resume, metrics) are in src/run/trainer.cpp.
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>

#include <mpi.h>

#include "burstpool/auto_plan.hpp"
#include "burstpool/checkpoint.hpp"
#include "burstpool/error.hpp"
#include "burstpool/executor.hpp"
#include "burstpool/loop.hpp"
#include "burstpool/memory.hpp"
#include "burstpool/model.hpp"
#include "burstpool/plan.hpp"
#include "burstpool/runtime.hpp"
#include "burstpool/session.hpp"
#include "burstpool/trace.hpp"
#include "burstpool/trainer.hpp"
#include "multiplex/multiplex.hpp"

namespace burstpool {
namespace {

using Clock = std::chrono::steady_clock;

// With per-rank batch-norm statistics ([parallel] sync_batchnorm = false)
// each layer's first rank's go to the layer's other ranks (as PyTorch DDP
// broadcasts rank 0's buffers), so every rank evaluates the model the
// checkpoint holds. Collective; nothing with statistics summed over groups,
// which are the same on every rank already.
void share_statistics(const JobConfig& job, Executor& exec) {
  Model& m = exec.model();
  if (job.sync_batchnorm || m.state().size() == 0) return;
  DeviceModel& device = exec.device();
  device.copy_out(DeviceModel::Buffer::state, -1, 0, m.state().data(), m.state().size());
  exec.share_from_owners(m.state().data(), m.state().size(), true);
  device.copy_in(DeviceModel::Buffer::state, -1, 0, m.state().data(), m.state().size());
}

// Test-set accuracy and mean loss through the same plan as training.
EvalPoint evaluate_plan(Executor& exec, const Dataset& test, const JobConfig& job) {
  share_statistics(job, exec);
  return evaluate_test_set(exec, test, 0, test.size(), job_context(job));
}

Plan plan_for(const JobConfig& job, const ModelSpec& spec, int world_size, TrainResult& r) {
  if (job.plan_path.empty()) return job_data_parallel_plan(job, spec, world_size);
  if (job.plan_path == "auto") {
    const AutoPlan made = auto_plan(job, spec, r.threads);
    r.predicted_step_seconds = made.predicted_step_s;
    r.predicted_data_parallel_step_seconds = made.data_parallel_step_s;
    r.plan_file = made.path;
    return made.plan;
  }
  Plan plan = load_plan(job.plan_path);
  if (plan.global_batch != job.batch_size)
    throw Error(fmt::format("{}: the plan is for global batch {}, the job trains with batch {} (set --batch-size {})",
                            job.plan_path, plan.global_batch, job.batch_size, plan.global_batch));
  return plan;
}

// Every layer's parameters, state and momentum from the ranks that run it, on
// every rank, then written by rank 0.
void write_final_checkpoint(const JobConfig& job, Executor& exec, Sgd& sgd, int64_t steps, const std::string& history) {
  Model& m = exec.model();
  exec.device().to_host(sgd.velocity().data());
  exec.share_from_owners(m.params().data(), m.params().size(), false);
  exec.share_from_owners(m.state().data(), m.state().size(), true);
  exec.share_from_owners(sgd.velocity().data(), sgd.velocity().size(), false);
  if (world().rank == 0) write_checkpoint(job.checkpoint_path, m, sgd, {steps, job.seed, history});
}

// The job's plan, checked against the model and the world, and the memory
// it needs against what the node has (collective).
Plan checked_plan(const JobConfig& job, const ModelSpec& spec, TrainResult& r) {
  const Plan plan = plan_for(job, spec, world().size, r);
  validate_plan(plan, spec, world().size);
  require_memory(job, spec, plan, MPI_COMM_WORLD);
  return plan;
}

// One run of an ssgd job: its state, and its steps for the run loop.
class PlanRun final : public RunSteps {
 public:
  explicit PlanRun(const JobConfig& job);
  TrainResult run();

  bool finished() const override { return step_ >= total_; }
  int64_t steps_done() const override { return step_; }
  double step_begin() override;  // forward
  void step_middle() override { session_.update(step_); }
  void step_end(const Agreement& agreed, double seconds) override;
  int64_t step_samples() const override { return job_.batch_size; }
  void checkpoint() override;
  ProgressPoint progress(const WindowFigures& window) override;
  bool evaluate(bool last) override;

 private:
  double epoch_at(int64_t steps) const { return static_cast<double>(steps) / per_epoch_; }
  void resume();
  void print_banner();
  void start_background();
  bool evaluate_now(int64_t step);  // true: the target accuracy was reached
  void gather_time_splits(double run_seconds);
  void finish();

  const WorldInfo& w_;
  TrainResult r_;
  const ModelSpec spec_;
  const Plan plan_;
  TrainingSession session_;
  Executor& exec_;
  const int64_t total_, per_epoch_, eval_every_;
  const bool chatty_;
  int64_t first_step_ = 0, total_run_ = 0;  // total_run_: less when stopped early
  int64_t step_ = 0;                         // the next step
  std::unique_ptr<Multiplexer> multiplex_;
};

PlanRun::PlanRun(const JobConfig& job)
    : RunSteps(job, MPI_COMM_WORLD, &r_),
      w_(world()),
      r_(start_result(job)),
      spec_(load_job_model(job)),
      plan_(checked_plan(job, spec_, r_)),
      session_(job, spec_, plan_, MPI_COMM_WORLD),
      exec_(session_.exec()),
      total_(session_.total_steps()),
      per_epoch_(session_.steps_per_epoch()),
      eval_every_(job.eval_every > 0 ? job.eval_every : per_epoch_),
      chatty_(w_.rank == 0),
      total_run_(total_) {
  r_.model = spec_.name;
  r_.forward_gflop_per_sample = session_.model().forward_flops_per_sample() / 1e9;
  exec_.set_per_layer_allreduce(job.layer_timing);
  use_job_device(job, exec_);
  r_.device = exec_.device().describe();
}

void PlanRun::resume() {
  if (job_.resume)
    if (const std::optional<Resumed> from = resume_training(job_, session_.model(), session_.sgd(), MPI_COMM_WORLD)) {
      first_step_ = from->step;
      restore_run_history(r_, from->history);
      if (chatty_) fmt::print("resuming from the checkpoint of step {} ({})\n", from->step, from->file);
    }
  exec_.device().from_host(session_.sgd().velocity().data());  // initial or resumed
  if (!job_.trace_path.empty()) {
    exec_.set_traced(true);
    tracer().enable(job_.trace_first, job_.trace_end < 0 ? total_ : job_.trace_end);
  }
}

void PlanRun::print_banner() {
  if (!chatty_) return;
  fmt::print("burstpool: job '{}', model '{}' ({} parameters), {} training samples, global batch {}, {} steps, "
             "{} rank(s) x {} thread(s), {}, {}{}, job id {}\n",
             job_.name, spec_.name, session_.model().param_count(), session_.data().train.size(), job_.batch_size,
             total_, w_.size, r_.threads, job_.plan_path.empty() ? "data parallel" : "plan " + plan_.source,
             exec_.device().describe(), exec_.on_accelerator() && !job_.device_whole_model ? ", per-layer calls" : "",
             w_.job_id);
}

void PlanRun::start_background() {
  if (job_.background.job_path.empty()) return;
  if (job_.background.calibrate_steps >= total_ - first_step_) {
    const std::string why = fmt::format("[background] calibrate_steps: {} must be below the {} steps left to train "
                                        "(the foreground first runs that many alone)",
                                        job_.background.calibrate_steps, total_ - first_step_);
    if (first_step_ == 0) throw Error(fmt::format("{}: {}", job_.file, why));
    // A resumed run near its end (a requeue, say) finishes without its background rather than failing.
    if (chatty_) fmt::print(stderr, "burstpool: warning: {}; the background job does not run in this part\n", why);
    return;
  }
  multiplex_ = std::make_unique<Multiplexer>(job_, exec_);
}

double PlanRun::step_begin() { return session_.forward(step_); }

void PlanRun::step_end(const Agreement&, double seconds) {
  if (multiplex_) multiplex_->step_finished(seconds);
  ++step_;
}

ProgressPoint PlanRun::progress(const WindowFigures& window) {
  const int64_t step = step_ - 1;
  const double lr = session_.schedule().at(step);
  const double rate = window.samples_per_second;
  if (chatty_)
    fmt::print("step {}/{} | epoch {:.2f} | loss {:.4f} | {:.0f} samples/s | lr {:.4g} | ETA {}{}\n", step_, total_,
               epoch_at(step_), window.loss, rate, lr, eta((total_ - step_) * job_.batch_size / rate),
               multiplex_ ? multiplex_->progress() : "");
  return {step_, epoch_at(step_), lr};
}

bool PlanRun::evaluate_now(int64_t step) {
  const auto e0 = Clock::now();
  const TimeSplit before = exec_.times();
  EvalPoint p = evaluate_plan(exec_, session_.data().test, job_);
  tracer().span(Track::main, "evaluation", e0, false);
  exec_.times() = before;  // the time split covers training only
  p.step = step + 1;
  p.epoch = epoch_at(step + 1);
  return record_evaluation(r_, job_, p, "step", seconds_since(e0), wall(), chatty_);
}

// Each rank's compute, transfer, allreduce and idle seconds and peak memory
// (gathered on rank 0), and with [job] layer_timing each layer's slowest
// rank's transfer and reduction seconds per step.
void PlanRun::gather_time_splits(double run_seconds) {
  const TimeSplit& t = exec_.times();
  gather_rank_times(r_, {t.compute, t.transfer, t.allreduce}, run_seconds);
  if (!job_.layer_timing) return;
  Model& model = session_.model();
  std::vector<double> local, worst(2 * model.size());
  for (const LayerTimes& lt : exec_.layer_times()) local.insert(local.end(), {lt.transfer, lt.allreduce});
  BP_MPI_CHECK(MPI_Reduce(local.data(), worst.data(), static_cast<int>(local.size()), MPI_DOUBLE, MPI_MAX, 0,
                          MPI_COMM_WORLD));
  for (int i = 0; i < model.size(); ++i)
    r_.per_layer.push_back(
        {model.layer(i).name(), exec_.ranks_of(i), worst[2 * i] / total_run_, worst[2 * i + 1] / total_run_});
}

// After the loop, which has set the training figures.
void PlanRun::finish() {
  if (multiplex_) r_.multiplex = multiplex_->finish();
  r_.steps = total_run_;
  r_.epochs = epoch_at(total_run_);
  gather_time_splits(r_.train_seconds - r_.earlier_train_seconds);  // this run's, since the resume
  if (!job_.checkpoint_path.empty())
    write_final_checkpoint(job_, exec_, session_.sgd(), total_run_, run_history(r_, r_.wall_seconds));
  if (!job_.trace_path.empty()) {
    const size_t events = tracer().write(job_.trace_path, fmt::format("burstpool train {}", job_.file));
    if (chatty_) fmt::print("trace: {} events on {} rank(s) in {}\n", events, w_.size, job_.trace_path);
  }
}

void PlanRun::checkpoint() {
  const auto c0 = Clock::now();
  write_final_checkpoint(job_, exec_, session_.sgd(), step_, run_history(r_, wall()));
  tracer().span(Track::main, "checkpoint", c0, false);
}

bool PlanRun::evaluate(bool last) {
  return session_.data().has_test && (step_ % eval_every_ == 0 || last) && evaluate_now(step_ - 1);
}

TrainResult PlanRun::run() {
  resume();
  print_banner();
  start_background();
  step_ = first_step_;
  inject_failure_from_env(*this, "BURSTPOOL_TEST_FAIL");
  const LoopEnd end = run_loop(*this);
  if (end.stop || end.reached_target) total_run_ = step_;
  finish();
  return r_;
}

}  // namespace

TrainResult train_plan(const JobConfig& job) { return PlanRun(job).run(); }

}  // namespace burstpool
