#pragma once
// Parameter-gradient sums of burst plans on GPUs (CUDA builds): each bucket
// GradientSync starts is an NCCL allreduce on the group's own NCCL
// communicator, on the gradient-sync stream, after the layers' work so far
// (an event), so the sums overlap the rest of backward. wait() makes the
// layers' stream wait for the sums (the optimizer reads them there) and
// returns when they are done.
//
// Every group of more than one rank gets an NcclGroup on each of its members,
// its unique id broadcast on the group's MPI communicator, made in the
// GroupCache's order (the same on every rank). NCCL needs every rank on a
// GPU of its own (gpus_are_distinct).
#include <cuda_runtime.h>

#include <map>
#include <memory>

#include "comm/communicator.hpp"
#include "comm/grad_sync.hpp"
#include "cuda/nccl/nccl_group.hpp"

namespace burstpool {

class NcclGroupReducer final : public GroupReducer {
 public:
  // Collective over groups.world(). `work`: where the layers run; `sync`: the
  // stream for the sums; `order`: shared with the process's other NCCL calls.
  NcclGroupReducer(const GroupCache& groups, int device, cudaStream_t work, cudaStream_t sync,
                   std::shared_ptr<NcclSequence> order);
  ~NcclGroupReducer() override;
  void start(float* data, size_t count, const Communicator& group) override;
  void wait(WaitSite* site) override;  // site unused: the wait is for an event

 private:
  std::map<const Communicator*, std::unique_ptr<NcclGroup>> nccl_;  // the groups this rank is in
  int device_;
  cudaStream_t work_, sync_;
  std::shared_ptr<NcclSequence> order_;
  cudaEvent_t layers_done_ = nullptr, sums_done_ = nullptr;
};

}  // namespace burstpool
