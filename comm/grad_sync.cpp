#include "comm/grad_sync.hpp"

#include <chrono>

#include "burstpool/error.hpp"
#include "burstpool/runtime.hpp"
#include "burstpool/trace.hpp"
#include "comm/progress.hpp"
#include "comm/wait.hpp"

namespace burstpool {

void GradientSync::layer_ready(size_t offset, size_t count, const Communicator& group) {
  if (count == 0 || group.size() == 1) return;  // nothing to reduce
  Bucket& bucket = open_[group.ranks()];
  // Backward visits layers in reverse, so a layer extends its set's bucket
  // downwards when its range ends where the bucket begins.
  const bool joins = bucket.hi > bucket.lo && offset + count == bucket.lo &&
                     (bucket.hi - offset) * sizeof(float) <= bucket_bytes_;
  if (!joins) {
    flush(bucket);
    bucket.group = &group;
    bucket.hi = offset + count;
  }
  bucket.lo = offset;
  if ((bucket.hi - bucket.lo) * sizeof(float) >= bucket_bytes_) flush(bucket);
}

void GradientSync::flush(Bucket& bucket) {
  if (bucket.hi == bucket.lo) return;
  const auto t0 = std::chrono::steady_clock::now();
  reducer_->start(grads_ + bucket.lo, bucket.hi - bucket.lo, *bucket.group);
  // Started here, summed while backward goes on; finish() shows the wait.
  if (traced_ && tracer().active())
    tracer().span(Track::gradient_sync,
                  fmt::format("start allreduce bucket: {:.1f} KiB over {} ranks",
                              (bucket.hi - bucket.lo) * sizeof(float) / 1024.0, bucket.group->size()),
                  t0, false);
  ++started_;
  bucket.lo = bucket.hi = 0;
}

void GradientSync::progress() { reducer_->progress(); }

void GradientSync::finish() {
  for (auto& [ranks, bucket] : open_) flush(bucket);
  reducer_->wait(&site_);
}

void MpiGroupReducer::start(float* data, size_t count, const Communicator& group) {
  MPI_Request request;
  BP_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, group.get(), &request));
  requests_.push_back(request);
  if (!pumped_) pumped_ = progress_begin();
}

void MpiGroupReducer::progress() {
  if (requests_.empty()) return;
  int done = 0;
  BP_MPI_CHECK(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE));
  if (done) {
    requests_.clear();
    settled();
  }
}

void MpiGroupReducer::wait(WaitSite* site) {
  wait_all(static_cast<int>(requests_.size()), requests_.data(), site);
  requests_.clear();
  settled();
}

void MpiGroupReducer::settled() {
  if (pumped_) progress_end();
  pumped_ = false;
}

}  // namespace burstpool
