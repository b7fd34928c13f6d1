// Element-wise CUDA kernels (cuda/ops/kernels.hpp).
#include "cuda/ops/kernels.hpp"

#include "cuda/check.hpp"

namespace burstpool::cuda {
namespace {

constexpr int kThreads = 256;
int blocks_for(size_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

__global__ void relu_forward_kernel(const float* x, float* y, size_t n) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void relu_backward_kernel(const float* x, const float* dy, float* dx, size_t n, bool accumulate) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float g = x[i] > 0.0f ? dy[i] : 0.0f;
  dx[i] = accumulate ? dx[i] + g : g;
}

// As layers/bf16.hpp's bf16_round: a NaN stays a quiet NaN, the rest rounds
// to nearest even on the upper 16 bits (past the largest bf16: infinity).
__global__ void bf16_round_kernel(const float* from, float* to, size_t n) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const unsigned u = __float_as_uint(from[i]);
  const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  const unsigned rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  to[i] = __uint_as_float(nan ? (u | 0x00400000u) & 0xFFFF0000u : rounded);
}

__global__ void add_bias_rows_kernel(float* y, const float* bias, int rows, int cols) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < static_cast<size_t>(rows) * cols) y[i] += bias[i % cols];
}

// One thread per column: columns are few (a layer's outputs), rows the batch.
__global__ void sum_rows_kernel(const float* dy, float* out, int rows, int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
  for (int r = 0; r < rows; ++r) s += dy[static_cast<size_t>(r) * cols + c];
  out[c] = s;
}

}  // namespace

void relu_forward(const float* x, float* y, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  relu_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n);
  BP_CUDA_CHECK(cudaGetLastError());
}

void bf16_round(const float* from, float* to, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  bf16_round_kernel<<<blocks_for(n), kThreads, 0, stream>>>(from, to, n);
  BP_CUDA_CHECK(cudaGetLastError());
}

void relu_backward(const float* x, const float* dy, float* dx, size_t n, bool accumulate, cudaStream_t stream) {
  if (n == 0) return;
  relu_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, dy, dx, n, accumulate);
  BP_CUDA_CHECK(cudaGetLastError());
}

void add_bias_rows(float* y, const float* bias, int rows, int cols, cudaStream_t stream) {
  const size_t n = static_cast<size_t>(rows) * cols;
  if (n == 0) return;
  add_bias_rows_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, bias, rows, cols);
  BP_CUDA_CHECK(cudaGetLastError());
}

void sum_rows(const float* dy, float* out, int rows, int cols, cudaStream_t stream) {
  if (cols == 0) return;
  sum_rows_kernel<<<blocks_for(cols), kThreads, 0, stream>>>(dy, out, rows, cols);
  BP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace burstpool::cuda
