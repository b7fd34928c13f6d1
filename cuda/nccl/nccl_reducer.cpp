#include "cuda/nccl/nccl_reducer.hpp"

#include "cuda/check.hpp"
#include "cuda/context.hpp"
#include "burstpool/error.hpp"

namespace burstpool {

NcclGroupReducer::NcclGroupReducer(const GroupCache& groups, int device, cudaStream_t work, cudaStream_t sync,
                                   std::shared_ptr<NcclSequence> order)
    : device_(device), work_(work), sync_(sync), order_(std::move(order)) {
  BP_CUDA_CHECK(cudaSetDevice(device_));
  for (const Communicator* group : groups.groups())
    if (group->member() && group->size() > 1) nccl_.emplace(group, std::make_unique<NcclGroup>(group->get()));
  BP_CUDA_CHECK(cudaEventCreateWithFlags(&layers_done_, cudaEventDisableTiming));
  sums_done_ = cuda::host_wait_event(device_);  // finish waits on it
}

NcclGroupReducer::~NcclGroupReducer() {
  if (layers_done_) cudaEventDestroy(layers_done_);
  if (sums_done_) cudaEventDestroy(sums_done_);
}

void NcclGroupReducer::start(float* data, size_t count, const Communicator& group) {
  const auto it = nccl_.find(&group);
  BP_CHECK(it != nccl_.end(), "no NCCL communicator for a group of {} ranks", group.size());
  BP_CUDA_CHECK(cudaSetDevice(device_));
  BP_CUDA_CHECK(cudaEventRecord(layers_done_, work_));  // the gradients are written
  BP_CUDA_CHECK(cudaStreamWaitEvent(sync_, layers_done_, 0));
  order_->before(sync_);
  it->second->allreduce_sum(data, count, sync_);
  order_->after(sync_);
}

void NcclGroupReducer::wait(WaitSite*) {
  BP_CUDA_CHECK(cudaSetDevice(device_));
  BP_CUDA_CHECK(cudaEventRecord(sums_done_, sync_));
  BP_CUDA_CHECK(cudaStreamWaitEvent(work_, sums_done_, 0));  // what reads the gradients next runs there
  BP_CUDA_CHECK(cudaEventSynchronize(sums_done_));
}

}  // namespace burstpool
