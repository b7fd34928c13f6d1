#include "cuda/nccl/nccl_group.hpp"

#include <set>
#include <string>
#include <vector>

#include "cuda/check.hpp"

namespace burstpool {

namespace {

// Made by the group's rank 0 and broadcast over MPI.
ncclUniqueId shared_id(MPI_Comm group) {
  int rank = 0;
  BP_MPI_CHECK(MPI_Comm_rank(group, &rank));
  ncclUniqueId id;
  if (rank == 0) BP_NCCL_CHECK(ncclGetUniqueId(&id));
  BP_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, group));
  return id;
}

int rank_of(MPI_Comm group) {
  int rank = 0;
  BP_MPI_CHECK(MPI_Comm_rank(group, &rank));
  return rank;
}

int size_of(MPI_Comm group) {
  int size = 0;
  BP_MPI_CHECK(MPI_Comm_size(group, &size));
  return size;
}

}  // namespace

bool gpus_are_distinct(MPI_Comm comm, int device) {
  const int size = size_of(comm);
  constexpr int kId = 320;  // node name, '/', bus id, padded
  char bus[64] = {}, node[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  BP_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, device));
  BP_MPI_CHECK(MPI_Get_processor_name(node, &length));
  std::string mine = std::string(node) + "/" + bus;
  mine.resize(kId, '\0');
  std::vector<char> all(static_cast<size_t>(kId) * size);
  BP_MPI_CHECK(MPI_Allgather(mine.data(), kId, MPI_CHAR, all.data(), kId, MPI_CHAR, comm));
  std::set<std::string> gpus;
  for (int r = 0; r < size; ++r) gpus.insert(std::string(all.data() + static_cast<size_t>(r) * kId));
  return static_cast<int>(gpus.size()) == size;
}

NcclGroup::NcclGroup(const ncclUniqueId& id, int rank, int size) : rank_(rank), size_(size) {
  BP_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
}

NcclGroup::NcclGroup(MPI_Comm group) : NcclGroup(shared_id(group), rank_of(group), size_of(group)) {}

std::unique_ptr<NcclGroup> NcclGroup::alone() {
  ncclUniqueId id;
  BP_NCCL_CHECK(ncclGetUniqueId(&id));
  return std::unique_ptr<NcclGroup>(new NcclGroup(id, 0, 1));
}

NcclSequence::NcclSequence() { BP_CUDA_CHECK(cudaEventCreateWithFlags(&last_, cudaEventDisableTiming)); }

NcclSequence::~NcclSequence() { cudaEventDestroy(last_); }

void NcclSequence::before(cudaStream_t stream) {
  if (recorded_) BP_CUDA_CHECK(cudaStreamWaitEvent(stream, last_, 0));
}

void NcclSequence::after(cudaStream_t stream) {
  BP_CUDA_CHECK(cudaEventRecord(last_, stream));
  recorded_ = true;
}

NcclGroup::~NcclGroup() {
  if (comm_) ncclCommDestroy(comm_);
}

void NcclGroup::abort() {
  if (comm_) ncclCommAbort(comm_);
  comm_ = nullptr;
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
