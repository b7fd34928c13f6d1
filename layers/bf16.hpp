#pragma once
// bf16 numerics on the CPU ([job] precision = bf16, Context::precision):
// values rounded to the nearest bfloat16 (8 significant bits, fp32's
// exponent range) and kept in float storage. A product of two such values
// is exact in fp32, so a GEMM or convolution over rounded inputs with fp32
// sums computes what a bf16 tensor-core product with fp32 accumulation
// does, up to the order of the sums; it saves neither time nor memory here.
#include <bit>
#include <cstddef>
#include <cstdint>

namespace burstpool {

// Round to nearest, ties to even, as a float-to-bf16 conversion does:
// infinities stay, a NaN stays a (quiet) NaN, and what lies beyond the
// largest bf16 becomes an infinity.
inline float bf16_round(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  return std::bit_cast<float>(nan ? (u | 0x00400000u) & 0xFFFF0000u : rounded);
}
void bf16_round(float* values, size_t n);                    // in place
void bf16_round(const float* from, float* to, size_t n);     // a rounded copy

}  // namespace burstpool
