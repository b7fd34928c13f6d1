#pragma once
// Multiplexing: a background training job on the same ranks as the
// foreground, data parallel, in its own thread, on its own duplicate of the
// world communicator (so it never shares tags, requests or collective order
// with the foreground), at idle priority.
//
// Protocol (every rank does the same, in the same order):
//   1. the constructor (collective) builds the job and its communicator;
//   2. calibrate(k) runs k background steps on the calling thread, alone:
//      the background's throughput alone;
//   3. the foreground runs its first steps alone (its baseline step time,
//      which opens the gate), then start() launches the thread;
//   4. stop() ends it. Background ranks agree on stopping (and on a
//      non-finite loss) in one small allreduce per step, so they stop after
//      the same step. A background failure is reported and never stops the
//      foreground: a rank whose peer died stops waiting when stop() gives up.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "burstpool/error.hpp"
#include "burstpool/job.hpp"
#include "burstpool/session.hpp"

namespace burstpool {

// The foreground's side of the gate. The background starts a piece (one
// layer's forward or backward) only while the foreground's recent steps took
// on average at most max_slowdown x its baseline and, when pause_in_allreduce is set, the
// foreground is not inside a reduction.
class ForegroundGate {
 public:
  ForegroundGate(double max_slowdown, bool pause_in_allreduce)
      : max_slowdown_(max_slowdown), pause_in_allreduce_(pause_in_allreduce) {}
  void set_baseline(double step_seconds) { baseline_.store(step_seconds); }
  // Keeps a moving average over about the last 8 steps, so one noisy step
  // does not stop the background.
  void step_finished(double step_seconds) {
    const double old = recent_.load();
    recent_.store(old > 0 ? 0.875 * old + 0.125 * step_seconds : step_seconds);
  }
  std::atomic<bool>& in_allreduce() { return in_allreduce_; }
  bool open() const;

 private:
  double max_slowdown_;
  bool pause_in_allreduce_;
  std::atomic<double> baseline_{0}, recent_{0};
  std::atomic<bool> in_allreduce_{false};
};

struct BackgroundReport {
  std::string job, model, priority;
  bool failed = false;   // on this rank; the trainer gathers every rank's
  std::string error;     // what failed, on this rank
  int64_t steps = 0;                      // steps finished, calibration included
  int64_t shared_steps = 0;               // of them, beside the foreground
  double alone_samples_per_second = 0;    // calibration, on the whole world alone
  double shared_samples_per_second = 0;   // beside the foreground
  double first_loss = NAN, last_loss = NAN;
  double gate_wait_seconds = 0;           // held back by the gate
  TimeSplit shared_times;                 // its compute / reduction seconds beside the foreground
};

struct MultiplexResult {
  BackgroundReport background;       // rank 0's
  int failed_ranks = 0;              // ranks whose background failed
  int calibrate_steps = 0;
  double foreground_alone_samples_per_second = 0;   // its first steps, alone
  double foreground_shared_samples_per_second = 0;  // while the background ran
  double foreground_slowdown = 0;                   // alone rate / shared rate
  // The foreground's model and global batch trained data parallel over the
  // same ranks, alone (equal to the alone rate when the foreground is data
  // parallel; measured in calibration otherwise): the honest reference.
  double foreground_data_parallel_samples_per_second = 0;
  std::string data_parallel_reference;  // how that rate was had, for the metrics
  // include/burstpool/cluster_throughput.hpp, against each reference.
  double cluster_throughput_vs_data_parallel = 0;
  double cluster_throughput_vs_own_plan = 0;
};

// The thread's scheduling: SCHED_IDLE where allowed, else the lowest nice.
// Returns what it got, for the report ("SCHED_IDLE", "nice 19", or why not).
std::string lower_thread_priority();

// [background] thread_priority = auto: idle for a background job whose layers
// run on the CPU (it must only take what the foreground leaves), normal for
// one on a device, whose thread only launches work: at idle priority beside a
// foreground thread on the same core it would hardly ever get to launch.
bool idle_background_thread(const std::string& thread_priority, const std::string& device);

// The warning for ranks of which the most confined can run on `cores` cores
// while their background job works on a device: that job's thread launches
// the device's work and needs a core beside the foreground's. Empty when
// cores >= 2 (or when the background's layers run on the CPU, where it takes
// the foreground's idle core time by design: then pass cores >= 2).
std::string binding_warning(int cores);
// The warning for `ranks` ranks of one node sharing its `gpus` GPUs while a
// background job runs on them: separate processes on one GPU are
// time-sliced, so the background's least-priority streams cannot yield to
// another process's foreground. Empty when every rank has a GPU of its own
// (ranks <= gpus) or there is no GPU (gpus < 1: nothing to share).
std::string gpu_sharing_warning(int ranks, int gpus, const std::string& host);

// Throws unless MPI runs at MPI_THREAD_MULTIPLE, naming the level it has.
void require_thread_multiple();
void check_thread_level(int provided);  // the same, for a given level

class BackgroundJob {
 public:
  // Collective over `world`. `job` must be data parallel (no plan). Throws
  // Error for a bad job, missing data, or a thread level below MULTIPLE.
  // With job.resume and an [output] checkpoint, continues from that
  // checkpoint's step. The job's checkpoint is written at its cadences and
  // when it stops (not after a failure), by rank 0 alone. `how`: the
  // foreground's [background] section (thread_priority; sync: with none, each
  // rank trains a replica of its own on MPI_COMM_SELF from the job's seed plus
  // its rank in `world`).
  BackgroundJob(const JobConfig& job, MPI_Comm world, ForegroundGate& gate, const BackgroundConfig& how = {});
  ~BackgroundJob();
  BackgroundJob(const BackgroundJob&) = delete;
  BackgroundJob& operator=(const BackgroundJob&) = delete;

  // Runs `steps` steps (collective) on the calling thread at its priority. A
  // non-finite loss (agreed by all ranks) marks the job failed and it never
  // starts; other errors here propagate (they end the run, like a bad job file).
  void calibrate(int steps);
  // Launches the background thread; it trains until its steps run out, a
  // failure, or stop().
  void start();
  // Asks the thread to stop after its current step; after `grace_seconds`
  // it cancels the thread's waits instead (a dead peer). Returns the report.
  BackgroundReport stop(double grace_seconds);

  bool running() const { return thread_.joinable() && !done_.load(); }
  // For progress lines while it runs.
  double last_loss() const { return last_loss_.load(); }
  double shared_rate() const;
  double seconds_per_step_alone() const { return alone_step_seconds_; }

 private:
  class Steps;  // its steps for the run loop (background.cpp)
  void calibrate_steps(int steps);
  void run_thread();
  // The end of a step the ranks agreed to keep: the update, and the loss
  // (summed over the ranks) for the report. t0: when the step began.
  void apply_step(double loss, std::chrono::steady_clock::time_point t0);
  void save_checkpoint();           // the job's [output] checkpoint, by rank 0 alone
  void save_final_checkpoint();     // at stop(), unless the job failed; errors become a warning

  std::unique_ptr<TrainingSession> session_;
  bool idle_thread_ = true;  // idle_background_thread
  bool writer_ = false;      // rank 0 of the world: prints and writes the checkpoint
  MPI_Comm comm_ = MPI_COMM_NULL;
  ForegroundGate& gate_;
  std::thread thread_;
  std::atomic<bool> stop_{false}, cancel_{false}, done_{false};
  std::mutex mutex_;
  std::condition_variable finished_;
  BackgroundReport report_;
  std::atomic<double> last_loss_{NAN};
  std::atomic<int64_t> step_{0};
  int64_t shared_first_step_ = 0;
  double alone_step_seconds_ = 0;
  std::chrono::steady_clock::time_point shared_start_;
  int64_t saved_step_ = 0;  // of the last checkpoint written (0: none; a resumed job's is on disk)
  std::unique_ptr<Steps> steps_;  // made last: it reads the job and comm_
};

}  // namespace burstpool
