#pragma once
// Gradient synchronisation, overlapped with backward.
//
// Backward hands each finished layer to `layer_ready`. Layers are gathered
// into buckets: a bucket is a contiguous range of the flat gradient buffer
// whose layers share one rank set, up to `bucket_bytes`. A full bucket, or
// one whose next layer has another rank set, starts a non-blocking
// MPI_Iallreduce (sum) on that set's communicator while backward goes on;
// `finish` starts the last one and waits for all. Gradients are sums over
// samples of a loss already scaled by 1/global batch, so summing them over
// the group gives the global-batch gradient for any slice sizes.
#include <mpi.h>

#include <cstddef>
#include <vector>

#include "communicator.hpp"
#include "wait.hpp"

namespace burstpool {

class GradientSync {
 public:
  GradientSync(float* grads, size_t bucket_bytes) : grads_(grads), bucket_bytes_(bucket_bytes) {}

  // Layer gradients grads[offset, offset + count) are final; `group` is the layer's rank set.
  void layer_ready(size_t offset, size_t count, const Communicator& group);
  // Lets MPI advance the reductions in flight (call between layers).
  void progress();
  // Starts the last bucket and waits for every reduction; returns seconds spent waiting here.
  double finish();
  int buckets_started() const { return started_; }

 private:
  void flush();

  float* grads_;
  size_t bucket_bytes_;
  const Communicator* group_ = nullptr;  // of the open bucket
  size_t lo_ = 0, hi_ = 0;               // open bucket range
  std::vector<MPI_Request> requests_;
  int started_ = 0;
  WaitSite site_;  // finish() waits at the same point every step
};

}  // namespace burstpool
