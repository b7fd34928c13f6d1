#pragma once
// Winograd convolution F(m x m, 3 x 3), m = 2 or 4, for 3x3 kernels with
// stride 1 and any zero padding. An (m+2)^2 input tile d gives an m x m output
// tile with (m+2)^2 multiplies per channel pair instead of 9 m^2: as
// (m+2)^2 GEMMs of (out x in) x (in x tiles) in the transformed domain.
//
// Forward:  Y = A^T [ (G g G^T) . (B^T d B) ] A          per tile
// Backward, the exact adjoint of those linear maps:
//   dM = A dY A^T;  dV = U^T dM  ->  dX += B dV B^T  (summed over overlapping tiles)
//   dU = sum over tiles of dM V^T  ->  dg = G^T dU G
//
// Transforms run over all tiles of a chunk of samples at once, so every
// inner loop is a long contiguous vector. Internal to layers/conv.cpp.
#include <memory>

#include "layers/conv_kernel.hpp"

namespace burstpool::cpu {

// The kernel for a 3x3 stride-1 geometry; tile = 2 or 4.
std::unique_ptr<ConvKernel> make_winograd(int tile, const ConvShape& s);

}  // namespace burstpool::cpu
