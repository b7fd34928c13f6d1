#include "grad_sync.hpp"

#include <chrono>

#include "burstpool/error.hpp"
#include "burstpool/runtime.hpp"
#include "wait.hpp"

namespace burstpool {

void GradientSync::layer_ready(size_t offset, size_t count, const Communicator& group) {
  if (count == 0 || group.size() == 1) return;  // nothing to reduce
  // Backward visits layers in reverse, so a layer extends the open bucket
  // downwards when its range ends where the bucket begins.
  const bool joins = group_ == &group && offset + count == lo_ && (hi_ - offset) * sizeof(float) <= bucket_bytes_;
  if (!joins) {
    flush();
    group_ = &group;
    hi_ = offset + count;
  }
  lo_ = offset;
  if ((hi_ - lo_) * sizeof(float) >= bucket_bytes_) flush();
}

void GradientSync::flush() {
  if (!group_ || hi_ == lo_) {
    group_ = nullptr;
    return;
  }
  reducer_->start(grads_ + lo_, hi_ - lo_, *group_);
  ++started_;
  group_ = nullptr;
  lo_ = hi_ = 0;
}

void GradientSync::progress() { reducer_->progress(); }

double GradientSync::finish() {
  flush();
  const auto t0 = std::chrono::steady_clock::now();
  reducer_->wait(&site_);
  return seconds_since(t0);
}

void MpiGroupReducer::start(float* data, size_t count, const Communicator& group) {
  MPI_Request request;
  BP_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, group.get(), &request));
  requests_.push_back(request);
}

void MpiGroupReducer::progress() {
  if (requests_.empty()) return;
  int done = 0;
  BP_MPI_CHECK(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE));
  if (done) requests_.clear();
}

void MpiGroupReducer::wait(WaitSite* site) {
  wait_all(static_cast<int>(requests_.size()), requests_.data(), site);
  requests_.clear();
}

}  // namespace burstpool
