#pragma once
// Gradient synchronisation, overlapped with backward.
//
// Backward hands each finished layer to `layer_ready`. Layers are gathered
// into buckets: a bucket is a contiguous range of the flat gradient buffer
// whose layers share one rank set, up to `bucket_bytes`; each rank set has
// its own open bucket. A full bucket, or one that the set's next layer does
// not extend, starts a sum over that set's group while backward goes on;
// `finish` starts the open ones (in rank-set order) and waits for all.
//
// Only the set's own layers decide when its bucket starts, so every member
// of a group starts the group's sums at the same points of the step, between
// the same batch-norm statistics sums on the group's communicator: MPI (and
// NCCL) need one order of collectives on a communicator on all its members,
// and members of a group may run different layers of other sets in between. The sums are a GroupReducer's: a non-blocking MPI_Iallreduce on the
// group's communicator over host memory (MpiGroupReducer), or NCCL over
// device memory (cuda/nccl/nccl_reducer.hpp). Gradients are sums over
// samples of a loss already scaled by 1/global batch, so summing them over
// the group gives the global-batch gradient for any slice sizes.
#include <mpi.h>

#include <cstddef>
#include <map>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/wait.hpp"

namespace burstpool {

class GroupReducer {
 public:
  virtual ~GroupReducer() = default;
  // Starts summing `count` floats at `data` over `group`, in place, and
  // returns without waiting; `data` stays untouched until wait() returns.
  virtual void start(float* data, size_t count, const Communicator& group) = 0;
  virtual void progress() {}  // lets sums in flight advance (between layers)
  // Returns once every sum started is done. `site`: where in the step this waits.
  virtual void wait(WaitSite* site) = 0;
};

// Sums in flight are kept moving by the process's progress helper
// (comm/progress.hpp) between the executor's own calls.
class MpiGroupReducer final : public GroupReducer {
 public:
  ~MpiGroupReducer() override { settled(); }
  void start(float* data, size_t count, const Communicator& group) override;
  void progress() override;
  void wait(WaitSite* site) override;

 private:
  void settled();  // every sum done: the helper may rest
  std::vector<MPI_Request> requests_;
  bool pumped_ = false;  // the progress helper counts this reducer's sums
};

class GradientSync {
 public:
  // `grads`: the flat gradient buffer, in the reducer's memory.
  GradientSync(float* grads, size_t bucket_bytes, std::unique_ptr<GroupReducer> reducer)
      : grads_(grads), bucket_bytes_(bucket_bytes), reducer_(std::move(reducer)) {}

  // Layer gradients grads[offset, offset + count) are final; `group` is the layer's rank set.
  void layer_ready(size_t offset, size_t count, const Communicator& group);
  // Lets MPI advance the reductions in flight (call between layers).
  void progress();
  // Starts the last bucket and waits for every reduction (the caller times it).
  void finish();
  int buckets_started() const { return started_; }
  // Record each bucket's start in the process's trace (burstpool/trace.hpp).
  void set_traced(bool on) { traced_ = on; }

 private:
  struct Bucket {
    const Communicator* group = nullptr;
    size_t lo = 0, hi = 0;  // grads[lo, hi); empty when lo == hi
  };
  void flush(Bucket& bucket);

  float* grads_;
  size_t bucket_bytes_;
  std::unique_ptr<GroupReducer> reducer_;
  std::map<RankSet, Bucket> open_;  // by rank set: one order on every rank
  int started_ = 0;
  WaitSite site_;  // finish() waits at the same point every step
  bool traced_ = false;
};

}  // namespace burstpool
