#pragma once
// Counter-based random numbers (splitmix64 finaliser) that do not depend on
// thread count, rank layout or device: the CPU layers and their CUDA twins
// (cuda/ops) include this one definition, so dropout masks agree bit for bit.
#include <cstdint>

#ifdef __CUDACC__
#define BP_HOST_DEVICE __host__ __device__
#else
#define BP_HOST_DEVICE
#endif

namespace burstpool::cpu {

BP_HOST_DEVICE inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
// Uniform in [0, 1) from the top 24 bits.
BP_HOST_DEVICE inline float uniform01(uint64_t key) {
  return static_cast<float>(mix64(key) >> 40) * (1.0f / 16777216.0f);
}

// Dropout's key for one layer and training step: sample s of the batch then
// draws element e's keep/drop from uniform01(mix64(key + sample index) + e).
// `salt` is the layer's hash_name(name).
BP_HOST_DEVICE inline uint64_t dropout_step_key(uint64_t seed, uint64_t salt, int64_t step) {
  return mix64(seed ^ salt) ^ mix64(static_cast<uint64_t>(step) * 0x632BE59BD9B4E019ull);
}

}  // namespace burstpool::cpu
