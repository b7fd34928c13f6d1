#include "nccl_group.hpp"

#include "../../src/cuda/check.hpp"

namespace burstpool {

NcclGroup::NcclGroup(MPI_Comm group) {
  MPI_Comm_rank(group, &rank_);
  MPI_Comm_size(group, &size_);
  ncclUniqueId id;
  if (rank_ == 0) BP_NCCL_CHECK(ncclGetUniqueId(&id));
  BP_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, group));
  BP_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
}

NcclGroup::~NcclGroup() {
  if (comm_) ncclCommDestroy(comm_);
}

void NcclGroup::allreduce_sum(float* data, size_t count, cudaStream_t stream) const {
  BP_NCCL_CHECK(ncclAllReduce(data, data, count, ncclFloat, ncclSum, comm_, stream));
}

void NcclGroup::send(const float* data, size_t count, int peer, cudaStream_t stream) const {
  BP_NCCL_CHECK(ncclSend(data, count, ncclFloat, peer, comm_, stream));
}

void NcclGroup::recv(float* data, size_t count, int peer, cudaStream_t stream) const {
  BP_NCCL_CHECK(ncclRecv(data, count, ncclFloat, peer, comm_, stream));
}

}  // namespace burstpool
