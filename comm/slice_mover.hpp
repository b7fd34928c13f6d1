#pragma once
// How the pieces of a slice exchange travel. The executor decides the pieces
// (exchange.hpp), queues every piece of one exchange (a layer's inputs from
// other rank sets, or their gradients, in one direction) and then calls
// finish(); until finish returns, the buffers given must not be read or
// written by the caller. The destinations of one exchange do not overlap
// (the executor splits an exchange where two slots would write one
// gradient). Pointers are in the memory the mover works on: host memory for
// MpiSliceMover, device memory for the NCCL mover
// (cuda/nccl/nccl_slice_mover.hpp), which sends one exchange as one NCCL group.
//
// Every rank queues the pieces between one pair of ranks in the same order
// (input slot, then sample offset), so a mover that cannot tag its messages
// (NCCL matches a pair's messages in order) still matches them.
//
// A mover whose messages are tagged and need no partner to be posted (MPI's
// non-blocking calls) can also park the pieces queued so far: they go on in
// flight as one batch while the caller does other work, and complete(batch)
// waits for them later. The executor sends a slice as soon as its producer
// has made it and waits for a gradient only when its layer needs it, so
// branches on disjoint rank sets run at the same time. A mover that cannot
// (NCCL: a send waits in its stream for the peer's receive) keeps every
// exchange in step with the walk of the layers.
#include <mpi.h>

#include <cstddef>
#include <map>
#include <utility>
#include <vector>

#include "comm/wait.hpp"

namespace burstpool {

class SliceMover {
 public:
  virtual ~SliceMover() = default;
  // A piece this rank keeps: dst = src, or dst += src when accumulating
  // (by the time the exchange finishes or its batch completes).
  virtual void keep(float* dst, const float* src, size_t n, bool accumulate) = 0;
  // `peer` and `tag` on the executor's world communicator.
  virtual void send(const float* src, size_t n, int peer, int tag) = 0;
  // dst = the piece `peer` sends, or dst += it when accumulating.
  virtual void receive(float* dst, size_t n, int peer, int tag, bool accumulate) = 0;
  // Returns once every piece queued since the last finish is where it
  // belongs. `site`: where in the step this waits (wait.hpp).
  virtual void finish(WaitSite* site) = 0;
  // Whether park() and complete() work.
  virtual bool can_park() const { return false; }
  // The pieces queued since the last finish or park, as one batch in flight.
  virtual size_t park();
  // Returns once every piece of `batch` (from park) is where it belongs.
  virtual void complete(size_t batch, WaitSite* site);
};

// Host memory, MPI point to point on `world` (not owned).
class MpiSliceMover final : public SliceMover {
 public:
  explicit MpiSliceMover(MPI_Comm world) : world_(world) {}
  void keep(float* dst, const float* src, size_t n, bool accumulate) override;
  void send(const float* src, size_t n, int peer, int tag) override;
  void receive(float* dst, size_t n, int peer, int tag, bool accumulate) override;
  void finish(WaitSite* site) override;
  bool can_park() const override { return true; }
  size_t park() override;
  void complete(size_t batch, WaitSite* site) override;

 private:
  struct Keep {
    float* dst;
    const float* src;
    size_t n;
    bool accumulate;
  };
  struct Batch {
    std::vector<Keep> keeps;  // applied when the batch completes, so a parked one adds in its turn
    std::vector<MPI_Request> requests;
    std::vector<std::pair<float*, std::vector<float>>> to_add;  // destination, received piece
  };
  void wait(Batch& batch, WaitSite* site);
  static constexpr size_t kNothing = static_cast<size_t>(-1);  // park() of an empty queue
  MPI_Comm world_;
  Batch queued_;                   // since the last finish or park
  std::map<size_t, Batch> parked_;  // in flight, by handle
  size_t next_batch_ = 0;
};

}  // namespace burstpool
