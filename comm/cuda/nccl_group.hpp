#pragma once
// The NCCL communicator of one rank group (CUDA builds): rank 0 of the
// group's MPI communicator makes the unique id, MPI_Bcast hands it to the
// others, and every member joins with ncclCommInitRank. Collectives and
// point-to-point calls go on the stream given to each call.
#include <mpi.h>
#include <nccl.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

namespace burstpool {

// Whether every rank of `comm` drives a different GPU (node name and PCI bus
// id of `device`), as NCCL requires. Collective; the same answer on every rank.
bool gpus_are_distinct(MPI_Comm comm, int device);

class NcclGroup {
 public:
  // Collective over `group` (not MPI_COMM_NULL); the device must be set.
  explicit NcclGroup(MPI_Comm group);
  // This process alone (rank 0 of 1), without MPI: for tests on one GPU.
  static std::unique_ptr<NcclGroup> alone();
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  ncclComm_t get() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  void allreduce_sum(float* data, size_t count, cudaStream_t stream) const;
  // Slice transfers of one layer go between ncclGroupStart and ncclGroupEnd.
  void send(const float* data, size_t count, int peer, cudaStream_t stream) const;
  void recv(float* data, size_t count, int peer, cudaStream_t stream) const;

 private:
  NcclGroup(const ncclUniqueId& id, int rank, int size);
  ncclComm_t comm_ = nullptr;
  int rank_ = 0, size_ = 1;
};

}  // namespace burstpool
