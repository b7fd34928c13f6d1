#include "comm/slice_mover.hpp"

#include <cstring>

#include "burstpool/error.hpp"

namespace burstpool {

namespace {
void copy_or_add(float* dst, const float* src, size_t n, bool accumulate) {
  if (!accumulate) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  for (size_t k = 0; k < n; ++k) dst[k] += src[k];
}
}  // namespace

void MpiSliceMover::keep(float* dst, const float* src, size_t n, bool accumulate) {
  queued_.keeps.push_back({dst, src, n, accumulate});
}

size_t SliceMover::park() { throw Error("this slice mover cannot leave exchanges in flight"); }
void SliceMover::complete(size_t, WaitSite*) { throw Error("this slice mover cannot leave exchanges in flight"); }

void MpiSliceMover::send(const float* src, size_t n, int peer, int tag) {
  MPI_Request r;
  BP_MPI_CHECK(MPI_Isend(src, static_cast<int>(n), MPI_FLOAT, peer, tag, world_, &r));
  queued_.requests.push_back(r);
}

void MpiSliceMover::receive(float* dst, size_t n, int peer, int tag, bool accumulate) {
  if (accumulate) {  // into a buffer of its own, added in finish()
    queued_.to_add.emplace_back(dst, std::vector<float>(n));
    dst = queued_.to_add.back().second.data();
  }
  MPI_Request r;
  BP_MPI_CHECK(MPI_Irecv(dst, static_cast<int>(n), MPI_FLOAT, peer, tag, world_, &r));
  queued_.requests.push_back(r);
}

void MpiSliceMover::wait(Batch& batch, WaitSite* site) {
  wait_all(static_cast<int>(batch.requests.size()), batch.requests.data(), site);
  batch.requests.clear();
  for (const Keep& k : batch.keeps) copy_or_add(k.dst, k.src, k.n, k.accumulate);
  batch.keeps.clear();
  for (auto& [dst, piece] : batch.to_add) copy_or_add(dst, piece.data(), piece.size(), true);
  batch.to_add.clear();
}

void MpiSliceMover::finish(WaitSite* site) { wait(queued_, site); }

// A received piece's temporary moves with its vector, so its address stays valid.
// An empty batch is not kept: most layers move nothing, every step.
size_t MpiSliceMover::park() {
  if (queued_.requests.empty() && queued_.keeps.empty()) return kNothing;
  parked_.emplace(next_batch_, std::move(queued_));
  queued_ = Batch();
  return next_batch_++;
}

void MpiSliceMover::complete(size_t batch, WaitSite* site) {
  if (batch == kNothing) return;
  auto it = parked_.find(batch);
  BP_CHECK(it != parked_.end(), "slice mover: no batch {} in flight", batch);
  wait(it->second, site);
  parked_.erase(it);
}

}  // namespace burstpool
