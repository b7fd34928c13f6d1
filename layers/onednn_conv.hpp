#pragma once
// Convolution by oneDNN's CPU primitives (its JIT kernels for the processor
// it runs on: AVX-512 where there is one, AVX2 otherwise). Optional: a build
// without oneDNN has onednn_available() false and make_onednn_conv refuses.
// Internal to layers/conv.cpp.
#include <memory>

#include "layers/conv_kernel.hpp"

namespace burstpool::cpu {

// Whether this build has the oneDNN backend.
bool onednn_available();

// The kernel for one layer's geometry, with or without a bias term; throws
// Error when the build has no oneDNN.
std::unique_ptr<ConvKernel> make_onednn_conv(const ConvShape& shape, bool bias);

}  // namespace burstpool::cpu
