// The NCCL slice mover on one GPU, one rank sending to itself (NCCL allows a
// rank to be its own peer): a received piece overwrites or adds, a kept
// piece is copied or added, several pieces of one exchange go as one NCCL
// group, the temporaries go back to the allocator, and the data is there
// when finish() returns. Exact: copies and single float additions. Moving
// slices between different GPUs needs a node with two or more of them.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <vector>

#include "cuda/nccl/nccl_slice_mover.hpp"
#include "burstpool/device.hpp"
#include "cuda/check.hpp"
#include "cuda/context.hpp"

namespace burstpool {
namespace {

std::vector<float> ramp(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + 0.25f * static_cast<float>(i);
  return v;
}

TEST(NcclSliceMover, PiecesToItselfOverwriteOrAdd) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  cuda::Context gpu(0);
  CachingAllocator& memory = gpu.allocator();
  const cudaStream_t stream = gpu.work_stream();
  constexpr size_t n = 3000;
  const std::vector<float> a = ramp(n, 1), b = ramp(n, -7);
  // Buffers: sources a and b; destinations received (=), received (+=), kept (=), kept (+=).
  std::vector<float*> d(6);
  for (float*& p : d) p = static_cast<float*>(memory.allocate(n * sizeof(float)));
  BP_CUDA_CHECK(cudaMemcpy(d[0], a.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  BP_CUDA_CHECK(cudaMemcpy(d[1], b.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  for (int k = 2; k < 6; ++k) BP_CUDA_CHECK(cudaMemcpy(d[k], b.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const size_t in_use = memory.stats().in_use_bytes;

  NcclSliceMover mover(NcclGroup::alone(), gpu.device(), stream, memory, std::make_shared<NcclSequence>());
  for (int round = 0; round < 2; ++round) {  // a second exchange on the same mover
    mover.send(d[0], n, 0, 0);
    mover.receive(d[2], n, 0, 0, false);
    mover.send(d[0], n / 2, 0, 0);  // a second piece to the same peer:
    mover.receive(d[3], n / 2, 0, 0, true);  // NCCL matches a pair's pieces in order
    mover.keep(d[4], d[0], n, false);
    mover.keep(d[5], d[0], n, true);
    mover.finish(nullptr);
    EXPECT_EQ(memory.stats().in_use_bytes, in_use) << "temporaries not handed back";
  }
  std::vector<std::vector<float>> got(6, std::vector<float>(n));
  for (int k = 2; k < 6; ++k)
    BP_CUDA_CHECK(cudaMemcpy(got[k].data(), d[k], n * sizeof(float), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; ++i) {
    const float added_twice = (b[i] + a[i]) + a[i];
    ASSERT_EQ(got[2][i], a[i]) << "received, overwritten, at " << i;
    ASSERT_EQ(got[3][i], i < n / 2 ? added_twice : b[i]) << "received, added, at " << i;
    ASSERT_EQ(got[4][i], a[i]) << "kept, overwritten, at " << i;
    ASSERT_EQ(got[5][i], added_twice) << "kept, added, at " << i;
  }
  for (float* p : d) memory.deallocate(p);
}

// A mover dropped while an exchange is open (an exception between queueing
// and finish()) must return: a receive that no peer will ever match may not
// be launched and then waited for. Run in a thread with a deadline: when the
// destructor hangs, the test fails and ends the process (the thread cannot
// be stopped).
TEST(NcclSliceMover, DroppedWithAnOpenExchangeReturnsAtOnce) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  cuda::Context gpu(0);
  CachingAllocator& memory = gpu.allocator();
  float* d = static_cast<float*>(memory.allocate(1024 * sizeof(float)));
  auto mover = std::make_unique<NcclSliceMover>(NcclGroup::alone(), gpu.device(), gpu.work_stream(), memory,
                                                std::make_shared<NcclSequence>());
  mover->receive(d, 1024, 0, 0, true);  // no send will match it
  auto dropped = std::async(std::launch::async, [&] { mover.reset(); });
  if (dropped.wait_for(std::chrono::seconds(20)) == std::future_status::timeout) {
    ADD_FAILURE() << "~NcclSliceMover waited for a receive no peer will send";
    std::_Exit(1);
  }
}

}  // namespace
}  // namespace burstpool
