#include "shadow.hpp"

#include <chrono>

#include "../comm/wait.hpp"
#include "burstpool/error.hpp"

namespace burstpool {

ShadowAverager::ShadowAverager(MPI_Comm world, float* params, size_t n, std::mutex& lock, double pause_ms,
                               ShadowRule rule)
    : params_(params), n_(n), lock_(lock), pause_ms_(pause_ms), rule_(rule), snapshot_(n + 1), sum_(n + 1) {
  BP_MPI_CHECK(MPI_Comm_dup(world, &comm_));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_size(comm_, &size_);
  if (rule_.kind == ShadowRule::Kind::average) return;
  shared_.assign(params, params + n);  // the centre or the global model: the ranks' mean
  if (n > 0)
    BP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, shared_.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm_));
  for (float& v : shared_) v /= static_cast<float>(size_);
  if (rule_.kind == ShadowRule::Kind::block_momentum) update_.assign(n, 0.0f);
}

void ShadowAverager::apply() {
  const float inv = 1.0f / static_cast<float>(size_);
  switch (rule_.kind) {
    case ShadowRule::Kind::average:
      for (size_t i = 0; i < n_; ++i) params_[i] += sum_[i] * inv - snapshot_[i];
      break;
    case ShadowRule::Kind::elastic: {
      const float a = rule_.alpha, ranks = static_cast<float>(size_);
      for (size_t i = 0; i < n_; ++i) {
        params_[i] -= a * (snapshot_[i] - shared_[i]);
        shared_[i] += a * (sum_[i] - ranks * shared_[i]);
      }
      break;
    }
    case ShadowRule::Kind::block_momentum:
      for (size_t i = 0; i < n_; ++i) {
        update_[i] = rule_.block_momentum * update_[i] + rule_.block_lr * (sum_[i] * inv - shared_[i]);
        shared_[i] += update_[i];
        params_[i] += shared_[i] - snapshot_[i];
      }
      break;
  }
}

ShadowAverager::~ShadowAverager() {
  if (thread_.joinable()) finish();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
}

bool ShadowAverager::round() {
  {
    std::lock_guard<std::mutex> guard(lock_);
    std::copy(params_, params_ + n_, snapshot_.begin());
  }
  snapshot_[n_] = done_.load() ? 1.0f : 0.0f;  // ranks done so far, summed with the parameters
  MPI_Request request;
  BP_MPI_CHECK(MPI_Iallreduce(snapshot_.data(), sum_.data(), static_cast<int>(n_ + 1), MPI_FLOAT, MPI_SUM, comm_,
                              &request));
  wait_all(1, &request);  // sleeps between polls on this thread (it has a cancel flag)
  {
    std::lock_guard<std::mutex> guard(lock_);
    apply();
  }
  rounds_.fetch_add(1);
  return sum_[n_] >= static_cast<float>(size_);
}

void ShadowAverager::start() {
  thread_ = std::thread([this] {
    set_wait_cancel_flag(&never_);  // a flag that is never raised: waits sleep instead of spinning
    while (!round())
      if (pause_ms_ > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(pause_ms_));
    set_wait_cancel_flag(nullptr);
  });
}

int64_t ShadowAverager::finish() {
  done_.store(true);
  if (thread_.joinable()) thread_.join();
  return rounds_.load();
}

}  // namespace burstpool
