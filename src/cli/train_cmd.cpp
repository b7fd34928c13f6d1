// burstpool train JOB.ini [--steps N] [--epochs E] [--batch-size B] [--seed S]
//                         [--metrics FILE] [--checkpoint FILE] [--set section.key=value ...]
//                         [--trace FILE.json [--trace-steps A:B]]
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <tuple>

#include "burstpool/job.hpp"
#include "burstpool/json_io.hpp"
#include "burstpool/outputs.hpp"
#include "burstpool/error.hpp"
#include "burstpool/run_log.hpp"
#include "burstpool/runtime.hpp"
#include "burstpool/session.hpp"
#include "burstpool/stop.hpp"
#include "burstpool/trainer.hpp"
#include "commands.hpp"

namespace burstpool::cli {

namespace {
// Command-line paths are relative to the working folder; job-file paths to the job's folder.
std::string absolute(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char cwd[4096];
  return getcwd(cwd, sizeof cwd) ? std::string(cwd) + "/" + path : path;
}

// Counts and seeds: checked as the job file's numbers are, so one line names
// the flag and the range ("--steps: Value -1 not in range [1 - 2147483647]").
const CLI::Range kPositive(1LL, 2147483647LL);
const CLI::Range kNonNegative(0LL, 2147483647LL);

// --trace-steps A:B (either side may be empty: from 0, to the end) as [A, B); B = -1: to the end.
std::pair<int64_t, int64_t> trace_steps(const std::string& text) {
  const size_t colon = text.find(':');
  auto number = [&](const std::string& part, int64_t empty) -> int64_t {
    if (part.empty()) return empty;
    if (part.find_first_not_of("0123456789") != std::string::npos || part.size() > 12)
      throw Error(fmt::format("--trace-steps {}: '{}' is not a step number (A:B, steps A to B-1)", text, part));
    return std::stoll(part);
  };
  if (colon == std::string::npos)
    throw Error(fmt::format("--trace-steps {}: expected A:B (steps A to B-1; either may be left out)", text));
  const int64_t first = number(text.substr(0, colon), 0), end = number(text.substr(colon + 1), -1);
  if (end >= 0 && end <= first)
    throw Error(fmt::format("--trace-steps {}: the window is empty (B must be above A)", text));
  return {first, end};
}

struct TrainArgs {
  std::string job;
  long long steps = -1, epochs = -1, batch = -1, seed = -1;
  std::string metrics, checkpoint, plan, trace, trace_steps = "0:";
  std::vector<std::string> sets;
  bool resume = false;
};

// The job file with the command line's flags applied, as --set overrides.
JobConfig job_of(const TrainArgs& args) {
  std::vector<std::string> overrides;
  auto flag = [&](long long v, const char* key) {
    if (v >= 0) overrides.push_back(fmt::format("{}={}", key, v));
  };
  flag(args.steps, "train.steps");
  flag(args.epochs, "train.epochs");
  flag(args.batch, "train.batch_size");
  flag(args.seed, "job.seed");
  if (!args.metrics.empty()) overrides.push_back("output.metrics=" + args.metrics);
  if (!args.checkpoint.empty()) overrides.push_back("output.checkpoint=" + args.checkpoint);
  if (!args.plan.empty())
    overrides.push_back("parallel.plan=" + (args.plan == "auto" ? args.plan : absolute(args.plan)));
  overrides.insert(overrides.end(), args.sets.begin(), args.sets.end());
  JobConfig job = load_job(args.job, overrides);
  job.resume = args.resume;
  job.trace_path = absolute(args.trace);
  std::tie(job.trace_first, job.trace_end) = trace_steps(args.trace_steps);
  job.metrics_path = expand_output_path(job.metrics_path, job.name);
  job.checkpoint_path = expand_output_path(job.checkpoint_path, job.name);
  job.log_path = expand_output_path(job.log_path, job.name);
  return job;
}

// Rank 0 writes every output; an error here ends every rank.
void prepare_outputs(const JobConfig& job) {
  if (world().rank == 0)
    for (const std::string& stale : check_outputs({{"[output] metrics", job.metrics_path},
                                                   {"[output] checkpoint", job.checkpoint_path},
                                                   {"[output] log", job.log_path},
                                                   {"--trace", job.trace_path},
                                                   {"[job] cudnn_cache", cudnn_cache_file(job)}}))
      fmt::print("removed {}, left by a writer that died\n", stale);
  run_log().open(job.log_path);
}

void write_metrics(const JobConfig& job, const TrainResult& result) {
  if (job.metrics_path.empty() || world().rank != 0) return;
  const nlohmann::json metrics = metrics_json(result);
  const std::string where = write_with_fallback(job.metrics_path, [&](const std::string& p) { write_json(p, metrics); });
  if (where != job.metrics_path)
    fmt::print(stderr, "burstpool: warning: could not write the metrics to {}; they are in {}\n", job.metrics_path,
               where);
}

// Rank 0's closing lines: the run, the plan's prediction, the multiplexing figures.
void print_summary(const TrainResult& result) {
  if (world().rank != 0) return;
  fmt::print("done: {} steps in {:.1f} s, {:.1f} samples/s, final loss {:.4f}, test accuracy {}\n", result.steps,
             result.wall_seconds, result.samples_per_second, result.final_loss,
             std::isfinite(result.test_accuracy) ? fmt::format("{:.4f}", result.test_accuracy) : "n/a");
  if (!result.plan_file.empty())
    fmt::print("plan auto: predicted step {:.2f} ms, measured {:.2f} ms ({})\n", 1e3 * result.predicted_step_seconds,
               1e3 * result.measured_step_seconds(), result.plan_file);
  if (result.multiplex) {
    const MultiplexResult& m = *result.multiplex;
    fmt::print("multiplexing: cluster throughput {:.3f} against data parallel alone ({:.3f} against the "
               "foreground's own plan alone); foreground slowdown {:.3f}, background {:.0f} of {:.0f} "
               "samples/s alone\n",
               m.cluster_throughput_vs_data_parallel, m.cluster_throughput_vs_own_plan, m.foreground_slowdown,
               m.background.shared_samples_per_second, m.background.alone_samples_per_second);
  }
}

// A run stopped by a signal or the time limit: say how to go on, and exit
// with the status that says so.
void report_stop(const JobConfig& job, const TrainResult& result) {
  if (result.stopped_by.empty()) return;
  if (world().rank == 0)
    fmt::print("stopped early by {} after {} steps{}; run again with --resume to continue\n", result.stopped_by,
               result.steps,
               job.checkpoint_path.empty() ? " (no checkpoint path: the progress is lost)"
                                           : ", checkpoint " + job.checkpoint_path);
  std::fflush(stdout);
  // Every rank leaves only after rank 0 wrote: a launcher that kills the job
  // at the first non-zero exit must not cut it short.
  BP_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  exit_status = kStoppedExitStatus;
}

}  // namespace

Command add_train(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* sub = app.add_subcommand("train", "Train the job a job file describes");
  sub->add_option("job", args->job, "Job file (INI)")->required();
  sub->add_option("--steps", args->steps, "Training steps (overrides [train] steps)")->check(kPositive);
  sub->add_option("--epochs", args->epochs, "Epochs (overrides [train] epochs)")->check(kPositive);
  sub->add_option("--batch-size", args->batch,
                  "Global batch (overrides [train] batch_size); the learners of sma, shadow and local-sgd take "
                  "[train] learner_batch_size each (--set train.learner_batch_size=B)")
      ->check(kPositive);
  sub->add_option("--seed", args->seed, "Seed (overrides [job] seed)")->check(kNonNegative);
  sub->add_option("--metrics", args->metrics, "Write metrics JSON here (overrides [output] metrics)");
  sub->add_option("--checkpoint", args->checkpoint, "Write an HDF5 checkpoint here (overrides [output] checkpoint)");
  sub->add_option("--plan", args->plan,
                  "Plan file (JSON) with each layer's ranks, or auto: planned at start-up from cached profiles "
                  "(overrides [parallel] plan)");
  sub->add_flag("--resume", args->resume, "Continue from the newest valid checkpoint at the checkpoint path");
  sub->add_option("--set", args->sets, "Override any job key: section.key=value (repeatable)");
  sub->add_option("--trace", args->trace,
                  "Write a per-rank timeline (Chrome/Perfetto trace-event JSON): layers, transfers, gradient sums, "
                  "idle time, evaluations, checkpoints, the background job (docs/parallel.md)");
  sub->add_option("--trace-steps", args->trace_steps, "Steps to trace, A:B for steps A to B-1 (default 0:, every step)");
  return {sub, [args] {
            const JobConfig job = job_of(*args);
            prepare_outputs(job);
            install_stop_handlers();
            TrainResult result = train(job);
            result.hosts = world_hosts();
            write_metrics(job, result);
            print_summary(result);
            report_stop(job, result);
          }};
}

}  // namespace burstpool::cli
