#include "burstpool/allocator.hpp"

#include "burstpool/error.hpp"

namespace burstpool {

size_t CachingAllocator::bin_size(size_t bytes) {
  constexpr size_t small = 512, large = 2u << 20, limit = 1u << 20;
  if (bytes < limit) return (bytes + small - 1) / small * small;
  return (bytes + large - 1) / large * large;
}

CachingAllocator::~CachingAllocator() {
  release_held();
  release_cached();
  for (auto& [ptr, size] : live_) free_(ptr);  // leaked by the user: still returned
}

void* CachingAllocator::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t size = bin_size(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = free_blocks_.find(size);
  void* ptr = nullptr;
  if (auto held = held_.find(size); holding_ && held != held_.end() && !held->second.empty()) {
    ptr = held->second.back();
    held->second.pop_back();
    stats_.held_bytes -= size;
    ++stats_.reuses;
  } else if (it != free_blocks_.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
    stats_.cached_bytes -= size;
    ++stats_.reuses;
  } else {
    ptr = alloc_(size);
    if (!ptr) {  // out of memory: give the cache back and try once more
      release_locked();
      ptr = alloc_(size);
    }
    if (!ptr)
      throw Error(fmt::format("out of device memory: {} bytes requested, {} in use", size, stats_.in_use_bytes));
    ++stats_.raw_allocations;
  }
  live_.emplace(ptr, size);
  stats_.in_use_bytes += size;
  return ptr;
}

void CachingAllocator::deallocate(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  BP_CHECK(it != live_.end(), "deallocate of a block this allocator does not hold (freed twice?)");
  const size_t size = it->second;
  live_.erase(it);
  stats_.in_use_bytes -= size;
  if (holding_) {
    held_[size].push_back(ptr);
    stats_.held_bytes += size;
    return;
  }
  free_blocks_[size].push_back(ptr);
  stats_.cached_bytes += size;
}

void CachingAllocator::hold_frees(bool on) {
  std::lock_guard<std::mutex> lock(mutex_);
  holding_ = on;
}

void CachingAllocator::release_held() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [size, blocks] : held_) {
    auto& free = free_blocks_[size];
    free.insert(free.end(), blocks.begin(), blocks.end());
  }
  stats_.cached_bytes += stats_.held_bytes;
  stats_.held_bytes = 0;
  held_.clear();
}

void CachingAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_locked();
}

void CachingAllocator::release_locked() {
  if (stats_.cached_bytes > 0) ++stats_.releases;
  for (auto& [size, blocks] : free_blocks_)
    for (void* p : blocks) free_(p);
  free_blocks_.clear();
  stats_.cached_bytes = 0;
}

CachingAllocator::Stats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace burstpool
