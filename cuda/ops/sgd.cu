// The optimizer updates on the device: SGD, the PyTorch rule of Sgd::step
// (src/model/optimizer.cpp), and y = a x + b y, the piece sync strategies build
// their updates from (DeviceModel::axpby).
#include <cuda_runtime.h>

#include <cstddef>

#include "cuda/check.hpp"

namespace burstpool::cuda {
namespace {

__global__ void sgd_kernel(float* w, const float* g, float* v, size_t n, float lr, float mu, float wd, bool nesterov) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float grad = g[i] + wd * w[i];
  const float vel = mu * v[i] + grad;
  v[i] = vel;
  w[i] -= lr * (nesterov ? grad + mu * vel : vel);
}

// b == 0: y is only written (BLAS's beta = 0). Rounded multiplies and adds,
// never fused: the same float operations as the host's pieces, so that a
// strategy's state kept on the GPU stays bit for bit the host's copy.
__global__ void axpby_kernel(float a, const float* x, float b, float* y, size_t n) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  y[i] = b == 0.0f ? __fmul_rn(a, x[i]) : __fadd_rn(__fmul_rn(a, x[i]), __fmul_rn(b, y[i]));
}

}  // namespace

void axpby_kernel_launch(float a, const float* x, float b, float* y, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  axpby_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(a, x, b, y, n);
  BP_CUDA_CHECK(cudaGetLastError());
}

void sgd_kernel_launch(float* w, const float* g, float* v, size_t n, float lr, float mu, float wd, bool nesterov,
                       cudaStream_t stream) {
  if (n == 0) return;
  sgd_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(w, g, v, n, lr, mu, wd, nesterov);
  BP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace burstpool::cuda
