#include "sync/learners.hpp"

#include <omp.h>

namespace burstpool {

Learner::Learner(const ModelSpec& spec, int batch, uint64_t seed, const SgdOptions& options, size_t bucket_bytes)
    : exec(std::make_unique<Executor>(spec, data_parallel_plan(spec, 1, batch), MPI_COMM_SELF, seed, bucket_bytes)),
      sgd(std::make_unique<Sgd>(exec->model(), options)) {}

// On the host device each of these is a copy onto itself: nothing moves.
void Learner::params_to_device() {
  exec->device().copy_in(DeviceModel::Buffer::parameters, -1, 0, params(), model().param_count());
}

void Learner::gradients_to_host() {
  exec->device().copy_out(DeviceModel::Buffer::parameter_gradient, -1, 0, model().grads().data(),
                          model().param_count());
}

void Learner::sync_host() {
  DeviceModel& d = exec->device();
  if (device_step)
    d.to_host(host_momentum());  // parameters, statistics and momentum
  else
    d.copy_out(DeviceModel::Buffer::state, -1, 0, model().state().data(), model().state().size());
}

void Learner::sync_device() {
  DeviceModel& d = exec->device();
  if (device_step) {
    d.from_host(host_momentum());
  } else {
    params_to_device();
    d.copy_in(DeviceModel::Buffer::state, -1, 0, model().state().data(), model().state().size());
  }
}

void Learner::sgd_step(float lr) {
  if (device_step)
    exec->device().sgd_step(lr, sgd->options(), {{0, model().param_count()}});
  else
    sgd->step(lr);
}

TuningStep next_learner_count(int k, double rate, double best, double threshold, int max_learners) {
  const bool better = best <= 0 || rate > best * (1.0 + threshold);
  if (!better) return {k - 1, best, true};
  if (k >= max_learners) return {k, rate, true};
  return {k + 1, rate, false};
}

LearnerPool::~LearnerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    quit_ = true;
  }
  start_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void LearnerPool::work(int index, long seen) {
  omp_set_num_threads(omp_threads_);
  for (;;) {
    const std::function<void(int)>* fn;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_.wait(lock, [&] { return quit_ || generation_ != seen; });
      if (quit_) return;
      seen = generation_;
      if (index >= k_) continue;
      fn = fn_;
    }
    std::exception_ptr error;
    try {
      (*fn)(index);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (error && !error_) error_ = error;
    if (--pending_ == 0) done_.notify_all();
  }
}

void LearnerPool::run(int k, const std::function<void(int)>& fn) {
  while (static_cast<int>(workers_.size()) < k - 1) {
    const int index = static_cast<int>(workers_.size()) + 1;
    workers_.emplace_back([this, index, seen = generation_] { work(index, seen); });  // waits for the next run
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    k_ = k;
    pending_ = k - 1;
    error_ = nullptr;
    ++generation_;
  }
  start_.notify_all();
  std::exception_ptr mine;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(omp_threads_);
  try {
    fn(0);
  } catch (...) {
    mine = std::current_exception();
  }
  omp_set_num_threads(saved);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

}  // namespace burstpool
