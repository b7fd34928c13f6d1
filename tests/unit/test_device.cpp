// Device policy and the caching allocator: the CPU-side logic of the CUDA
// backend, tested on every machine.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "burstpool/allocator.hpp"
#include "burstpool/device.hpp"
#include "burstpool/error.hpp"

namespace burstpool {
namespace {

TEST(Device, LocalRankChoosesTheGpu) {
  EXPECT_EQ(choose_device(0, 4), 0);
  EXPECT_EQ(choose_device(3, 4), 3);
  EXPECT_EQ(choose_device(5, 4), 1);  // more ranks than GPUs: shared evenly
  EXPECT_EQ(choose_device(1, 1), 0);  // two ranks on one GPU
  EXPECT_THROW(choose_device(0, 0), Error);
}

TEST(Device, ForegroundOutranksBackground) {
  const PriorityRange h200{0, -5};  // what CUDA reports: greatest is numerically smallest
  EXPECT_EQ(stream_priority(StreamRole::foreground, h200), -5);
  EXPECT_EQ(stream_priority(StreamRole::gradient_sync, h200), -5);
  EXPECT_EQ(stream_priority(StreamRole::background, h200), 0);
  const PriorityRange flat{0, 0};  // a device without priorities: everything equal
  EXPECT_EQ(stream_priority(StreamRole::background, flat), stream_priority(StreamRole::foreground, flat));
}

// A pretend device of `capacity` bytes that counts raw allocations.
struct CountingMemory {
  int allocs = 0, frees = 0;
  size_t capacity = SIZE_MAX, live = 0;
  std::map<void*, size_t> sizes;
  CachingAllocator make() {
    return CachingAllocator(
        [this](size_t n) -> void* {
          if (n > capacity - live) return nullptr;
          void* p = std::malloc(n);
          ++allocs;
          live += n;
          sizes[p] = n;
          return p;
        },
        [this](void* p) {
          ++frees;
          live -= sizes.at(p);
          sizes.erase(p);
          std::free(p);
        });
  }
};

TEST(Allocator, RoundsToBins) {
  EXPECT_EQ(CachingAllocator::bin_size(1), 512u);
  EXPECT_EQ(CachingAllocator::bin_size(512), 512u);
  EXPECT_EQ(CachingAllocator::bin_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::bin_size((1u << 20) + 1), 2u << 20);
  EXPECT_EQ(CachingAllocator::bin_size((2u << 20) + 1), 4u << 20);
}

TEST(Allocator, ReusesFreedBlocksOfTheSameBin) {
  CountingMemory mem;
  auto a = mem.make();
  void* p = a.allocate(1000);
  a.deallocate(p);
  void* q = a.allocate(1024);  // same bin as 1000
  EXPECT_EQ(p, q);
  EXPECT_EQ(mem.allocs, 1);
  void* r = a.allocate(5000);  // another bin: a new block
  EXPECT_NE(r, q);
  EXPECT_EQ(mem.allocs, 2);
  const auto s = a.stats();
  EXPECT_EQ(s.in_use_bytes, 1024u + 5120u);
  EXPECT_EQ(s.reuses, 1u);
  a.deallocate(q);
  a.deallocate(r);
  EXPECT_EQ(a.stats().cached_bytes, 1024u + 5120u);
  EXPECT_THROW(a.deallocate(q), Error);  // freed twice
  EXPECT_EQ(a.stats().releases, 0u);
  a.release_cached();
  EXPECT_EQ(mem.frees, 2);
  EXPECT_EQ(a.stats().cached_bytes, 0u);
  EXPECT_EQ(a.stats().releases, 1u);
  a.release_cached();  // nothing cached: nothing went back
  EXPECT_EQ(a.stats().releases, 1u);
}

TEST(Allocator, ReleasesTheCacheBeforeGivingUp) {
  CountingMemory mem;
  mem.capacity = 4096;
  auto a = mem.make();
  a.deallocate(a.allocate(3000));  // 3072 bytes cached, still taken on the device
  void* p = a.allocate(4000);      // 4096 does not fit beside them: the cache goes back, then it fits
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(mem.frees, 1);
  EXPECT_EQ(a.stats().releases, 1u);
  a.deallocate(p);
  EXPECT_THROW(a.allocate(8192), Error);  // larger than the device even with the cache released
  EXPECT_EQ(a.stats().cached_bytes, 0u);
}

// A captured CUDA graph replays into the workspaces it used: freed during a
// capture, they are held, reused by later captures only, never handed to an
// allocation outside one (which every replay would overwrite), and not given
// back with the cache; once the graphs are gone they return to the free lists.
TEST(Allocator, BlocksFreedDuringACaptureAreHeldForTheGraph) {
  CountingMemory mem;
  auto a = mem.make();
  a.hold_frees(true);
  void* workspace = a.allocate(4096);
  a.deallocate(workspace);
  EXPECT_EQ(a.allocate(4096), workspace) << "within the capture (one stream's order) it is reused";
  a.deallocate(workspace);
  a.hold_frees(false);
  EXPECT_EQ(a.stats().held_bytes, 4096u);
  void* later = a.allocate(4096);  // a scratch vector made after the capture
  EXPECT_NE(later, workspace);
  a.deallocate(later);
  a.release_cached();
  EXPECT_EQ(mem.frees, 1) << "the held block is not given back with the cache";
  a.hold_frees(true);  // a second capture reuses the first's held block
  EXPECT_EQ(a.allocate(4096), workspace);
  a.deallocate(workspace);
  a.hold_frees(false);
  a.release_held();  // the graphs are dropped
  EXPECT_EQ(a.stats().held_bytes, 0u);
  EXPECT_EQ(a.allocate(4096), workspace);
  a.deallocate(workspace);
}

}  // namespace
}  // namespace burstpool
