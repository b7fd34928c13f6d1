#pragma once
// Winograd F(2x2, 3x3) convolution for 3x3 kernels with stride 1 (any zero
// padding): each 2x2 output tile costs 16 multiplies per channel pair instead
// of 36, as 16 GEMMs of (out x in) x (in x tiles) in the transformed domain.
//
// Forward:  Y = A^T [ (G g G^T) . (B^T d B) ] A        per 4x4 input tile d
// Backward is the exact adjoint of those linear maps:
//   dM = A dY A^T;  dV = U^T dM  ->  dX += B dV B^T (scattered over tiles)
//   dU = sum over tiles dM V^T   ->  dg = G^T dU G
// Internal to layers/conv.cpp.
#include <cstddef>
#include <vector>

namespace burstpool::cpu {

class Winograd3x3 {
 public:
  // Per-sample input (c, h, w), k output channels, padding (ph, pw); output is (k, oh, ow).
  Winograd3x3(int c, int h, int w, int k, int ph, int pw, int oh, int ow);

  // y = conv(x, weight) + bias (bias may be null), n samples, NCHW.
  void forward(const float* x, const float* weight, const float* bias, float* y, int n);
  // dweight = d/dweight (overwrite); dx: overwrite or accumulate, null to skip.
  void backward(const float* x, const float* weight, const float* dy, float* dweight, float* dx, bool accumulate,
                int n);

 private:
  void transform_weights(const float* weight);
  void transform_input(const float* x, int s0, int samples, float* v) const;
  void pad_plane(const float* plane, float* pad) const;
  int chunk_samples() const;

  int c_, h_, w_, k_, ph_, pw_, oh_, ow_;
  int tiles_y_, tiles_x_;
  std::vector<float> u_;  // [16][k][c]: transformed weights of the current step
  std::vector<float> v_, m_, du_;
};

}  // namespace burstpool::cpu
