#pragma once
// Counter-based random numbers (splitmix64 finaliser) that do not depend on
// thread count, rank layout or device: the CPU layers and their CUDA twins
// (layers/cuda) include this one definition, so dropout masks agree bit for bit.
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

}  // namespace burstpool::cpu
