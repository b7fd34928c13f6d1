#pragma once
// Small-batch learners on one rank (docs/learners.md): each learner is a
// whole model replica with its own activations, gradients and momentum,
// trained on its own small batch, in its own thread.
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "burstpool/executor.hpp"
#include "burstpool/optimizer.hpp"

namespace burstpool {

struct Learner {
  // Builds a replica for batch `batch`, initialised from `seed` (the same on
  // every rank and learner), on a one-rank plan over MPI_COMM_SELF.
  Learner(const ModelSpec& spec, int batch, uint64_t seed, const SgdOptions& sgd, size_t bucket_bytes);
  Model& model() { return exec->model(); }
  float* params() { return exec->model().params().data(); }
  // The replica's momentum on the host: the strategy's own (sma's u_j) when
  // it made one, else the SGD velocity.
  float* host_momentum() { return momentum.empty() ? sgd->velocity().data() : momentum.data(); }
  // Where the replica's values live with an accelerator (use_job_device; on
  // the CPU everything is here, and the moves below copy nothing). The
  // batch-norm statistics live on the device. With device_step (an
  // accelerator and a strategy that is device_resident: every built-in one)
  // the parameters and the momentum live there too and the device runs the
  // learner's update. Otherwise the parameters go up before each forward
  // (params_to_device) and the gradients come back after backward
  // (gradients_to_host).
  bool device_step = false;
  void params_to_device();
  void gradients_to_host();
  // The host's copies of everything the device holds made current (before
  // reading them: evaluation, checkpoints, averaging), and the device's from
  // the host's (after changing them: new replicas, restarts from z or the
  // average, resumes).
  void sync_host();
  void sync_device();
  // The job's SGD step on this replica, where its values live.
  void sgd_step(float lr);

  std::unique_ptr<Executor> exec;
  std::unique_ptr<Sgd> sgd;      // the job's SGD on this replica (its velocity: the momentum of local-sgd, shadow)
  std::vector<float> momentum;   // a strategy's own momentum (sma: u_j); empty: sgd's velocity
  std::vector<float> scratch;    // a strategy's per-learner vector (sma: c_j, summed by the rank after the iteration)
  std::vector<float> images;
  std::vector<int32_t> labels;
  double loss = 0;
};

// One auto-tuning decision (as CROSSBOW's auto-tuner): k learners gave `rate`
// samples/s; `best` is the rate kept so far (0 before the first trial). Add a
// learner while the rate grows by more than `threshold` (a fraction); on the
// first smaller gain remove the last one and stop; stop at `max_learners`.
struct TuningStep {
  int learners;  // the count to run next
  double best;   // the rate to beat next
  bool done;     // tuning is over
};
TuningStep next_learner_count(int k, double rate, double best, double threshold, int max_learners);

// Runs fn(j) for j in [0, k): j = 0 on the calling thread, the others on
// persistent worker threads (created as k grows), each starting with
// `omp_threads` OpenMP threads (fn may set fewer for itself). Rethrows the
// first exception a learner threw.
class LearnerPool {
 public:
  explicit LearnerPool(int omp_threads) : omp_threads_(omp_threads) {}
  ~LearnerPool();
  void run(int k, const std::function<void(int)>& fn);

 private:
  void work(int index, long seen);

  int omp_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  const std::function<void(int)>* fn_ = nullptr;
  int k_ = 0, pending_ = 0;
  long generation_ = 0;
  bool quit_ = false;
  std::exception_ptr error_;
};

}  // namespace burstpool
