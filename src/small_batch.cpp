// Small-batch learners: sma, shadow and local-sgd (docs/learners.md).
//
// Every rank holds k learners (replicas of the whole model), each trained on
// its own batch of [train] batch_size samples per iteration. Learner batches
// come from one seeded sampler: iteration i uses learner batches
// [base, base + ranks x k), learner j of rank r taking base + r k + j, so no
// two learners see the same samples in an epoch. The learning-rate schedule
// runs over learner batches per rank (an iteration with k learners advances
// it by k), so its length does not depend on k.
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
#include "burstpool/memory.hpp"
#include "burstpool/run_log.hpp"
#include "burstpool/model_io.hpp"
#include "burstpool/runtime.hpp"
#include "burstpool/session.hpp"
#include "burstpool/sma.hpp"
#include "burstpool/stop.hpp"
#include "burstpool/trainer.hpp"
#include "learner_checkpoint.hpp"
#include "learners.hpp"
#include "shadow.hpp"

namespace burstpool {
namespace {

using Clock = std::chrono::steady_clock;

// Whether z is bitwise equal on every rank (collective); throws if not.
bool same_on_every_rank(const float* z, size_t n, int64_t iteration) {
  std::vector<float> lo(z, z + n), hi(z, z + n);
  BP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, lo.data(), static_cast<int>(n), MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD));
  BP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, hi.data(), static_cast<int>(n), MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD));
  if (lo != hi) throw Error(fmt::format("the average model differs between ranks after iteration {}", iteration));
  return true;
}

// Test accuracy and loss of the model `params` with batch-norm statistics
// `state` (collective): each rank evaluates its share of the test set with
// `learner`'s replica, whose own values (host copies current: sync_host) are
// put back afterwards.
EvalPoint evaluate(Learner& learner, const float* params, const float* state, const Dataset& test,
                   const JobConfig& job) {
  Model& m = learner.model();
  const size_t n = m.param_count(), s = m.state().size();
  std::vector<float> own(m.params().data(), m.params().data() + n);
  std::vector<float> own_state(m.state().data(), m.state().data() + s);
  std::copy(params, params + n, m.params().data());
  std::copy(state, state + s, m.state().data());
  learner.sync_device();
  const WorldInfo& w = world();
  const size_t lo = test.size() * w.rank / w.size, hi = test.size() * (w.rank + 1) / w.size;
  const int chunk = learner.exec->plan().global_batch, k = m.classes();
  std::vector<uint32_t> idx(chunk);
  Context ctx;
  ctx.training = false;
  ctx.seed = job.seed;
  ctx.loss_scale = 1.0 / static_cast<double>(test.size());
  double correct = 0, loss = 0;
  for (size_t start = lo; start < hi; start += chunk) {
    const int count = static_cast<int>(std::min<size_t>(chunk, hi - start));
    std::iota(idx.begin(), idx.begin() + count, static_cast<uint32_t>(start));
    gather_images(test, idx.data(), {0, count}, learner.images);
    gather_labels(test, idx.data(), {0, count}, learner.labels);
    loss += learner.exec->forward(count, learner.images.data(), learner.labels.data(), ctx);
    correct += count_correct(m.activation(m.logits_layer()).data(), count, k, learner.labels.data());
  }
  std::copy(own.begin(), own.end(), m.params().data());
  std::copy(own_state.begin(), own_state.end(), m.state().data());
  learner.sync_device();
  EvalPoint p;
  p.accuracy = sum_over_world(correct) / static_cast<double>(test.size());
  p.loss = sum_over_world(loss);
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

// --resume (collective): every replica, z (when given) and the progress from
// the newest valid checkpoint; the learner count per rank follows the file
// (add_learner adds one). Empty when there is no checkpoint yet.
std::optional<LearnerProgress> resume_learners(const JobConfig& job, std::vector<std::unique_ptr<Learner>>& learners,
                                               const std::function<void()>& add_learner,
                                               const std::function<std::vector<LearnerTensors>()>& replicas,
                                               AverageModel* z) {
  const WorldInfo& w = world();
  const SyncConfig& sc = job.sync;
  Model& names = learners[0]->model();
  const std::optional<Resumed> found = choose_checkpoint(
      job, [&](const std::string& file) { return check_learner_checkpoint(file, names, sc.strategy).iteration; },
      MPI_COMM_WORLD);
  if (!found) return std::nullopt;
  const LearnerProgress p = read_learner_checkpoint(found->file, names, 0, {}, nullptr);
  if (p.learners % w.size != 0 || (sc.learners > 0 && p.learners != sc.learners * w.size))
    throw Error(fmt::format("{}: holds {} learners in all, which {} rank(s) with [sync] learners = {} cannot take "
                            "(ranks x learners must stay {})",
                            found->file, p.learners, w.size, sc.learners == 0 ? "auto" : std::to_string(sc.learners),
                            p.learners));
  require_seed(found->file, p.seed, job);
  const int k = p.learners / w.size;
  while (static_cast<int>(learners.size()) < k) add_learner();
  while (static_cast<int>(learners.size()) > k) learners.pop_back();
  read_learner_checkpoint(found->file, names, w.rank * k, replicas(), z);
  for (auto& l : learners) l->sync_device();
  if (w.rank == 0)
    fmt::print("resuming from the checkpoint of iteration {} ({}): {} learner(s) per rank\n", p.iteration, found->file,
               k);
  return p;
}

}  // namespace

TrainResult train_small_batch(const JobConfig& job) {
  const auto wall_start = Clock::now();
  const WorldInfo& w = world();
  const SyncConfig& sc = job.sync;
  TrainResult r = start_result(job);
  auto wall = [&] { return r.earlier_wall_seconds + seconds_since(wall_start); };  // since the first run's start
  const bool sma = sc.strategy == "sma", shadow = sc.strategy == "shadow", local = sc.strategy == "local-sgd";
  const int b = job.batch_size;

  const ModelSpec spec = load_job_model(job);
  r.model = spec.name;
  require_memory(job, spec, Plan{}, MPI_COMM_WORLD);
  std::vector<std::unique_ptr<Learner>> learners;
  auto new_learner = [&] {
    learners.push_back(std::make_unique<Learner>(spec, b, job.seed, job.sgd, job.bucket_bytes));
    Learner& l = *learners.back();
    use_job_device(job, *l.exec);  // each learner its own GPU model: its own streams
    l.uses_sma = sma;
    l.device_step = (sma || local) && l.exec->device();
    return &l;
  };
  Learner& first = *new_learner();
  if (first.exec->device()) r.device = first.exec->device()->describe();
  if (is_hdf5_path(job.model_path) && has_weights(job.model_path)) {
    load_weights(job.model_path, first.model());
    first.sync_device();
  }
  const size_t n = first.model().param_count();
  const JobData data = load_job_data(job, first.model());
  BatchSampler sampler(data.train.size(), b, job.seed);
  const int64_t per_epoch = sampler.steps_per_epoch();  // learner batches per epoch
  const int64_t total_batches = job.steps > 0 ? 0 : job.epochs * per_epoch;
  LrSchedule schedule = job.schedule;
  schedule.total_steps = job.steps > 0 ? job.steps : std::max<int64_t>(1, total_batches / w.size);
  const SmaOptions sma_options{sc.alpha, job.sgd.momentum, sc.average_momentum, job.sgd.weight_decay};
  AverageModel z(first.params(), n, sc.average_momentum);
  auto add_learner = [&] {
    Learner& l = *new_learner();
    if (!sma && first.device_step) first.sync_host();
    const float* from = sma ? z.data() : first.params();
    std::copy(from, from + n, l.params());
    l.sync_device();
  };
  while (static_cast<int>(learners.size()) < std::max(1, sc.learners)) add_learner();
  // This rank's replicas as a checkpoint holds them (learner_checkpoint.hpp).
  auto replicas = [&] {
    std::vector<LearnerTensors> mine;
    for (auto& l : learners)
      mine.push_back({l->params(), l->model().state().data(), l->host_momentum()});
    return mine;
  };
  int64_t batches = 0, iteration = 0;  // learner batches taken (all ranks), iterations run
  float reset_lr = schedule.at(0);
  bool tuning = sma && sc.learners == 0;
  if (job.resume)
    if (const std::optional<LearnerProgress> p = resume_learners(job, learners, add_learner, replicas, sma ? &z : nullptr)) {
      iteration = p->iteration;
      batches = p->batches;
      reset_lr = p->reset_lr;
      tuning = tuning && p->tuning;
      restore_run_history(r, p->history);
    }
  const int64_t first_batches = batches;
  run_log().record("start", wall(), {{"job", job.name}, {"first_step", iteration}, {"ranks", w.size}});
  AutoTuner tuner(sc, tuning);

  std::mutex params_lock;  // shadow: learner 0's parameters, shared with the averaging thread
  std::unique_ptr<ShadowAverager> averager;
  if (shadow) {
    ShadowRule rule;
    rule.kind = sc.shadow_rule == "elastic"          ? ShadowRule::Kind::elastic
                : sc.shadow_rule == "block-momentum" ? ShadowRule::Kind::block_momentum
                                                     : ShadowRule::Kind::average;
    rule.alpha = sc.shadow_alpha;
    rule.block_momentum = sc.shadow_block_momentum;
    rule.block_lr = sc.shadow_block_lr;
    averager = std::make_unique<ShadowAverager>(MPI_COMM_WORLD, first.params(), n, params_lock, sc.shadow_pause_ms, rule);
    averager->start();
  }
  // Before the host reads the replicas (averages, evaluation, checkpoints).
  auto replicas_to_host = [&] {
    for (auto& l : learners) l->sync_host();
  };
  // The mean over every replica of every rank of one of their flat arrays,
  // into `out` (collective; replicas_to_host first).
  auto replica_mean = [&](std::vector<float>& out, float* (*of)(Learner&)) -> const float* {
    std::fill(out.begin(), out.end(), 0.0f);
    {
      std::unique_lock<std::mutex> guard(params_lock);  // shadow: learner 0's parameters move under its thread
      for (auto& l : learners) {
        const float* values = of(*l);
        for (size_t i = 0; i < out.size(); ++i) out[i] += values[i];
      }
    }
    sum_over_world(out.data(), out.size());
    const float inv = 1.0f / static_cast<float>(learners.size() * w.size);
    for (float& v : out) v *= inv;
    return out.data();
  };
  // The model the job stands for: z (sma), or the average of every replica;
  // its batch-norm statistics: the average of every replica's, so evaluation
  // on every rank and the checkpoint use one set. Collective.
  std::vector<float> current(n), current_state(first.model().state().size());
  auto average_model = [&]() -> const float* {
    return sma ? z.data() : replica_mean(current, [](Learner& l) { return l.params(); });
  };
  auto average_state = [&]() -> const float* {
    return replica_mean(current_state, [](Learner& l) { return l.model().state().data(); });
  };

  const bool chatty = w.rank == 0;
  if (chatty && !job.batch_note.empty()) fmt::print("{}\n", job.batch_note);
  if (chatty)
    fmt::print("burstpool: job '{}', model '{}' ({} parameters), {} training samples, {} x {} learner(s) of batch {}, "
               "strategy {}{}, {} thread(s) per rank, job id {}\n",
               job.name, spec.name, n, data.train.size(), w.size, sc.learners == 0 && sma ? "auto" : std::to_string(learners.size()), b,
               sc.strategy, tuner.active() ? " (learner count auto-tuned)" : "", r.threads, w.job_id);

  // Test hook: check after every synchronisation that z is bitwise the same on every rank.
  const bool check_average = std::getenv("BURSTPOOL_TEST_CHECK_AVERAGE") != nullptr;
  int64_t checked = 0;
  LearnerPool pool(r.threads);
  double window_loss = 0;
  int64_t window_iterations = 0, window_samples = 0;
  double window_seconds = 0;  // training time only
  const int64_t eval_step = job.eval_every > 0 ? job.eval_every : per_epoch;  // iterations, or learner batches
  int64_t next_eval = ((job.eval_every > 0 ? iteration : batches) / eval_step + 1) * eval_step;
  // A checkpoint (collective): the job's model, every replica, z; replicas'
  // statistics come from the device first.
  auto save_checkpoint = [&] {
    replicas_to_host();
    const float* model = average_model();
    const float* state = average_state();
    std::unique_lock<std::mutex> guard(params_lock);  // shadow: learner 0's parameters stay still
    const LearnerProgress p{sc.strategy, iteration,      batches, static_cast<int>(learners.size()) * w.size,
                            job.seed,    reset_lr,       tuner.active(), run_history(r, wall())};
    write_learner_checkpoint(job.checkpoint_path, first.model(), model, state, replicas(), sma ? &z : nullptr, p);
  };
  auto last_checkpoint = Clock::now();
  StopVote vote(MPI_COMM_WORLD);
  const auto per_iteration = [&] { return static_cast<int64_t>(w.size) * static_cast<int64_t>(learners.size()); };
  auto finished = [&] { return job.steps > 0 ? iteration >= job.steps : batches + per_iteration() > total_batches; };
  auto remaining_batches = [&] {  // learner batches still to take, all ranks
    return job.steps > 0 ? (job.steps - iteration) * per_iteration() : total_batches - batches;
  };
  while (!finished()) {
    const auto t0 = Clock::now();
    const int k = static_cast<int>(learners.size());
    const int64_t position = batches / w.size;  // schedule position: learner batches per rank
    const float lr = schedule.at(job.steps > 0 ? iteration : position);
    if (sma && lr < 0.5f * reset_lr) {  // a learning-rate drop: replicas restart from the average
      for (auto& l : learners) {
        l->sync_host();
        std::copy(z.data(), z.data() + n, l->params());
        l->sync_device();
      }
      reset_lr = lr;
    }
    for (int j = 0; j < k; ++j) {  // the sampler is not thread-safe: batches are gathered here
      Learner& l = *learners[j];
      const auto& idx = sampler.batch(batches + w.rank * k + j);
      gather_images(data.train, idx.data(), {0, b}, l.images);
      gather_labels(data.train, idx.data(), {0, b}, l.labels);
    }
    vote.start();
    pool.run(k, [&](int j) {
      omp_set_num_threads(std::max(1, r.threads / k));  // the learners share the rank's threads
      Learner& l = *learners[j];
      Context ctx;
      ctx.seed = job.seed;
      ctx.step = batches + w.rank * k + j;  // dropout masks differ per learner batch
      ctx.loss_scale = 1.0 / b;
      std::unique_lock<std::mutex> guard(params_lock, std::defer_lock);
      if (shadow) guard.lock();
      if (l.device_step) {  // parameters and momentum stay on the device
        l.loss = l.exec->forward(b, l.images.data(), l.labels.data(), ctx);
        l.exec->backward(ctx);
        if (sma)
          l.exec->device()->sma_step(sma_options, lr, z.data(), l.delta.data());
        else
          l.exec->device()->sgd_step(lr, job.sgd, {{0, n}});
        return;
      }
      l.params_to_device();
      l.loss = l.exec->forward(b, l.images.data(), l.labels.data(), ctx);
      l.exec->backward(ctx);
      l.gradients_to_host();
      if (sma) {
        std::fill(l.delta.begin(), l.delta.end(), 0.0f);
        sma_learner_step(sma_options, l.params(), l.momentum.data(), l.model().grads().data(), z.data(), lr,
                         l.delta.data(), n);
      } else {
        l.sgd->step(lr);
      }
    });
    double loss = 0;
    for (auto& l : learners) loss += l->loss / k;
    if (!std::isfinite(loss))
      throw Error(fmt::format("training loss became {} at iteration {} (try a lower [optimizer] lr)", loss, iteration));
    if (sma) {  // corrections: summed on the rank, then one allreduce
      float* delta = first.delta.data();
      for (int j = 1; j < k; ++j)
        for (size_t i = 0; i < n; ++i) delta[i] += learners[j]->delta[i];
      sum_over_world(delta, n);
      z.step(delta);
      if (check_average) checked += same_on_every_rank(z.data(), n, iteration);
    }
    if (local && (iteration + 1) % sc.local_steps == 0) {
      replicas_to_host();
      const float* avg = average_model();
      for (auto& l : learners) {
        std::copy(avg, avg + n, l->params());
        if (l->device_step) l->sync_device();
      }
    }
    const int stop = vote.finish();
    batches += static_cast<int64_t>(w.size) * k;
    ++iteration;
    const double seconds = seconds_since(t0);
    r.train_seconds += seconds;
    window_loss += loss;
    ++window_iterations;
    window_samples += static_cast<int64_t>(w.size) * k * b;
    window_seconds += seconds;

    const int next_k = std::max(1, tuner.after_iteration(k, seconds, static_cast<double>(w.size) * k * b, r.tuning));
    while (static_cast<int>(learners.size()) < next_k) add_learner();
    while (static_cast<int>(learners.size()) > next_k) learners.pop_back();
    if (chatty && next_k != k)
      fmt::print("auto-tune: {} learner(s) per rank gave {:.0f} samples/s; {} {}\n", k, r.tuning.back().samples_per_second,
                 next_k > k ? "trying" : "keeping", next_k);

    const bool last = finished();
    if (iteration % job.log_every == 0 || last || stop) {
      r.final_loss = sum_over_world(window_loss) / (w.size * window_iterations);
      const double rate = window_samples / std::max(1e-9, window_seconds);
      if (chatty)
        fmt::print("iteration {} | epoch {:.2f} | loss {:.4f} | {:.0f} samples/s | lr {:.4g} | learners {} | ETA {}\n",
                   iteration, static_cast<double>(batches) / per_epoch, r.final_loss, rate, lr, learners.size(),
                   eta(static_cast<double>(remaining_batches()) * b / rate));
      std::fflush(stdout);
      run_log().progress(wall(), iteration, static_cast<double>(batches) / per_epoch, r.final_loss, rate, lr);
      window_loss = 0;
      window_iterations = window_samples = 0;
      window_seconds = 0;
    }
    if (stop) {  // the checkpoint and metrics below, no evaluation: the scheduler's kill may be near
      r.stopped_by = stop_signal_name(stop);
      break;
    }
    const bool eval_due = job.eval_every > 0 ? iteration >= next_eval : batches >= next_eval;
    if (data.has_test && (eval_due || last)) {
      next_eval += eval_step;
      const auto e0 = Clock::now();
      replicas_to_host();
      const float* model = average_model();
      const float* state = average_state();
      std::unique_lock<std::mutex> guard(params_lock);  // shadow's thread must not average the swapped-in model
      EvalPoint p = evaluate(first, model, state, data.test, job);
      guard.unlock();
      p.step = iteration;
      p.epoch = static_cast<double>(batches) / per_epoch;
      if (record_evaluation(r, job, p, "iteration", seconds_since(e0), wall(), chatty)) break;
    }
    if (!last && checkpoint_due(job, iteration - 1, last_checkpoint)) {
      save_checkpoint();
      last_checkpoint = Clock::now();
    }
  }
  if (check_average && chatty)
    fmt::print("average model identical on every rank after each of {} synchronisations\n", checked);
  if (window_iterations > 0) r.final_loss = sum_over_world(window_loss) / (w.size * window_iterations);
  if (averager) r.shadow_rounds = averager->finish();
  r.learners = static_cast<int>(learners.size());
  r.steps = iteration;
  r.epochs = static_cast<double>(batches) / per_epoch;
  r.samples_per_second =
      static_cast<double>(batches - first_batches) * b / std::max(1e-9, r.train_seconds - r.earlier_train_seconds);
  r.forward_gflop_per_sample = first.model().forward_flops_per_sample() / 1e9;
  r.achieved_gflops = 3.0 * r.forward_gflop_per_sample * r.samples_per_second;
  r.wall_seconds = wall();
  if (!job.checkpoint_path.empty()) save_checkpoint();
  return r;
}

}  // namespace burstpool
