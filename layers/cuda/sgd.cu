// The optimizer updates on the device: SGD, the PyTorch rule of Sgd::step
// (src/optimizer.cpp), and an SMA learner's step (src/sma.cpp).
#include <cuda_runtime.h>

#include <cstddef>

#include "../../src/cuda/check.hpp"

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

// sma_learner_step (src/sma.cpp) per element; delta is overwritten with c_j.
__global__ void sma_kernel(float* w, float* u, const float* g, const float* z, float* delta, size_t n, float lr,
                           float mu, float alpha, float wd) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float grad = g[i] + wd * w[i];
  const float vel = -lr * grad + mu * u[i];
  u[i] = vel;
  const float c = alpha * (w[i] - z[i]);
  w[i] = w[i] + vel - c;
  delta[i] = c;
}

}  // namespace

void sma_kernel_launch(float* w, float* u, const float* g, const float* z, float* delta, size_t n, float lr, float mu,
                       float alpha, float wd, cudaStream_t stream) {
  if (n == 0) return;
  sma_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(w, u, g, z, delta, n, lr, mu, alpha, wd);
  BP_CUDA_CHECK(cudaGetLastError());
}

void sgd_kernel_launch(float* w, const float* g, float* v, size_t n, float lr, float mu, float wd, bool nesterov,
                       cudaStream_t stream) {
  if (n == 0) return;
  sgd_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(w, g, v, n, lr, mu, wd, nesterov);
  BP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace burstpool::cuda
