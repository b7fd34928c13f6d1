#include "burstpool/trainer.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>

#include <mpi.h>

#include "burstpool/auto_plan.hpp"
#include "burstpool/checkpoint.hpp"
#include "burstpool/executor.hpp"
#include "burstpool/memory.hpp"
#include "burstpool/plan.hpp"
#include "burstpool/error.hpp"
#include "burstpool/model.hpp"
#include "burstpool/model_io.hpp"
#include "burstpool/run_log.hpp"
#include "burstpool/runtime.hpp"
#include "burstpool/session.hpp"
#include "burstpool/stop.hpp"
#include "burstpool/trace.hpp"
#include "burstpool/version.hpp"
#include "multiplex.hpp"

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
  DeviceModel* device = exec.device();
  if (device) device->copy_out(DeviceModel::Buffer::state, -1, 0, m.state().data(), m.state().size());
  exec.share_from_owners(m.state().data(), m.state().size(), true);
  if (device) device->copy_in(DeviceModel::Buffer::state, -1, 0, m.state().data(), m.state().size());
}

// Test-set accuracy and mean loss through the same plan as training.
EvalPoint evaluate(Executor& exec, const Dataset& test, const JobConfig& job) {
  share_statistics(job, exec);
  return evaluate_test_set(exec, test, 0, test.size(), job.seed);
}

Plan plan_for(const JobConfig& job, const ModelSpec& spec, int world_size, TrainResult& r) {
  if (job.plan_path.empty()) return job_data_parallel_plan(job, spec, world_size);
  if (job.plan_path == "auto") {
    const AutoPlan made = auto_plan(job, spec, r.threads);
    r.predicted_step_seconds = made.predicted_step_s;
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
  if (DeviceModel* device = exec.device()) device->to_host(sgd.velocity().data());
  exec.share_from_owners(m.params().data(), m.params().size(), false);
  exec.share_from_owners(m.state().data(), m.state().size(), true);
  exec.share_from_owners(sgd.velocity().data(), sgd.velocity().size(), false);
  if (world().rank == 0) write_checkpoint(job.checkpoint_path, m, sgd, {steps, job.seed, history});
}

}  // namespace

std::string eta(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "?";
  int s = static_cast<int>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}h{:02}m", s / 3600, s / 60 % 60) : fmt::format("{}m{:02}s", s / 60, s % 60);
}

bool checkpoint_due(const JobConfig& job, int64_t step, std::chrono::steady_clock::time_point last) {
  if (job.checkpoint_path.empty()) return false;
  bool due = job.checkpoint_every > 0 && (step + 1) % job.checkpoint_every == 0;
  if (job.checkpoint_seconds > 0) {
    int late = world().rank == 0 && seconds_since(last) >= job.checkpoint_seconds;
    BP_MPI_CHECK(MPI_Bcast(&late, 1, MPI_INT, 0, MPI_COMM_WORLD));
    due = due || late;
  }
  return due;
}

std::optional<Resumed> choose_checkpoint(const JobConfig& job,
                                         const std::function<int64_t(const std::string&)>& validate, MPI_Comm comm) {
  if (job.checkpoint_path.empty())
    throw Error(fmt::format("{}: --resume needs a checkpoint path ([output] checkpoint or --checkpoint)", job.file));
  const std::string& path = job.checkpoint_path;
  long long choice[2] = {-1, 0};  // which file (-1 none, 0 path, 1 path.prev), its step
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0) {
    std::vector<std::string> rejected;
    const std::optional<Resumed> found = newest_checkpoint(path, validate, rejected);
    for (const std::string& why : rejected) fmt::print(stderr, "burstpool: warning: refused {}\n", why);
    if (found) choice[0] = found->file == path ? 0 : 1, choice[1] = found->step;
  }
  BP_MPI_CHECK(MPI_Bcast(choice, 2, MPI_LONG_LONG, 0, comm));
  if (choice[0] < 0) {
    if (rank == 0) fmt::print("no checkpoint at {} yet: job '{}' starts from step 0\n", path, job.name);
    return std::nullopt;
  }
  return Resumed{choice[1], choice[0] == 0 ? path : path + ".prev"};
}

void require_seed(const std::string& file, uint64_t seed, const JobConfig& job) {
  if (seed != job.seed)
    throw Error(fmt::format("{}: checkpoint was trained with seed {}, the job has seed {}", file, seed, job.seed));
}

std::optional<Resumed> resume_training(const JobConfig& job, Model& model, Sgd& sgd, MPI_Comm comm) {
  const std::optional<Resumed> found =
      choose_checkpoint(job, [&](const std::string& file) { return read_checkpoint(file, model, sgd).step; }, comm);
  if (!found) return found;
  const CheckpointInfo info = read_checkpoint(found->file, model, sgd);  // rank 0 again: cheap, and the same code path
  if (info.step != found->step)
    throw Error(fmt::format("{}: holds step {} here but step {} on rank 0 (changed while resuming?)", found->file,
                            info.step, found->step));
  require_seed(found->file, info.seed, job);
  return Resumed{found->step, found->file, info.history};
}

TrainResult train(const JobConfig& job) {
  if (!job.trace_path.empty() && job.sync.strategy != "ssgd")
    throw Error(fmt::format("--trace: timelines cover data-parallel and burst runs ([sync] strategy = ssgd), not {}",
                            job.sync.strategy));
  if (job.sync.strategy != "ssgd") return train_small_batch(job);
  const auto wall_start = Clock::now();
  const WorldInfo& w = world();
  TrainResult r = start_result(job);

  const ModelSpec spec = load_job_model(job);
  r.model = spec.name;
  const Plan plan = plan_for(job, spec, w.size, r);
  validate_plan(plan, spec, w.size);
  require_memory(job, spec, plan, MPI_COMM_WORLD);
  TrainingSession session(job, spec, plan, MPI_COMM_WORLD);
  Executor& exec = session.exec();
  exec.set_per_layer_allreduce(job.layer_timing);
  Model& model = session.model();
  Sgd& sgd = session.sgd();
  const JobData& data = session.data();
  const int64_t total = session.total_steps(), per_epoch = session.steps_per_epoch();
  const int64_t eval_every = job.eval_every > 0 ? job.eval_every : per_epoch;
  const bool chatty = w.rank == 0;
  use_job_device(job, exec);
  if (exec.device()) r.device = exec.device()->describe();
  int64_t first_step = 0;
  if (job.resume)
    if (const std::optional<Resumed> from = resume_training(job, model, sgd, MPI_COMM_WORLD)) {
      first_step = from->step;
      restore_run_history(r, from->history);
      if (chatty) fmt::print("resuming from the checkpoint of step {} ({})\n", from->step, from->file);
    }
  if (DeviceModel* device = exec.device()) device->from_host(sgd.velocity().data());  // initial or resumed values
  if (!job.trace_path.empty()) {
    exec.set_traced(true);
    tracer().enable(job.trace_first, job.trace_end < 0 ? total : job.trace_end);
  }
  if (chatty)
    fmt::print("burstpool: job '{}', model '{}' ({} parameters), {} training samples, global batch {}, {} steps, "
               "{} rank(s) x {} thread(s), {}, {}, job id {}\n",
               job.name, spec.name, model.param_count(), data.train.size(), job.batch_size, total, w.size, r.threads,
               job.plan_path.empty() ? "data parallel" : "plan " + plan.source,
               exec.device() ? exec.device()->describe() : "CPU", w.job_id);
  std::unique_ptr<Multiplexer> multiplex;
  bool with_background = !job.background.job_path.empty();
  if (with_background && job.background.calibrate_steps >= total - first_step) {
    const std::string why = fmt::format("[background] calibrate_steps: {} must be below the {} steps left to train "
                                        "(the foreground first runs that many alone)",
                                        job.background.calibrate_steps, total - first_step);
    if (first_step == 0) throw Error(fmt::format("{}: {}", job.file, why));
    // A resumed run near its end (a requeue, say) finishes without its background rather than failing.
    if (chatty) fmt::print(stderr, "burstpool: warning: {}; the background job does not run in this part\n", why);
    with_background = false;
  }
  if (with_background) multiplex = std::make_unique<Multiplexer>(job, exec);

  double window_loss = 0;
  int64_t window_steps = 0, total_run = total;  // total_run: less when stopped at the target
  auto window_start = Clock::now(), last_checkpoint = Clock::now();
  auto wall = [&] { return r.earlier_wall_seconds + seconds_since(wall_start); };
  StopVote vote(MPI_COMM_WORLD);
  run_log().record("start", wall(), {{"job", job.name}, {"first_step", first_step}, {"ranks", w.size}});
  for (int64_t step = first_step; step < total; ++step) {
    const auto t0 = Clock::now();
    tracer().begin_step(step, t0);
    const double loss = session.forward(step);
    if (!std::isfinite(loss))
      throw Error(step == first_step
                      ? fmt::format("training loss is {} at the first step {}: the model's weights or the data hold "
                                    "non-finite values, or the input is out of range",
                                    loss, step)
                      : fmt::format("training loss became {} at step {} (try a lower [optimizer] lr)", loss, step));
    vote.start();
    session.update(step);
    const int stop = vote.finish();
    const auto t1 = Clock::now();
    const double step_seconds = std::chrono::duration<double>(t1 - t0).count();
    tracer().end_step(t1);
    r.train_seconds += step_seconds;
    if (multiplex) multiplex->step_finished(step_seconds);
    window_loss += loss;
    ++window_steps;

    const bool last = step + 1 == total;
    if (!last && !stop && checkpoint_due(job, step, last_checkpoint)) {
      const auto c0 = Clock::now();
      write_final_checkpoint(job, exec, sgd, step + 1, run_history(r, wall()));
      tracer().span(Track::main, "checkpoint", c0, false);
      last_checkpoint = window_start = Clock::now();  // checkpointing is not training time
    }
    if ((step + 1) % job.log_every == 0 || last || stop) {
      r.final_loss = sum_over_world(window_loss) / window_steps;
      const double rate = window_steps * job.batch_size / std::max(1e-9, seconds_since(window_start));
      if (chatty)
        fmt::print("step {}/{} | epoch {:.2f} | loss {:.4f} | {:.0f} samples/s | lr {:.4g} | ETA {}{}\n", step + 1,
                   total, static_cast<double>(step + 1) / per_epoch, r.final_loss, rate,
                   session.schedule().at(step), eta((total - step - 1) * job.batch_size / rate),
                   multiplex ? multiplex->progress() : "");
      std::fflush(stdout);
      run_log().progress(wall(), step + 1, static_cast<double>(step + 1) / per_epoch, r.final_loss, rate,
                         session.schedule().at(step));
      window_loss = 0;
      window_steps = 0;
      window_start = Clock::now();
    }
    if (stop) {  // the checkpoint and metrics below, no evaluation: the scheduler's kill may be near
      total_run = step + 1;
      r.stopped_by = stop_signal_name(stop);
      break;
    }
    if (data.has_test && ((step + 1) % eval_every == 0 || last)) {
      const auto e0 = Clock::now();
      const TimeSplit before = exec.times();
      EvalPoint p = evaluate(exec, data.test, job);
      tracer().span(Track::main, "evaluation", e0, false);
      exec.times() = before;  // the time split covers training only
      p.step = step + 1;
      p.epoch = static_cast<double>(step + 1) / per_epoch;
      const bool stop = record_evaluation(r, job, p, "step", seconds_since(e0), wall(), chatty);
      window_start = Clock::now();  // evaluation is not training time
      if (stop) {
        total_run = step + 1;
        break;
      }
    }
  }
  if (window_steps > 0) r.final_loss = sum_over_world(window_loss) / window_steps;  // stopped at the target
  if (multiplex) r.multiplex = multiplex->finish();
  r.steps = total_run;
  r.epochs = static_cast<double>(total_run) / per_epoch;
  const double run_seconds = r.train_seconds - r.earlier_train_seconds;  // this run's, since the resume
  r.samples_per_second = (total_run - first_step) * job.batch_size / std::max(1e-9, run_seconds);
  r.forward_gflop_per_sample = model.forward_flops_per_sample() / 1e9;
  r.achieved_gflops = 3.0 * r.forward_gflop_per_sample * r.samples_per_second;
  const TimeSplit& t = exec.times();
  constexpr int kFields = 5;
  const double mine[kFields] = {t.compute, t.transfer, t.allreduce,
                                std::max(0.0, run_seconds - t.compute - t.transfer - t.allreduce),
                                static_cast<double>(peak_resident_bytes())};
  std::vector<double> all(kFields * w.size);
  BP_MPI_CHECK(MPI_Gather(mine, kFields, MPI_DOUBLE, all.data(), kFields, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  for (int k = 0; k < w.size; ++k) {
    const double* f = &all[kFields * k];
    r.per_rank.push_back({f[0], f[1], f[2], f[3], f[4]});
  }
  if (job.layer_timing) {
    std::vector<double> local, worst(2 * model.size());
    for (const LayerTimes& lt : exec.layer_times()) local.insert(local.end(), {lt.transfer, lt.allreduce});
    BP_MPI_CHECK(MPI_Reduce(local.data(), worst.data(), static_cast<int>(local.size()), MPI_DOUBLE, MPI_MAX, 0,
                            MPI_COMM_WORLD));
    for (int i = 0; i < model.size(); ++i)
      r.per_layer.push_back({model.layer(i).name(), exec.ranks_of(i), worst[2 * i] / total_run, worst[2 * i + 1] / total_run});
  }
  r.wall_seconds = wall();
  if (!job.checkpoint_path.empty()) write_final_checkpoint(job, exec, sgd, total_run, run_history(r, r.wall_seconds));
  if (!job.trace_path.empty()) {
    const size_t events = tracer().write(job.trace_path, fmt::format("burstpool train {}", job.file));
    if (chatty) fmt::print("trace: {} events on {} rank(s) in {}\n", events, w.size, job.trace_path);
  }
  return r;
}

EvalPoint evaluate_test_set(Executor& exec, const Dataset& test, size_t lo, size_t hi, uint64_t seed) {
  Model& m = exec.model();
  const int k = m.classes(), chunk = exec.plan().global_batch;
  std::vector<uint32_t> idx(chunk);
  std::vector<float> images;
  std::vector<int32_t> labels;
  Context ctx;
  ctx.training = false;
  ctx.seed = seed;
  ctx.loss_scale = 1.0 / static_cast<double>(test.size());
  double correct = 0, loss = 0;
  for (size_t start = lo; start < hi; start += chunk) {
    const int n = static_cast<int>(std::min<size_t>(chunk, hi - start));
    for (int i = 0; i < n; ++i) idx[i] = static_cast<uint32_t>(start + i);
    gather_images(test, idx.data(), exec.input_slice(n), images);
    gather_labels(test, idx.data(), exec.loss_slice(n), labels);
    loss += exec.forward(n, images.data(), labels.data(), ctx);
    const Slice ls = exec.logits_slice(n);
    if (ls.count == 0) continue;
    correct += count_correct(m.activation(m.logits_layer()).data(), ls.count, k, test.labels.data() + start + ls.offset);
  }
  EvalPoint p;
  p.accuracy = sum_over_world(correct) / static_cast<double>(test.size());
  p.loss = sum_over_world(loss);
  return p;
}

TrainResult start_result(const JobConfig& job) {
  TrainResult r;
  r.job = job.name;
  r.ranks = world().size;
  r.threads = configure_threads(job.threads);
  r.batch_size = job.batch_size;
  r.strategy = job.sync.strategy;
  r.target_accuracy = job.target_accuracy;
  return r;
}

bool record_evaluation(TrainResult& r, const JobConfig& job, const EvalPoint& p, const char* unit,
                       double eval_seconds, double wall_seconds, bool chatty) {
  if (!std::isfinite(p.loss))
    throw Error(fmt::format("{}: the test loss became {} at {} {} (epoch {:.2f}): the model diverged; lower "
                            "[optimizer] lr or weight_decay",
                            job.file, p.loss, unit, p.step, p.epoch));
  r.evals.push_back(p);
  r.test_accuracy = p.accuracy;
  run_log().evaluation(wall_seconds, p.step, p.epoch, p.accuracy, p.loss);
  r.eval_seconds += eval_seconds;
  if (chatty)
    fmt::print("eval @ {} {} (epoch {:.2f}): test accuracy {:.4f}, test loss {:.4f}\n", unit, p.step, p.epoch,
               p.accuracy, p.loss);
  std::fflush(stdout);
  if (!(job.target_accuracy > 0 && std::isnan(r.time_to_target_seconds) && p.accuracy >= job.target_accuracy))
    return false;
  r.time_to_target_seconds = r.train_seconds;
  r.wall_to_target_seconds = wall_seconds;
  r.epochs_to_target = p.epoch;
  if (chatty)
    fmt::print("target accuracy {} reached after {:.1f} training seconds, {:.2f} epochs\n", job.target_accuracy,
               r.train_seconds, p.epoch);
  std::fflush(stdout);
  return job.stop_at_target;
}

std::string run_history(const TrainResult& r, double wall_seconds) {
  auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json evals = nlohmann::json::array();
  for (const EvalPoint& p : r.evals) evals.push_back({p.step, p.epoch, p.accuracy, p.loss});
  return nlohmann::json{{"evaluations", evals},
                        {"train_seconds", r.train_seconds},
                        {"eval_seconds", r.eval_seconds},
                        {"wall_seconds", wall_seconds},
                        {"time_to_target_seconds", number(r.time_to_target_seconds)},
                        {"epochs_to_target", number(r.epochs_to_target)},
                        {"wall_to_target_seconds", number(r.wall_to_target_seconds)}}
      .dump();
}

void restore_run_history(TrainResult& r, const std::string& history) {
  if (history.empty()) return;
  const nlohmann::json h = nlohmann::json::parse(history);
  auto number = [&](const char* key) { return h[key].is_null() ? NAN : h[key].get<double>(); };
  for (const auto& e : h["evaluations"])
    r.evals.push_back({e[0].get<int64_t>(), e[1].get<double>(), e[2].get<double>(), e[3].get<double>()});
  if (!r.evals.empty()) r.test_accuracy = r.evals.back().accuracy;
  r.train_seconds = r.earlier_train_seconds = h["train_seconds"].get<double>();
  r.eval_seconds = h["eval_seconds"].get<double>();
  r.earlier_wall_seconds = h["wall_seconds"].get<double>();
  r.time_to_target_seconds = number("time_to_target_seconds");
  r.epochs_to_target = number("epochs_to_target");
  r.wall_to_target_seconds = number("wall_to_target_seconds");
}

nlohmann::json metrics_json(const TrainResult& r) {
  auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json per_rank = nlohmann::json::array();
  for (size_t k = 0; k < r.per_rank.size(); ++k)
    per_rank.push_back({{"rank", k},
                        {"compute_seconds", r.per_rank[k].compute},
                        {"transfer_seconds", r.per_rank[k].transfer},
                        {"allreduce_seconds", r.per_rank[k].allreduce},
                        {"idle_seconds", r.per_rank[k].idle},
                        {"peak_resident_bytes", r.per_rank[k].peak_resident_bytes}});
  nlohmann::json per_layer = nlohmann::json::array();
  for (const auto& l : r.per_layer)
    per_layer.push_back({{"layer", l.name},
                         {"ranks", l.ranks},
                         {"transfer_seconds_per_step", l.transfer},
                         {"allreduce_seconds_per_step", l.allreduce}});
  nlohmann::json evals = nlohmann::json::array();
  for (const EvalPoint& p : r.evals)
    evals.push_back({{"step", p.step}, {"epoch", p.epoch}, {"test_accuracy", p.accuracy}, {"test_loss", p.loss}});
  int most_per_node = 0;
  nlohmann::json hosts = nlohmann::json::array();
  for (const auto& [host, ranks] : r.hosts) {
    hosts.push_back({{"host", host}, {"ranks", ranks}});
    most_per_node = std::max(most_per_node, ranks);
  }
  const nlohmann::json run = {{"burstpool", version_info()},   {"command_line", world().command_line},
                              {"hosts", hosts},                {"ranks", r.ranks},
                              {"ranks_per_node", most_per_node}, {"threads_per_rank", r.threads},
                              {"device", r.device},            {"job_id", world().job_id}};
  nlohmann::json out = {{"job", r.job},
          {"run", run},
          {"model", r.model},
          {"ranks", r.ranks},
          {"threads_per_rank", r.threads},
          {"batch_size", r.batch_size},
          {"steps", r.steps},
          {"epochs", r.epochs},
          {"final_loss", number(r.final_loss)},
          {"test_accuracy", number(r.test_accuracy)},
          {"samples_per_second", r.samples_per_second},
          {"train_seconds", r.train_seconds},
          {"eval_seconds", r.eval_seconds},
          {"wall_seconds", r.wall_seconds},
          {"forward_gflop_per_sample", r.forward_gflop_per_sample},
          {"achieved_gflops", r.achieved_gflops},
          {"evaluations", evals},
          {"per_rank", per_rank},
          {"per_layer", per_layer}};
  out["strategy"] = r.strategy;
  out["learners_per_rank"] = r.learners;
  nlohmann::json tuning = nlohmann::json::array();
  for (const auto& t : r.tuning) tuning.push_back({{"learners", t.learners}, {"samples_per_second", t.samples_per_second}});
  out["learner_tuning"] = tuning;
  for (const auto& [key, value] : r.strategy_counts) out[key] = value;
  out["target_accuracy"] = r.target_accuracy;
  out["time_to_target_seconds"] = number(r.time_to_target_seconds);
  out["epochs_to_target"] = number(r.epochs_to_target);
  out["wall_to_target_seconds"] = number(r.wall_to_target_seconds);
  out["stopped_by"] = r.stopped_by.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.stopped_by);
  if (!r.plan_file.empty()) {
    out["plan_file"] = r.plan_file;
    out["predicted_step_seconds"] = r.predicted_step_seconds;
    out["measured_step_seconds"] = r.measured_step_seconds();
  }
  if (r.multiplex) {
    const MultiplexResult& m = *r.multiplex;
    const BackgroundReport& b = m.background;
    out["foreground_samples_per_second"] = m.foreground_shared_samples_per_second;
    out["background_samples_per_second"] = b.shared_samples_per_second;
    out["foreground_slowdown"] = m.foreground_slowdown;
    out["cluster_throughput_vs_data_parallel"] = m.cluster_throughput_vs_data_parallel;
    out["cluster_throughput_vs_own_plan"] = m.cluster_throughput_vs_own_plan;
    out["background"] = {{"job", b.job},
                         {"model", b.model},
                         {"priority", b.priority},
                         {"failed_ranks", m.failed_ranks},
                         {"error_on_rank_0", b.error},
                         {"steps", b.steps},
                         {"shared_steps", b.shared_steps},
                         {"first_loss", number(b.first_loss)},
                         {"last_loss", number(b.last_loss)},
                         {"alone_samples_per_second", b.alone_samples_per_second},
                         {"shared_samples_per_second", b.shared_samples_per_second},
                         {"gate_wait_seconds", b.gate_wait_seconds},
                         {"shared_compute_seconds", b.shared_times.compute},
                         {"shared_allreduce_seconds", b.shared_times.allreduce},
                         {"calibrate_steps", m.calibrate_steps},
                         {"foreground_alone_samples_per_second", m.foreground_alone_samples_per_second},
                         {"foreground_shared_samples_per_second", m.foreground_shared_samples_per_second},
                         {"foreground_data_parallel_samples_per_second", m.foreground_data_parallel_samples_per_second},
                         {"data_parallel_reference", m.data_parallel_reference}};
  }
  return out;
}

}  // namespace burstpool
