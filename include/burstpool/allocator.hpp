#pragma once
// A caching allocator for device memory (the CUDA backend gives it cudaMalloc
// and cudaFree; tests give it malloc and free). Training asks for the same
// buffer sizes every step, and cudaMalloc/cudaFree synchronise the device, so
// freed blocks are kept in per-size free lists and handed out again.
//
// Sizes are rounded up to a bin: multiples of 512 bytes below 1 MiB, multiples
// of 2 MiB above. A request takes a cached block of exactly its bin size, so
// a block is never split and never much larger than asked for. When the raw
// allocator fails, every cached block is released and the request retried
// once. Thread-safe.
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace burstpool {

class CachingAllocator {
 public:
  using RawAlloc = std::function<void*(size_t)>;  // returns nullptr when out of memory
  using RawFree = std::function<void(void*)>;
  CachingAllocator(RawAlloc alloc, RawFree free) : alloc_(std::move(alloc)), free_(std::move(free)) {}
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  static size_t bin_size(size_t bytes);

  // Throws Error when even a retry after releasing the cache fails. 0 bytes: nullptr.
  void* allocate(size_t bytes);
  // `ptr` must come from allocate() and not be freed twice (checked).
  void deallocate(void* ptr);
  // Returns every cached block to the raw allocator (not the held ones).
  void release_cached();

  // Blocks a captured CUDA graph uses. Between hold_frees(true) and
  // hold_frees(false) (a stream capture), freed blocks are held: a graph
  // replays into them at every launch, so they must never be handed to
  // anything outside a graph (a scratch vector made later would be
  // overwritten by every replay). Allocations while holding take held blocks
  // first (captures run in one stream's order, like their replays).
  // release_held() hands them back to the free lists once no graph that
  // uses them is left (and the stream is done with them).
  void hold_frees(bool on);
  void release_held();

  struct Stats {
    size_t in_use_bytes = 0, cached_bytes = 0;
    size_t raw_allocations = 0, reuses = 0;
    // Times cached blocks went back to the device. Work that kept a cached
    // block's address (a captured CUDA graph's workspaces) is stale after one.
    size_t releases = 0;
    size_t held_bytes = 0;  // kept for captured graphs (hold_frees)
  };
  Stats stats() const;

 private:
  void release_locked();  // release_cached with mutex_ held
  RawAlloc alloc_;
  RawFree free_;
  mutable std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_blocks_;  // by bin size
  std::unordered_map<void*, size_t> live_;            // block -> bin size
  std::map<size_t, std::vector<void*>> held_;         // by bin size: hold_frees
  bool holding_ = false;
  Stats stats_;
};

}  // namespace burstpool
