#include "multiplex/multiplex.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "comm/wait.hpp"
#include "burstpool/cluster_throughput.hpp"
#include "burstpool/device.hpp"
#include "burstpool/error.hpp"
#include "burstpool/outputs.hpp"
#include "burstpool/runtime.hpp"
#include "burstpool/session.hpp"

namespace burstpool {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

double data_parallel_step_seconds(const JobConfig& foreground, const ModelSpec& spec, int steps) {
  JobConfig job = foreground;
  job.plan_path.clear();
  job.background = {};
  MPI_Comm comm = MPI_COMM_NULL;
  BP_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  double seconds = 0;
  {
    TrainingSession session(job, spec, data_parallel_plan_within(spec, world().size, job.batch_size), comm);
    use_job_device(job, session.exec());
    const int64_t n = std::min<int64_t>(steps, session.total_steps());
    for (int64_t step = 0; step < n; ++step) {
      const auto t0 = Clock::now();
      session.forward(step);
      session.update(step);
      if (step > 0) seconds += seconds_since(t0);  // the first step pays for first-touch allocation
    }
    if (n > 1) seconds /= static_cast<double>(n - 1);
  }
  BP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  MPI_Comm_free(&comm);
  return seconds;
}

Multiplexer::Multiplexer(const JobConfig& foreground, Executor& exec)
    : fg_(foreground), exec_(exec), gate_(foreground.background.max_slowdown, foreground.background.pause_in_allreduce) {
  JobConfig bg = load_job(fg_.background.job_path);
  if (bg.sync.strategy != "ssgd")
    throw Error(fmt::format("{}: [sync] strategy: a background job trains with ssgd (data parallel), not {}", bg.file,
                            bg.sync.strategy));
  bg.resume = fg_.resume;  // --resume continues both jobs
  bg.checkpoint_path = expand_output_path(bg.checkpoint_path, bg.name);
  if (world().rank == 0)  // distinct from the foreground's, writable; rank 0 writes both
    check_outputs({{"[output] checkpoint", fg_.checkpoint_path}, {"[output] metrics", fg_.metrics_path},
                   {bg.file + ": [output] checkpoint", bg.checkpoint_path}});
  const char* yield = std::getenv("OMPI_MCA_mpi_yield_when_idle");
  if (world().rank == 0 && yield && std::string(yield) == "1")
    fmt::print(stderr,
               "burstpool: warning: OMPI_MCA_mpi_yield_when_idle=1 makes every MPI poll of the foreground hand its core "
               "to the background job; unset it (waits sleep on their own while a background job runs)\n");
  if (!fg_.plan_path.empty()) dp_step_seconds_ = data_parallel_step_seconds(fg_, exec_.model().spec(), fg_.background.calibrate_steps);
  if (bg.device != "cpu") {  // its thread launches the device's work: it needs a core of its own
    int cores = usable_cores();
    BP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &cores, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    const std::string warning = binding_warning(cores);
    if (world().rank == 0 && !warning.empty()) fmt::print(stderr, "{}\n", warning);
  }
  if (bg.device == "cuda" || fg_.device == "cuda") {  // once per node: its first rank
    const std::string sharing = gpu_sharing_warning(world().local_size, cuda_device_count(), world().host);
    if (world().local_rank == 0 && !sharing.empty()) fmt::print(stderr, "{}\n", sharing);
  }
  bg_ = std::make_unique<BackgroundJob>(bg, MPI_COMM_WORLD, gate_, fg_.background);
  bg_->calibrate(fg_.background.calibrate_steps);
  exec_.set_reduce_flag(&gate_.in_allreduce());
  if (world().rank == 0 && dp_step_seconds_ > 0)
    fmt::print("background: the foreground's model trained data parallel, alone: {:.0f} samples/s (the reference of "
               "cluster_throughput_vs_data_parallel)\n",
               fg_.batch_size / dp_step_seconds_);
  if (world().rank == 0)
    fmt::print("background: job '{}' ({}), {:.0f} samples/s alone; the foreground runs {} steps alone, then both\n",
               bg.name, bg.model_path,
               bg.batch_size * (fg_.background.sync == "none" ? world().size : 1) /
                   std::max(1e-9, bg_->seconds_per_step_alone()),
               fg_.background.calibrate_steps);
}

Multiplexer::~Multiplexer() {
  if (bg_) bg_->stop(0);
  set_wait_policy({});
  exec_.set_reduce_flag(nullptr);
}

void Multiplexer::step_finished(double seconds) {
  gate_.step_finished(seconds);
  if (started_) {
    // Sleeping in waits only pays while the background may use the time;
    // with the gate shut the foreground spins as it would alone.
    const bool polite = bg_->running() && gate_.open();
    if (polite != wait_policy().polite) set_wait_policy(polite_waits(polite));
    if (!bg_->running()) return;  // it finished (or failed): no longer shared
    shared_seconds_ += seconds;
    ++shared_steps_;
    return;
  }
  alone_.push_back(seconds);
  if (static_cast<int>(alone_.size()) < fg_.background.calibrate_steps) return;
  gate_.set_baseline(alone_mean());
  set_wait_policy(polite_waits(true));
  bg_->start();
  started_ = true;
}

// The first step pays for first-touch allocation and is not counted; 0 until
// there is a step after it.
double Multiplexer::alone_mean() const {
  if (alone_.size() < 2) return 0;
  return std::accumulate(alone_.begin() + 1, alone_.end(), 0.0) / static_cast<double>(alone_.size() - 1);
}

WaitPolicy Multiplexer::polite_waits(bool on) const {
  const BackgroundConfig& c = fg_.background;
  return {on, c.wait_spin_us, c.wait_sleep_us, c.wait_backoff, c.wait_predict, c.wait_max_sleep_us, c.wait_predict_min_us};
}

std::string Multiplexer::progress() const {
  if (!started_) return "";
  return fmt::format(" | bg {:.0f} samples/s, loss {:.4f}", bg_->shared_rate(), bg_->last_loss());
}

MultiplexResult Multiplexer::finish() {
  MultiplexResult r;
  r.calibrate_steps = fg_.background.calibrate_steps;
  // Generous: a healthy background stops within one of its steps.
  const double grace = std::max(5.0, 20.0 * bg_->seconds_per_step_alone());
  r.background = bg_->stop(grace);
  set_wait_policy({});
  if (fg_.background.sync == "none") {  // replicas of their own: the job's rate is the ranks' together
    double rates[2] = {r.background.alone_samples_per_second, r.background.shared_samples_per_second};
    BP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, rates, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    r.background.alone_samples_per_second = rates[0];
    r.background.shared_samples_per_second = rates[1];
  }
  int failed = r.background.failed ? 1 : 0;
  BP_MPI_CHECK(MPI_Allreduce(&failed, &r.failed_ranks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  // Rates from the mean step time, slowest rank (steps are synchronous, so
  // the ranks differ little).
  double means[2] = {alone_mean(), shared_steps_ > 0 ? shared_seconds_ / shared_steps_ : 0};
  BP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, means, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  const double batch = fg_.batch_size;
  r.foreground_alone_samples_per_second = means[0] > 0 ? batch / means[0] : 0;
  r.foreground_shared_samples_per_second = means[1] > 0 ? batch / means[1] : 0;
  if (r.foreground_shared_samples_per_second > 0 && r.foreground_alone_samples_per_second > 0)
    r.foreground_slowdown = r.foreground_alone_samples_per_second / r.foreground_shared_samples_per_second;
  const double fg_shared = r.foreground_shared_samples_per_second, bg_alone = r.background.alone_samples_per_second;
  if (fg_.plan_path.empty()) {
    r.foreground_data_parallel_samples_per_second = r.foreground_alone_samples_per_second;
    r.data_parallel_reference = "the foreground is data parallel: its own steps alone";
  } else {
    r.foreground_data_parallel_samples_per_second = dp_step_seconds_ > 0 ? batch / dp_step_seconds_ : 0;
    r.data_parallel_reference =
        fmt::format("measured before the run: {} data-parallel steps of the foreground's model and batch, alone",
                    fg_.background.calibrate_steps);
  }
  r.cluster_throughput_vs_own_plan =
      cluster_throughput(fg_shared, r.foreground_alone_samples_per_second, r.background.shared_samples_per_second, bg_alone);
  r.cluster_throughput_vs_data_parallel = cluster_throughput(fg_shared, r.foreground_data_parallel_samples_per_second,
                                                             r.background.shared_samples_per_second, bg_alone);
  if (r.background.failed)
    // A failed or abandoned background may leave reductions pending in MPI
    // that still write into its buffers; they must outlive them, so the job
    // is left to the end of the process instead of being freed.
    (void)bg_.release();
  else
    bg_.reset();
  return r;
}

}  // namespace burstpool
