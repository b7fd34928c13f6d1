#include "comm/slice_mover.hpp"

#include <cstring>

#include "burstpool/error.hpp"

namespace burstpool {

void MpiSliceMover::keep(float* dst, const float* src, size_t n, bool accumulate) {
  if (!accumulate) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  for (size_t k = 0; k < n; ++k) dst[k] += src[k];
}

void MpiSliceMover::send(const float* src, size_t n, int peer, int tag) {
  MPI_Request r;
  BP_MPI_CHECK(MPI_Isend(src, static_cast<int>(n), MPI_FLOAT, peer, tag, world_, &r));
  requests_.push_back(r);
}

void MpiSliceMover::receive(float* dst, size_t n, int peer, int tag, bool accumulate) {
  if (accumulate) {  // into a buffer of its own, added in finish()
    to_add_.emplace_back(dst, std::vector<float>(n));
    dst = to_add_.back().second.data();
  }
  MPI_Request r;
  BP_MPI_CHECK(MPI_Irecv(dst, static_cast<int>(n), MPI_FLOAT, peer, tag, world_, &r));
  requests_.push_back(r);
}

void MpiSliceMover::finish(WaitSite* site) {
  wait_all(static_cast<int>(requests_.size()), requests_.data(), site);
  requests_.clear();
  for (auto& [dst, piece] : to_add_) keep(dst, piece.data(), piece.size(), true);
  to_add_.clear();
}

}  // namespace burstpool
