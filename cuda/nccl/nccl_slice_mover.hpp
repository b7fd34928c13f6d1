#pragma once
// Slice exchanges between GPUs' buffers (CUDA builds): the pieces of one
// exchange go as one NCCL group of sends and receives on the layers' stream,
// so they follow the producer's kernels and precede the consumer's without
// host copies. Pieces a rank keeps are device-to-device copies; received
// pieces that add to a gradient land in a temporary first and are added by a
// kernel. finish() waits for the stream, so the executor's transfer time is
// the transfer's (the layers before it are done already: their work is
// waited for at the layer boundary).
//
// NCCL needs every rank on a GPU of its own (gpus_are_distinct).
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "comm/slice_mover.hpp"
#include "burstpool/allocator.hpp"
#include "cuda/nccl/nccl_group.hpp"

namespace burstpool {

class NcclSliceMover final : public SliceMover {
 public:
  // `world`: an NCCL communicator with the executor's world rank numbers.
  // Work goes on `stream` of `device`, in `order` with the process's other
  // NCCL calls; temporaries come from `memory`.
  NcclSliceMover(std::unique_ptr<NcclGroup> world, int device, cudaStream_t stream, CachingAllocator& memory,
                 std::shared_ptr<NcclSequence> order);
  ~NcclSliceMover() override;
  void keep(float* dst, const float* src, size_t n, bool accumulate) override;
  void send(const float* src, size_t n, int peer, int tag) override;  // tag unused: matched in order
  void receive(float* dst, size_t n, int peer, int tag, bool accumulate) override;
  void finish(WaitSite* site) override;  // site unused: the wait is for the stream

 private:
  void open_group();  // ncclGroupStart before an exchange's first send or receive
  struct Addition {
    float* dst;
    float* piece;  // temporary, from memory_
    size_t n;
  };
  std::unique_ptr<NcclGroup> world_;
  int device_;
  cudaStream_t stream_;
  CachingAllocator& memory_;
  std::shared_ptr<NcclSequence> order_;
  bool group_open_ = false;
  std::vector<Addition> additions_;
};

}  // namespace burstpool
