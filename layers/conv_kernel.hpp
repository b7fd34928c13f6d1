#pragma once
// The contract of a convolution algorithm that runs whole batches: what
// layers/conv.cpp hands its work to when the layer does not use its own
// im2col + GEMM path. Implemented by Winograd (layers/winograd.cpp) and by
// oneDNN (layers/onednn_conv.cpp, when the build has it). Internal to layers/.
#include <cstdint>

namespace burstpool::cpu {

// Per-sample input (c, h, w) and output (oc, oh, ow), kernel, stride and zero padding.
struct ConvShape {
  int c, h, w;
  int oc, oh, ow;
  int kh, kw, sh, sw, ph, pw;
};

class ConvKernel {
 public:
  virtual ~ConvKernel() = default;
  // y = conv(x, weight) + bias (bias may be null), n samples, NCHW, weight (oc, c, kh, kw).
  virtual void forward(const float* x, const float* weight, const float* bias, float* y, int n) = 0;
  // dweight: overwritten; dx: overwritten or accumulated, null to skip. The
  // bias gradient is the layer's (a sum over dy, the same for every algorithm).
  virtual void backward(const float* x, const float* weight, const float* dy, float* dweight, float* dx,
                        bool accumulate, int n) = 0;
  // Peak bytes of the buffers forward and backward of n samples allocate,
  // and of those taken from scratch shared between layers (Layer::shared_buffer_bytes).
  virtual uint64_t buffer_bytes(int n, int threads) const = 0;
  virtual uint64_t shared_buffer_bytes(int /*n*/, int /*threads*/) const { return 0; }
};

}  // namespace burstpool::cpu
