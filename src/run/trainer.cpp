#include "burstpool/trainer.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>

#include <mpi.h>

#include "burstpool/checkpoint.hpp"
#include "burstpool/executor.hpp"
#include "burstpool/error.hpp"
#include "burstpool/memory.hpp"
#include "burstpool/model.hpp"
#include "burstpool/model_io.hpp"
#include "burstpool/run_log.hpp"
#include "burstpool/runtime.hpp"
#include "burstpool/session.hpp"
#include "burstpool/version.hpp"
#include "comm/progress.hpp"

namespace burstpool {

std::string eta(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "?";
  int s = static_cast<int>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}h{:02}m", s / 3600, s / 60 % 60) : fmt::format("{}m{:02}s", s / 60, s % 60);
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
  return Resumed{choice[1], choice[0] == 0 ? path : path + ".prev", {}};
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
  set_progress_interval_us(job.progress_us);
  if (!job.trace_path.empty() && job.sync.strategy != "ssgd")
    throw Error(fmt::format("--trace: timelines cover data-parallel and burst runs ([sync] strategy = ssgd), not {}",
                            job.sync.strategy));
  return job.sync.strategy == "ssgd" ? train_plan(job) : train_small_batch(job);
}

EvalPoint evaluate_test_set(Executor& exec, const Dataset& test, size_t lo, size_t hi, const Context& base) {
  Model& m = exec.model();
  const int k = m.classes(), chunk = exec.plan().global_batch;
  std::vector<uint32_t> idx(chunk);
  std::vector<float> images;
  std::vector<int32_t> labels;
  Context ctx = base;
  ctx.training = false;
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

void gather_rank_times(TrainResult& r, RankTimes mine, double run_seconds) {
  mine.idle = std::max(0.0, run_seconds - mine.compute - mine.transfer - mine.allreduce);
  mine.peak_resident_bytes = static_cast<double>(peak_resident_bytes());
  mine.train = run_seconds;
  constexpr int kFields = 7;
  const double fields[kFields] = {mine.compute,         mine.transfer,        mine.allreduce, mine.idle,
                                  mine.peak_resident_bytes, mine.background_sync, mine.train};
  const int size = world().size;
  std::vector<double> all(static_cast<size_t>(kFields) * size);
  BP_MPI_CHECK(MPI_Gather(fields, kFields, MPI_DOUBLE, all.data(), kFields, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  r.per_rank.clear();
  for (int k = 0; k < size; ++k) {
    const double* f = &all[static_cast<size_t>(kFields) * k];
    r.per_rank.push_back({f[0], f[1], f[2], f[3], f[4], f[5], f[6]});
  }
}

namespace {

nlohmann::json finite_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

nlohmann::json per_rank_json(const TrainResult& r) {
  nlohmann::json per_rank = nlohmann::json::array();
  for (size_t k = 0; k < r.per_rank.size(); ++k)
    per_rank.push_back({{"rank", k},
                        {"compute_seconds", r.per_rank[k].compute},
                        {"transfer_seconds", r.per_rank[k].transfer},
                        {"allreduce_seconds", r.per_rank[k].allreduce},
                        {"idle_seconds", r.per_rank[k].idle},
                        {"background_sync_seconds", r.per_rank[k].background_sync},
                        {"train_seconds", r.per_rank[k].train},
                        {"peak_resident_bytes", r.per_rank[k].peak_resident_bytes}});
  return per_rank;
}

nlohmann::json per_layer_json(const TrainResult& r) {
  nlohmann::json per_layer = nlohmann::json::array();
  for (const auto& l : r.per_layer)
    per_layer.push_back({{"layer", l.name},
                         {"ranks", l.ranks},
                         {"transfer_seconds_per_step", l.transfer},
                         {"allreduce_seconds_per_step", l.allreduce}});
  return per_layer;
}

nlohmann::json evaluations_json(const TrainResult& r) {
  nlohmann::json evals = nlohmann::json::array();
  for (const EvalPoint& p : r.evals)
    evals.push_back({{"step", p.step}, {"epoch", p.epoch}, {"test_accuracy", p.accuracy}, {"test_loss", p.loss}});
  return evals;
}

// Where and how the run ran: build, command line, hosts, ranks, device.
nlohmann::json run_json(const TrainResult& r) {
  int most_per_node = 0;
  nlohmann::json hosts = nlohmann::json::array();
  for (const auto& [host, ranks] : r.hosts) {
    hosts.push_back({{"host", host}, {"ranks", ranks}});
    most_per_node = std::max(most_per_node, ranks);
  }
  return {{"burstpool", version_info()},   {"command_line", world().command_line},
          {"hosts", hosts},                {"ranks", r.ranks},
          {"ranks_per_node", most_per_node}, {"threads_per_rank", r.threads},
          {"device", r.device},            {"job_id", world().job_id}};
}

// The learners' keys: strategy, learner count and its tuning, the strategy's own counts.
void add_learner_keys(const TrainResult& r, nlohmann::json& out) {
  out["strategy"] = r.strategy;
  out["learners_per_rank"] = r.learners;
  nlohmann::json tuning = nlohmann::json::array();
  for (const auto& t : r.tuning) tuning.push_back({{"learners", t.learners}, {"samples_per_second", t.samples_per_second}});
  out["learner_tuning"] = tuning;
  for (const auto& [key, value] : r.strategy_counts) out[key] = value;
}

// With a background job: both jobs' rates and the cluster-throughput figures.
void add_multiplex_keys(const MultiplexResult& m, nlohmann::json& out) {
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
                       {"first_loss", finite_or_null(b.first_loss)},
                       {"last_loss", finite_or_null(b.last_loss)},
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

}  // namespace

nlohmann::json metrics_json(const TrainResult& r) {
  nlohmann::json out = {{"job", r.job},
                        {"run", run_json(r)},
                        {"model", r.model},
                        {"ranks", r.ranks},
                        {"threads_per_rank", r.threads},
                        {"batch_size", r.batch_size},
                        {"steps", r.steps},
                        {"epochs", r.epochs},
                        {"final_loss", finite_or_null(r.final_loss)},
                        {"test_accuracy", finite_or_null(r.test_accuracy)},
                        {"samples_per_second", r.samples_per_second},
                        {"median_step_seconds", r.median_step_seconds},
                        {"train_seconds", r.train_seconds},
                        {"eval_seconds", r.eval_seconds},
                        {"wall_seconds", r.wall_seconds},
                        {"forward_gflop_per_sample", r.forward_gflop_per_sample},
                        {"achieved_gflops", r.achieved_gflops},
                        {"evaluations", evaluations_json(r)},
                        {"per_rank", per_rank_json(r)},
                        {"per_layer", per_layer_json(r)}};
  add_learner_keys(r, out);
  out["target_accuracy"] = r.target_accuracy;
  out["time_to_target_seconds"] = finite_or_null(r.time_to_target_seconds);
  out["epochs_to_target"] = finite_or_null(r.epochs_to_target);
  out["wall_to_target_seconds"] = finite_or_null(r.wall_to_target_seconds);
  out["stopped_by"] = r.stopped_by.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.stopped_by);
  if (!r.plan_file.empty()) {
    out["plan_file"] = r.plan_file;
    out["predicted_step_seconds"] = r.predicted_step_seconds;
    out["predicted_data_parallel_step_seconds"] = r.predicted_data_parallel_step_seconds;
    out["measured_step_seconds"] = r.measured_step_seconds();
  }
  if (r.multiplex) add_multiplex_keys(*r.multiplex, out);
  return out;
}

}  // namespace burstpool
