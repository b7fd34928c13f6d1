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

// One order on the GPU for every NCCL call of a process, whatever the
// stream: each call's stream waits for the previous call's completion. NCCL
// kernels wait for their peers, so NCCL calls of several communicators
// running at once on several streams can deadlock (NCCL's documentation);
// in one order, and launched in one order on every rank (the executor's
// walk), they cannot. Work other than NCCL still overlaps them.
class NcclSequence {
 public:
  NcclSequence();
  ~NcclSequence();
  NcclSequence(const NcclSequence&) = delete;
  NcclSequence& operator=(const NcclSequence&) = delete;
  void before(cudaStream_t stream);  // before an NCCL call (or group) on `stream`
  void after(cudaStream_t stream);   // after it

 private:
  cudaEvent_t last_ = nullptr;
  bool recorded_ = false;
};

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
  // Ends the communicator without waiting for its operations (ncclCommAbort:
  // a peer may never post the other half of a send or receive). For error
  // paths only: nothing may use the group afterwards.
  void abort();

 private:
  NcclGroup(const ncclUniqueId& id, int rank, int size);
  ncclComm_t comm_ = nullptr;
  int rank_ = 0, size_ = 1;
};

}  // namespace burstpool
