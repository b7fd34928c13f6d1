#include "cuda/nccl/nccl_slice_mover.hpp"

#include "cuda/ops/kernels.hpp"
#include "cuda/check.hpp"

namespace burstpool {

NcclSliceMover::NcclSliceMover(std::unique_ptr<NcclGroup> world, int device, cudaStream_t stream,
                               CachingAllocator& memory, std::shared_ptr<NcclSequence> order)
    : world_(std::move(world)), device_(device), stream_(stream), memory_(memory), order_(std::move(order)) {}

NcclSliceMover::~NcclSliceMover() {
  if (group_open_) {
    // Unwinding from an exception between queueing and finish(): ending the
    // group would launch sends and receives whose peers may never post
    // theirs (they failed too, or wait elsewhere), and waiting for the
    // temporaries would then never return. The communicator is aborted
    // instead, and the temporaries are not handed back: the stream may
    // still name them. The run is failing; nothing may use NCCL after this.
    world_->abort();
    return;
  }
  if (!additions_.empty()) cudaStreamSynchronize(stream_);  // before the temporaries go back
  for (const Addition& a : additions_) memory_.deallocate(a.piece);
}

void NcclSliceMover::keep(float* dst, const float* src, size_t n, bool accumulate) {
  BP_CUDA_CHECK(cudaSetDevice(device_));
  if (accumulate)
    cuda::write_grad(dst, src, n, true, stream_);
  else
    BP_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
}

void NcclSliceMover::open_group() {
  if (group_open_) return;
  BP_CUDA_CHECK(cudaSetDevice(device_));
  order_->before(stream_);
  BP_NCCL_CHECK(ncclGroupStart());
  group_open_ = true;
}

void NcclSliceMover::send(const float* src, size_t n, int peer, int) {
  open_group();
  world_->send(src, n, peer, stream_);
}

void NcclSliceMover::receive(float* dst, size_t n, int peer, int, bool accumulate) {
  open_group();
  if (accumulate) {
    additions_.push_back({dst, static_cast<float*>(memory_.allocate(n * sizeof(float))), n});
    dst = additions_.back().piece;
  }
  world_->recv(dst, n, peer, stream_);
}

void NcclSliceMover::finish(WaitSite*) {
  BP_CUDA_CHECK(cudaSetDevice(device_));
  if (group_open_) {
    group_open_ = false;
    BP_NCCL_CHECK(ncclGroupEnd());
    order_->after(stream_);
  }
  for (const Addition& a : additions_) cuda::write_grad(a.dst, a.piece, a.n, true, stream_);
  BP_CUDA_CHECK(cudaStreamSynchronize(stream_));
  for (const Addition& a : additions_) memory_.deallocate(a.piece);  // the stream is done with them
  additions_.clear();
}

}  // namespace burstpool
