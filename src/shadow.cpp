#include "shadow.hpp"

#include <chrono>

#include "../comm/wait.hpp"
#include "burstpool/error.hpp"

namespace burstpool {

ShadowAverager::ShadowAverager(MPI_Comm world, float* params, size_t n, std::mutex& lock, double pause_ms)
    : params_(params), n_(n), lock_(lock), pause_ms_(pause_ms), snapshot_(n + 1), sum_(n + 1) {
  BP_MPI_CHECK(MPI_Comm_dup(world, &comm_));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_size(comm_, &size_);
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
  const float inv = 1.0f / static_cast<float>(size_);
  {
    std::lock_guard<std::mutex> guard(lock_);
    for (size_t i = 0; i < n_; ++i) params_[i] += sum_[i] * inv - snapshot_[i];
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
