#include "burstpool/background.hpp"

#include <omp.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "comm/progress.hpp"
#include "comm/wait.hpp"
#include "burstpool/checkpoint.hpp"
#include "burstpool/error.hpp"
#include "burstpool/loop.hpp"
#include "burstpool/trace.hpp"
#include "burstpool/model_io.hpp"
#include "burstpool/session.hpp"
#include "burstpool/runtime.hpp"
#include "burstpool/trainer.hpp"

namespace burstpool {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

// The background's steps for the run loop, up to `until` steps (the loop
// runs them in pieces: calibration, then the thread): no progress lines or
// evaluations (the foreground reports it). Its agreement, on the
// background's communicator, overlaps its backward pass; the thread starts
// no other collective. A step whose agreement says stop (the foreground
// asked) drops its update.
class BackgroundJob::Steps final : public RunSteps {
 public:
  explicit Steps(BackgroundJob& b) : RunSteps(b.session_->job(), b.comm_, nullptr, "background training"), b_(b) {
    inject_failure_from_env(*this, "BURSTPOOL_TEST_BACKGROUND_FAIL");
  }
  void run_until(int64_t steps) {
    until_ = steps;
    if (run_loop(*this).stop) stopped_ = true;
  }
  bool stopped() const { return stopped_; }

  bool finished() const override { return stopped_ || b_.step_.load() >= std::min(until_, b_.session_->total_steps()); }
  int64_t steps_done() const override { return b_.step_.load(); }
  double step_begin() override {
    t0_ = Clock::now();
    return b_.session_->forward(b_.step_.load());
  }
  void step_middle() override { b_.session_->backward(); }
  void step_end(const Agreement& agreed, double) override {
    if (!agreed.stop) b_.apply_step(agreed.loss_sum, t0_);
  }
  int stop_wish() const override { return b_.stop_.load() ? kStopRequested : 0; }
  void checkpoint() override { b_.save_checkpoint(); }

 private:
  BackgroundJob& b_;
  int64_t until_ = 0;
  bool stopped_ = false;
  Clock::time_point t0_;
};

bool ForegroundGate::open() const {
  if (pause_in_allreduce_ && in_allreduce_.load(std::memory_order_relaxed)) return false;
  const double base = baseline_.load(std::memory_order_relaxed);
  return base <= 0 || recent_.load(std::memory_order_relaxed) <= max_slowdown_ * base;
}

std::string lower_thread_priority() {
  sched_param param{};
  param.sched_priority = 0;
  if (sched_setscheduler(0, SCHED_IDLE, &param) == 0) return "SCHED_IDLE";  // 0: the calling thread
  const std::string why = std::strerror(errno);
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(tid), 19) == 0) return "nice 19";
  return "normal (SCHED_IDLE refused: " + why + "; nice refused: " + std::strerror(errno) + ")";
}

bool idle_background_thread(const std::string& thread_priority, const std::string& device) {
  return thread_priority == "idle" || (thread_priority == "auto" && device == "cpu");
}

std::string binding_warning(int cores) {
  if (cores >= 2) return "";
  return fmt::format(
      "burstpool: warning: a rank may run on {} core only, and its background job's thread, which launches the "
      "device's work, then waits for the foreground's; give each rank 2 cores (srun --cpus-per-task=2; mpirun "
      "--map-by slot:PE=2, or --bind-to none; docs/multiplexing.md)",
      cores);
}

std::string gpu_sharing_warning(int ranks, int gpus, const std::string& host) {
  if (gpus < 1 || ranks <= gpus) return "";
  return fmt::format(
      "burstpool: warning: {} ranks share {} GPU{} on {}: a GPU time-slices separate processes, so a background "
      "job's least-priority streams cannot give way to another rank's foreground there; give each rank a GPU of "
      "its own, or run NVIDIA's Multi-Process Service (MPS), untried with burstpool (docs/multiplexing.md)",
      ranks, gpus, gpus == 1 ? "" : "s", host);
}

void require_thread_multiple() {
  int level = MPI_THREAD_SINGLE;
  BP_MPI_CHECK(MPI_Query_thread(&level));
  check_thread_level(level);
}

void check_thread_level(int level) {
  if (level < MPI_THREAD_MULTIPLE)
    throw Error(fmt::format("a background job needs MPI_THREAD_MULTIPLE ({}), but MPI was initialised at level {}",
                            MPI_THREAD_MULTIPLE, level));
}

BackgroundJob::BackgroundJob(const JobConfig& background, MPI_Comm world, ForegroundGate& gate,
                             const BackgroundConfig& how)
    : idle_thread_(idle_background_thread(how.thread_priority, background.device)), gate_(gate) {
  require_thread_multiple();
  if (!background.plan_path.empty())
    throw Error(fmt::format("{}: [parallel] plan: a background job trains data parallel; remove the plan",
                            background.file));
  if (!background.background.job_path.empty())
    throw Error(fmt::format("{}: [background] job: a background job cannot have a background job", background.file));
  const bool own_replica = how.sync == "none";
  int world_rank = 0;
  MPI_Comm_rank(world, &world_rank);
  writer_ = world_rank == 0;
  JobConfig job = background;
  if (own_replica) job.seed += static_cast<uint64_t>(world_rank);  // each replica its own start and data order
  BP_MPI_CHECK(MPI_Comm_dup(own_replica ? MPI_COMM_SELF : world, &comm_));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  int size = 1;
  MPI_Comm_size(comm_, &size);
  const ModelSpec spec = load_job_model(job);
  session_ = std::make_unique<TrainingSession>(job, spec, job_data_parallel_plan(job, spec, size), comm_);
  use_job_device(job, session_->exec(), true, how.pieces_in_flight);  // the least urgent streams; gradients by MPI
  // With replicas of their own, only rank 0's is checkpointed: it resumes,
  // the others start theirs again.
  if (job.resume && !job.checkpoint_path.empty() && (!own_replica || writer_))
    if (const std::optional<Resumed> from = resume_training(job, session_->model(), session_->sgd(), comm_)) {
      step_.store(from->step);
      saved_step_ = from->step;
      session_->exec().device().from_host(session_->sgd().velocity().data());
      if (writer_) fmt::print("background: resuming from the checkpoint of step {} ({})\n", from->step, from->file);
    }
  session_->exec().set_before_layer([this] {
    const auto t0 = Clock::now();
    while (!gate_.open() && !stop_.load() && !cancel_.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (cancel_.load()) throw WaitCancelled();
    report_.gate_wait_seconds += seconds_since(t0);
  });
  report_.job = job.name;
  report_.model = spec.name;
  steps_ = std::make_unique<Steps>(*this);
}

BackgroundJob::~BackgroundJob() {
  if (thread_.joinable()) stop(0);
  // A cancelled thread may leave requests pending on comm_; freeing it then is
  // not allowed, so it is left to MPI_Finalize.
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized && !cancel_.load()) MPI_Comm_free(&comm_);
}

void BackgroundJob::apply_step(double loss, Clock::time_point t0) {
  const int64_t step = step_.load();
  session_->apply(step);
  // Its gate pieces interleave with the foreground's layers: one event per step.
  tracer().span(Track::background, fmt::format("background step {}", step), t0, false);
  if (std::isnan(report_.first_loss)) report_.first_loss = loss;
  report_.last_loss = loss;
  last_loss_.store(loss);
  step_.store(step + 1);
}

// Data parallel: rank 0 holds every layer and writes alone, so the thread
// starts no collective for it (a peer's failure cannot hang it here).
void BackgroundJob::save_checkpoint() {
  const JobConfig& job = session_->job();
  if (job.checkpoint_path.empty() || !writer_) return;
  saved_step_ = step_.load();
  session_->exec().device().to_host(session_->sgd().velocity().data());
  write_checkpoint(job.checkpoint_path, session_->model(), session_->sgd(), {step_.load(), job.seed, {}});
}

void BackgroundJob::save_final_checkpoint() {
  // A failed step may have left its state half done; a checkpoint of this step may exist already.
  if (report_.failed || step_.load() == saved_step_) return;
  try {
    save_checkpoint();
  } catch (const Error& e) {
    fmt::print(stderr, "burstpool: warning: background job '{}': {}; the foreground goes on\n", report_.job, e.what());
  }
}

void BackgroundJob::calibrate(int steps) {
  try {
    calibrate_steps(steps);
  } catch (const Diverged& e) {  // every rank agreed on it: safe to go on without the background
    report_.failed = true;
    report_.error = e.what();
    fmt::print(stderr, "burstpool: warning: background job '{}' failed on rank {} ({}): {}; the foreground goes on\n",
               report_.job, world().rank, world().host, e.what());
  }
}

void BackgroundJob::calibrate_steps(int steps) {
  // The first step pays for first-touch allocation and is not timed.
  if (steps < 2) return;
  steps_->run_until(step_.load() + 1);
  if (steps_->stopped() || step_.load() >= session_->total_steps()) return;
  const int64_t first = step_.load();
  const auto t0 = Clock::now();
  steps_->run_until(first + steps - 1);
  const int64_t done = step_.load() - first;
  if (done > 0) alone_step_seconds_ = seconds_since(t0) / static_cast<double>(done);
  report_.alone_samples_per_second =
      alone_step_seconds_ > 0 ? session_->job().batch_size / alone_step_seconds_ : 0;
}

void BackgroundJob::start() {
  if (report_.failed || step_.load() >= session_->total_steps()) return;
  session_->exec().times() = {};  // from here on: the shared phase
  shared_start_ = Clock::now();
  shared_first_step_ = step_.load();
  thread_ = std::thread([this] { run_thread(); });
}

void BackgroundJob::run_thread() {
  report_.priority = idle_thread_ ? lower_thread_priority() : "normal ([background] thread_priority)";
  omp_set_num_threads(1);  // this thread's OpenMP teams only; the foreground keeps its own
  set_wait_cancel_flag(&cancel_);
  use_progress_helper_on_this_thread(false);
  try {
    steps_->run_until(session_->total_steps());
  } catch (const WaitCancelled&) {
    report_.failed = true;
    report_.error = "stopped waiting for the background job on the other ranks (did it fail there?)";
  } catch (const std::exception& e) {
    report_.failed = true;
    report_.error = e.what();
  }
  if (report_.failed)
    fmt::print(stderr, "burstpool: warning: background job '{}' failed on rank {} ({}): {}; the foreground goes on\n",
               report_.job, world().rank, world().host, report_.error);
  set_wait_cancel_flag(nullptr);
  report_.shared_samples_per_second = shared_rate();
  std::lock_guard<std::mutex> lock(mutex_);
  done_.store(true);
  finished_.notify_all();
}

double BackgroundJob::shared_rate() const {
  const double t = seconds_since(shared_start_);
  return t > 0 ? static_cast<double>(step_.load() - shared_first_step_) * session_->job().batch_size / t : 0;
}

BackgroundReport BackgroundJob::stop(double grace_seconds) {
  if (!thread_.joinable()) {
    report_.steps = step_.load();
    save_final_checkpoint();
    return report_;
  }
  stop_.store(true);
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!finished_.wait_for(lock, std::chrono::duration<double>(grace_seconds), [this] { return done_.load(); })) {
      cancel_.store(true);  // a peer is gone: leave its collectives
      finished_.wait(lock, [this] { return done_.load(); });
    }
  }
  thread_.join();
  report_.steps = step_.load();
  report_.shared_times = session_->exec().times();
  report_.shared_steps = step_.load() - shared_first_step_;
  save_final_checkpoint();
  return report_;
}

}  // namespace burstpool
