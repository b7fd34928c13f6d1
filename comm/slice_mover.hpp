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
#include <mpi.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "comm/wait.hpp"

namespace burstpool {

class SliceMover {
 public:
  virtual ~SliceMover() = default;
  // A piece this rank keeps: dst = src, or dst += src when accumulating.
  virtual void keep(float* dst, const float* src, size_t n, bool accumulate) = 0;
  // `peer` and `tag` on the executor's world communicator.
  virtual void send(const float* src, size_t n, int peer, int tag) = 0;
  // dst = the piece `peer` sends, or dst += it when accumulating.
  virtual void receive(float* dst, size_t n, int peer, int tag, bool accumulate) = 0;
  // Returns once every piece queued since the last finish is where it
  // belongs. `site`: where in the step this waits (wait.hpp).
  virtual void finish(WaitSite* site) = 0;
};

// Host memory, MPI point to point on `world` (not owned).
class MpiSliceMover final : public SliceMover {
 public:
  explicit MpiSliceMover(MPI_Comm world) : world_(world) {}
  void keep(float* dst, const float* src, size_t n, bool accumulate) override;
  void send(const float* src, size_t n, int peer, int tag) override;
  void receive(float* dst, size_t n, int peer, int tag, bool accumulate) override;
  void finish(WaitSite* site) override;

 private:
  MPI_Comm world_;
  std::vector<MPI_Request> requests_;
  std::vector<std::pair<float*, std::vector<float>>> to_add_;  // destination, received piece
};

}  // namespace burstpool
