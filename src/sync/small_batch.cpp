// The small-batch learners' run (docs/learners.md), driven by run_loop: sma, shadow,
// local-sgd and any strategy of src/sync/registry.cpp.
//
// Every rank holds k learners (replicas of the whole model), each trained on
// its own batch of learner_batch_size samples per iteration. Learner batches
// come from one seeded sampler: iteration i uses learner batches
// [base, base + ranks x k), learner j of rank r taking base + r k + j, so no
// two learners see the same samples in an epoch. The learning-rate schedule
// runs over learner batches per rank (an iteration with k learners advances
// it by k), so its length does not depend on k.
//
// The run owns the learners, batches, schedule, auto-tuning, progress,
// evaluation and checkpoints (run_loop decides when); the strategy (src/sync/strategy.hpp)
// owns each learner's update and what keeps the replicas together.
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>

#include <mpi.h>
#include <omp.h>

#include "burstpool/checkpoint.hpp"
#include "burstpool/error.hpp"
#include "burstpool/loop.hpp"
#include "burstpool/memory.hpp"
#include "burstpool/model_io.hpp"
#include "burstpool/runtime.hpp"
#include "burstpool/session.hpp"
#include "burstpool/trainer.hpp"
#include "sync/learner_checkpoint.hpp"
#include "sync/learners.hpp"
#include "sync/strategy.hpp"

namespace burstpool {
namespace {

using Clock = std::chrono::steady_clock;

// Test accuracy and loss of the model `params` with batch-norm statistics
// `state` (collective): each rank evaluates its share of the test set with
// `learner`'s replica, whose own values (host copies current: sync_host) are
// put back afterwards.
EvalPoint evaluate_learner(Learner& learner, const float* params, const float* state, const Dataset& test,
                           const JobConfig& job) {
  Model& m = learner.model();
  const size_t n = m.param_count(), s = m.state().size();
  std::vector<float> own(m.params().data(), m.params().data() + n);
  std::vector<float> own_state(m.state().data(), m.state().data() + s);
  std::copy(params, params + n, m.params().data());
  std::copy(state, state + s, m.state().data());
  learner.sync_device();
  const WorldInfo& w = world();
  const EvalPoint p = evaluate_test_set(*learner.exec, test, test.size() * w.rank / w.size,
                                        test.size() * (w.rank + 1) / w.size, job_context(job));
  std::copy(own.begin(), own.end(), m.params().data());
  std::copy(own_state.begin(), own_state.end(), m.state().data());
  learner.sync_device();
  return p;
}

// The auto-tuner (CROSSBOW's; decisions in next_learner_count):
// rank 0's timing decides and every rank follows.
class AutoTuner {
 public:
  AutoTuner(const SyncConfig& c, bool on) : c_(c), on_(on) {}
  bool active() const { return on_; }
  // After each iteration with k learners; returns the learner count to use next.
  int after_iteration(int k, double seconds, double samples, std::vector<TrainResult::Tuning>& history) {
    if (!on_) return k;
    if (++iterations_ <= kUntimed) return k;
    seconds_ += seconds;
    samples_ += samples;
    if (iterations_ < kUntimed + c_.autotune_steps) return k;
    int decision[2] = {k, 0};  // next count, tuning over
    if (world().rank == 0) {
      history.push_back({k, samples_ / seconds_});
      const TuningStep t = next_learner_count(k, samples_ / seconds_, best_, c_.autotune_threshold, c_.max_learners);
      best_ = t.best;
      decision[0] = t.learners;
      decision[1] = t.done;
    }
    BP_MPI_CHECK(MPI_Bcast(decision, 2, MPI_INT, 0, MPI_COMM_WORLD));
    on_ = !decision[1];
    iterations_ = 0;
    seconds_ = samples_ = 0;
    return decision[0];
  }

 private:
  static constexpr int kUntimed = 3;
  const SyncConfig& c_;
  bool on_;
  int iterations_ = 0;
  double seconds_ = 0, samples_ = 0, best_ = 0;
};

// --resume (collective): every replica, the strategy's vectors and fields
// and the progress from the newest valid checkpoint; the learner count per
// rank follows the file (add_learner adds one). Empty when there is no
// checkpoint yet.
std::optional<LearnerProgress> resume_learners(const JobConfig& job, std::vector<std::unique_ptr<Learner>>& learners,
                                               const std::function<void()>& add_learner,
                                               const std::function<std::vector<LearnerTensors>()>& replicas,
                                               SyncStrategy& strategy) {
  const WorldInfo& w = world();
  const SyncConfig& sc = job.sync;
  Model& names = learners[0]->model();
  const std::optional<Resumed> found = choose_checkpoint(
      job,
      [&](const std::string& file) {
        return check_learner_checkpoint(file, names, sc.strategy, strategy.checkpoint_vectors()).iteration;
      },
      MPI_COMM_WORLD);
  if (!found) return std::nullopt;
  const LearnerProgress p = read_learner_checkpoint(found->file, names, 0, {}, {});
  if (p.learners % w.size != 0 || (sc.learners > 0 && p.learners != sc.learners * w.size))
    throw Error(fmt::format("{}: holds {} learners in all, which {} rank(s) with [sync] learners = {} cannot take "
                            "(ranks x learners must stay {})",
                            found->file, p.learners, w.size, sc.learners == 0 ? "auto" : std::to_string(sc.learners),
                            p.learners));
  require_seed(found->file, p.seed, job);
  const int k = p.learners / w.size;
  while (static_cast<int>(learners.size()) < k) add_learner();
  while (static_cast<int>(learners.size()) > k) learners.pop_back();
  read_learner_checkpoint(found->file, names, w.rank * k, replicas(), strategy.checkpoint_vectors());
  strategy.restore(p);
  for (auto& l : learners) l->sync_device();
  if (w.rank == 0)
    fmt::print("resuming from the checkpoint of iteration {} ({}): {} learner(s) per rank\n", p.iteration, found->file,
               k);
  return p;
}

// One run of the learners: its state, and its iterations for the run loop.
class LearnerRun final : public RunSteps {
 public:
  explicit LearnerRun(const JobConfig& job);
  TrainResult run();

  bool finished() const override {
    return job_.steps > 0 ? iteration_ >= job_.steps : batches_ + per_iteration() > total_batches_;
  }
  int64_t steps_done() const override { return iteration_; }
  int agreement_lag() const override { return sc_.agreement_lag; }
  // One iteration of every learner: their steps, then the strategy's
  // synchronisation (which the agreement overlaps), then the auto-tuner.
  double step_begin() override;
  void step_middle() override {
    const auto t0 = Clock::now();
    strategy_->after_iteration(team_, iteration_);
    times_.allreduce += seconds_since(t0);
  }
  void step_end(const Agreement& agreed, double seconds) override;
  int64_t step_samples() const override { return per_iteration() * b_; }
  void checkpoint() override { save_checkpoint(); }
  ProgressPoint progress(const WindowFigures& window) override;
  bool evaluate(bool last) override { return evaluate_now(last); }

 private:
  int64_t per_iteration() const { return static_cast<int64_t>(w_.size) * static_cast<int64_t>(learners_.size()); }
  int64_t remaining_batches() const {  // learner batches still to take, all ranks
    return job_.steps > 0 ? (job_.steps - iteration_) * per_iteration() : total_batches_ - batches_;
  }
  // Every replica held still against the strategy's own thread (hold_replica).
  std::vector<std::unique_lock<std::mutex>> hold_replicas();

  Learner& new_learner();
  void add_learner();  // starting from the strategy's starting_values
  void set_learner_count(int k);
  std::vector<LearnerTensors> replicas();  // this rank's, as a checkpoint holds them
  void resume();
  void print_banner() const;
  double step_learners(float lr);  // one iteration's batches and steps; the mean loss over the rank's learners
  bool evaluate_now(bool last);  // true: the target accuracy was reached
  void save_checkpoint();
  void finish();

  const SyncConfig& sc_;
  const WorldInfo& w_;
  TrainResult r_;
  const int b_;  // each learner's batch
  const ModelSpec spec_;
  std::vector<std::unique_ptr<Learner>> learners_;
  LearnerTeam team_;
  // After learners_ and team_, so it goes first: a strategy's own thread
  // (shadow's averaging) reads the replicas until the strategy is destroyed.
  std::unique_ptr<SyncStrategy> strategy_;
  JobData data_;
  std::optional<BatchSampler> sampler_;
  int64_t per_epoch_ = 1, total_batches_ = 0;  // learner batches per epoch, in all (epochs)
  LrSchedule schedule_;
  int64_t batches_ = 0, iteration_ = 0;  // learner batches taken (all ranks), iterations run
  std::unique_ptr<AutoTuner> tuner_;
  LearnerPool pool_;  // after learners_: its threads end before the learners go
  std::vector<float> current_, current_state_;  // the job's model and statistics, when the host needs them
  int64_t eval_step_ = 1, next_eval_ = 0;  // iterations, or learner batches
  float lr_ = 0;  // the last iteration's learning rate
  RankTimes times_;  // compute: the learners' steps; allreduce: after_iteration on the loop's thread
};

LearnerRun::LearnerRun(const JobConfig& job)
    : RunSteps(job, MPI_COMM_WORLD, &r_, "training", "iteration"),
      sc_(job.sync),
      w_(world()),
      r_(start_result(job)),
      b_(job.batch_size),
      spec_(load_job_model(job)),
      team_(learners_),
      strategy_(make_sync_strategy(job)),
      pool_(r_.threads) {
  r_.model = spec_.name;
  require_memory(job, spec_, Plan{}, MPI_COMM_WORLD);
  Learner& first = new_learner();
  r_.device = first.exec->device().describe();
  if (is_hdf5_path(job.model_path) && has_weights(job.model_path)) {
    load_weights(job.model_path, first.model());
    first.sync_device();
  }
  r_.forward_gflop_per_sample = first.model().forward_flops_per_sample() / 1e9;
  const size_t n = first.model().param_count();
  team_.n = n;
  data_ = load_job_data(job, first.model());
  sampler_.emplace(data_.train.size(), b_, job.seed);
  per_epoch_ = sampler_->steps_per_epoch();
  total_batches_ = job.steps > 0 ? 0 : job.epochs * per_epoch_;
  schedule_ = job.schedule;
  schedule_.total_steps = job.steps > 0 ? job.steps : std::max<int64_t>(1, total_batches_ / w_.size);
  strategy_->attach(team_);
  set_learner_count(std::max(1, sc_.learners));
  current_.resize(n);
  current_state_.resize(first.model().state().size());
}

std::vector<std::unique_lock<std::mutex>> LearnerRun::hold_replicas() {
  std::vector<std::unique_lock<std::mutex>> guards;
  for (int j = 0; j < static_cast<int>(learners_.size()); ++j) guards.push_back(strategy_->hold_replica(j));
  return guards;
}

Learner& LearnerRun::new_learner() {
  learners_.push_back(std::make_unique<Learner>(spec_, b_, job_.seed, job_.sgd, job_.bucket_bytes));
  Learner& l = *learners_.back();
  use_job_device(job_, *l.exec);  // each learner its own GPU model: its own streams
  strategy_->prepare(l);
  l.device_step = strategy_->device_resident() && l.exec->on_accelerator();
  return l;
}

void LearnerRun::add_learner() {
  Learner& l = new_learner();
  const float* from = strategy_->starting_values(team_);
  std::copy(from, from + team_.n, l.params());
  l.sync_device();
}

void LearnerRun::set_learner_count(int k) {
  while (static_cast<int>(learners_.size()) < k) add_learner();
  while (static_cast<int>(learners_.size()) > k) learners_.pop_back();
}

std::vector<LearnerTensors> LearnerRun::replicas() {
  std::vector<LearnerTensors> mine;
  for (auto& l : learners_) mine.push_back({l->params(), l->model().state().data(), l->host_momentum()});
  return mine;
}

void LearnerRun::resume() {
  bool tuning = sc_.learners == 0;  // only sma leaves the count open (job.cpp)
  if (job_.resume)
    if (const std::optional<LearnerProgress> p = resume_learners(
            job_, learners_, [this] { add_learner(); }, [this] { return replicas(); }, *strategy_)) {
      iteration_ = p->iteration;
      batches_ = p->batches;
      tuning = tuning && p->tuning;
      restore_run_history(r_, p->history);
    }
  tuner_ = std::make_unique<AutoTuner>(sc_, tuning);
  eval_step_ = job_.eval_every > 0 ? job_.eval_every : per_epoch_;
  next_eval_ = ((job_.eval_every > 0 ? iteration_ : batches_) / eval_step_ + 1) * eval_step_;
}

void LearnerRun::print_banner() const {
  if (w_.rank != 0) return;
  if (!job_.batch_note.empty()) fmt::print("{}\n", job_.batch_note);
  fmt::print("burstpool: job '{}', model '{}' ({} parameters), {} training samples, {} x {} learner(s) of batch {}, "
             "strategy {}{}, {} thread(s) per rank, job id {}\n",
             job_.name, spec_.name, team_.n, data_.train.size(), w_.size,
             sc_.learners == 0 ? "auto" : std::to_string(learners_.size()), b_, sc_.strategy,
             tuner_->active() ? " (learner count auto-tuned)" : "", r_.threads, w_.job_id);
}

double LearnerRun::step_learners(float lr) {
  const int k = static_cast<int>(learners_.size());
  for (int j = 0; j < k; ++j) {  // the sampler is not thread-safe: batches are gathered here
    Learner& l = *learners_[j];
    const auto& idx = sampler_->batch(batches_ + w_.rank * k + j);
    gather_images(data_.train, idx.data(), {0, b_}, l.images);
    gather_labels(data_.train, idx.data(), {0, b_}, l.labels);
  }
  pool_.run(k, [&](int j) {
    omp_set_num_threads(std::max(1, r_.threads / k));  // the learners share the rank's threads
    Learner& l = *learners_[j];
    Context ctx = job_context(job_);
    ctx.step = batches_ + w_.rank * k + j;  // dropout masks differ per learner batch
    ctx.loss_scale = 1.0 / b_;
    strategy_->learner_begins(j);
    try {
      if (!l.device_step) l.params_to_device();
      l.loss = l.exec->forward(b_, l.images.data(), l.labels.data(), ctx);
      l.exec->backward(ctx);
      if (!l.device_step) l.gradients_to_host();
      strategy_->learner_step(l, lr);
    } catch (...) {
      strategy_->learner_ends(j);
      throw;
    }
    strategy_->learner_ends(j);
  });
  double loss = 0;
  for (auto& l : learners_) loss += l->loss / k;
  return loss;
}

ProgressPoint LearnerRun::progress(const WindowFigures& window) {
  const double epoch = static_cast<double>(batches_) / per_epoch_;
  const double rate = window.samples_per_second;
  if (w_.rank == 0)
    fmt::print("iteration {} | epoch {:.2f} | loss {:.4f} | {:.0f} samples/s | lr {:.4g} | learners {} | ETA {}\n",
               iteration_, epoch, window.loss, rate, lr_, learners_.size(),
               eta(static_cast<double>(remaining_batches()) * b_ / rate));
  return {iteration_, epoch, lr_};
}

bool LearnerRun::evaluate_now(bool last) {
  const bool due = job_.eval_every > 0 ? iteration_ >= next_eval_ : batches_ >= next_eval_;
  if (!data_.has_test || !(due || last)) return false;
  next_eval_ += eval_step_;
  meet_ranks();
  const auto e0 = Clock::now();
  EvalPoint p;
  {
    const auto held = hold_replicas();  // the replicas read and learner 0's model swapped out and back
    team_.to_host();
    const float* model = strategy_->job_model(team_, current_);
    const float* state = team_.mean(current_state_, [](Learner& l) { return l.model().state().data(); });
    p = evaluate_learner(team_.first(), model, state, data_.test, job_);
  }
  p.step = iteration_;
  p.epoch = static_cast<double>(batches_) / per_epoch_;
  return record_evaluation(r_, job_, p, "iteration", seconds_since(e0), wall(), w_.rank == 0);
}

// Collective: the job's model, every replica and the strategy's part.
void LearnerRun::save_checkpoint() {
  const auto held = hold_replicas();  // the replicas stay still from the copies to the file
  team_.to_host();
  const float* model = strategy_->job_model(team_, current_);
  const float* state = team_.mean(current_state_, [](Learner& l) { return l.model().state().data(); });
  LearnerProgress p{sc_.strategy, iteration_,       batches_, static_cast<int>(learners_.size()) * w_.size,
                    job_.seed,    0.0f,             tuner_->active(), run_history(r_, wall())};
  strategy_->save(p);
  write_learner_checkpoint(job_.checkpoint_path, team_.first().model(), model, state, replicas(),
                           strategy_->checkpoint_vectors(), p);
}

// After the loop, which has set the training figures.
void LearnerRun::finish() {
  r_.strategy_counts = strategy_->finish();
  times_.background_sync = strategy_->background_seconds();
  gather_rank_times(r_, times_, r_.train_seconds - r_.earlier_train_seconds);  // this run's, since the resume
  r_.learners = static_cast<int>(learners_.size());
  r_.steps = iteration_;
  r_.epochs = static_cast<double>(batches_) / per_epoch_;
  if (!job_.checkpoint_path.empty()) save_checkpoint();
}

double LearnerRun::step_begin() {
  lr_ = schedule_.at(job_.steps > 0 ? iteration_ : batches_ / w_.size);  // learner batches per rank
  const auto t0 = Clock::now();
  strategy_->before_iteration(team_, lr_);
  const double loss = step_learners(lr_) / w_.size;  // the ranks' shares sum to the mean over every learner
  times_.compute += seconds_since(t0);
  return loss;
}

void LearnerRun::step_end(const Agreement&, double seconds) {
  const int k = static_cast<int>(learners_.size());
  batches_ += static_cast<int64_t>(w_.size) * k;
  ++iteration_;
  const int next_k = std::max(1, tuner_->after_iteration(k, seconds, static_cast<double>(w_.size) * k * b_, r_.tuning));
  set_learner_count(next_k);
  if (w_.rank == 0 && next_k != k)
    fmt::print("auto-tune: {} learner(s) per rank gave {:.0f} samples/s; {} {}\n", k,
               r_.tuning.back().samples_per_second, next_k > k ? "trying" : "keeping", next_k);
}

TrainResult LearnerRun::run() {
  resume();
  strategy_->begin(team_);
  print_banner();
  inject_failure_from_env(*this, "BURSTPOOL_TEST_FAIL");
  run_loop(*this);
  finish();
  return r_;
}

}  // namespace

TrainResult train_small_batch(const JobConfig& job) { return LearnerRun(job).run(); }

}  // namespace burstpool
