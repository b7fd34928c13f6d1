// CUDA kernels for the element-wise, merge, dropout, loss and batch-norm
// layers (cuda/ops/kernels.hpp). Each mirrors its CPU twin's arithmetic.
#include "cuda/ops/kernels.hpp"

#include "cuda/check.hpp"
#include "layers/random.hpp"

namespace burstpool::cuda {
namespace {

constexpr int kThreads = 256;
int blocks_for(size_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }
__device__ size_t global_index() { return blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; }
__device__ float combine(float old, float v, bool accumulate) { return accumulate ? old + v : v; }

using cpu::mix64;  // the CPU layers' counter-based randoms (layers/random.hpp), bit for bit
using cpu::uniform01;

__global__ void write_grad_kernel(float* dst, const float* src, size_t n, bool accumulate) {
  const size_t i = global_index();
  if (i < n) dst[i] = combine(dst[i], src[i], accumulate);
}

// One block per plane: a block-wide sum of hw values.
__global__ void global_avgpool_forward_kernel(const float* x, float* y, int hw) {
  __shared__ float part[kThreads];
  const float* plane = x + static_cast<size_t>(blockIdx.x) * hw;
  float s = 0.0f;
  for (int i = threadIdx.x; i < hw; i += blockDim.x) s += plane[i];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[blockIdx.x] = part[0] / hw;
}

__global__ void global_avgpool_backward_kernel(const float* dy, float* dx, size_t planes, int hw, bool accumulate) {
  const size_t i = global_index();
  if (i < planes * hw) dx[i] = combine(dx[i], dy[i / hw] / hw, accumulate);
}

__global__ void dropout_kernel(const float* x, float* y, int n, size_t per, float p, const uint64_t* base,
                               int64_t sample_offset, bool accumulate) {
  const size_t i = global_index();
  if (i >= per * n) return;
  const size_t s = i / per, e = i % per;
  const uint64_t sample_key = mix64(*base + static_cast<uint64_t>(sample_offset + static_cast<int64_t>(s)));
  const float m = uniform01(sample_key + e) >= p ? 1.0f / (1.0f - p) : 0.0f;
  y[i] = combine(y[i], x[i] * m, accumulate);
}

__global__ void concat_kernel(const float* src, float* dst, int n, size_t per, size_t offset, size_t out_per,
                              bool forward, bool accumulate) {
  const size_t i = global_index();
  if (i >= per * n) return;
  const size_t s = i / per, e = i % per, j = s * out_per + offset + e;
  if (forward)
    dst[j] = src[i];
  else
    dst[i] = combine(dst[i], src[j], accumulate);
}

// One thread per sample; classes are few. loss_part[s] = log(sum) - (z_label - max).
__global__ void softmax_xent_kernel(const float* z, const int32_t* labels, float* prob, double* loss_part, int n,
                                    int k) {
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= n) return;
  const float* row = z + static_cast<size_t>(s) * k;
  float* p = prob + static_cast<size_t>(s) * k;
  float mx = row[0];
  for (int j = 1; j < k; ++j) mx = fmaxf(mx, row[j]);
  double sum = 0.0;
  for (int j = 0; j < k; ++j) sum += (p[j] = expf(row[j] - mx));
  const float inv = static_cast<float>(1.0 / sum);
  for (int j = 0; j < k; ++j) p[j] *= inv;
  loss_part[s] = log(sum) - (row[labels[s]] - mx);
}

// Sums the per-sample losses in sample order (as the CPU does) on one thread.
__global__ void loss_total_kernel(const double* loss_part, int n, double scale, float* loss) {
  double total = 0.0;
  for (int s = 0; s < n; ++s) total += loss_part[s];
  loss[0] = static_cast<float>(total * scale);
}

__global__ void softmax_xent_backward_kernel(const float* prob, const int32_t* labels, float scale, float* dz, int n,
                                             int k, bool accumulate) {
  const size_t i = global_index();
  if (i >= static_cast<size_t>(n) * k) return;
  const int s = static_cast<int>(i / k), j = static_cast<int>(i % k);
  dz[i] = combine(dz[i], (prob[i] - (j == labels[s] ? 1.0f : 0.0f)) * scale, accumulate);
}

// One block per channel: the sums of a(i, ch) and b(i, ch) over every
// element of that channel in every sample, in double, written to out[ch] and
// out[c + ch]. Each thread takes a fixed stride of the elements and a fixed
// tree adds the threads' sums, so the same input gives the same bits on every
// run (no atomics): training runs repeat exactly, as on the CPU.
template <class A, class B>
__device__ void channel_sums(int n, int c, int hw, double* out, A a, B b) {
  __shared__ double s1[kThreads], s2[kThreads];
  const int ch = blockIdx.x;
  const size_t per_channel = static_cast<size_t>(n) * hw;
  double v1 = 0.0, v2 = 0.0;
  for (size_t k = threadIdx.x; k < per_channel; k += blockDim.x) {
    const size_t i = (k / hw * c + ch) * hw + k % hw;  // sample k / hw, position k % hw
    v1 += a(i, ch);
    v2 += b(i, ch);
  }
  s1[threadIdx.x] = v1;
  s2[threadIdx.x] = v2;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) s1[threadIdx.x] += s1[threadIdx.x + w], s2[threadIdx.x] += s2[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    out[ch] = s1[0];
    out[c + ch] = s2[0];
  }
}

__global__ void bn_forward_sums_kernel(const float* x, int n, int c, int hw, double* sums) {
  channel_sums(
      n, c, hw, sums, [x](size_t i, int) { return static_cast<double>(x[i]); },
      [x](size_t i, int) { return static_cast<double>(x[i]) * x[i]; });
}

__global__ void bn_backward_sums_kernel(const float* x, const float* dy, const float* mean, const float* invstd, int n,
                                        int c, int hw, double* sums) {
  channel_sums(
      n, c, hw, sums, [dy](size_t i, int) { return static_cast<double>(dy[i]); },
      [=](size_t i, int ch) { return static_cast<double>(dy[i] * (x[i] - mean[ch]) * invstd[ch]); });
}

__global__ void set_count_kernel(double* sums, int c, double count) { sums[2 * c] = count; }

__global__ void bn_forward_finish_kernel(const double* sums, int c, float eps, float momentum, float* rmean,
                                         float* rvar, float* mean, float* invstd) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  const double m = sums[2 * c];
  const double mu = sums[ch] / m;
  const double var = fmax(0.0, sums[c + ch] / m - mu * mu);
  mean[ch] = static_cast<float>(mu);
  invstd[ch] = static_cast<float>(1.0 / sqrt(var + eps));
  const double unbiased = m > 1 ? var * m / (m - 1) : var;
  rmean[ch] = static_cast<float>((1 - momentum) * rmean[ch] + momentum * mu);
  rvar[ch] = static_cast<float>((1 - momentum) * rvar[ch] + momentum * unbiased);
}

__global__ void bn_eval_stats_kernel(const float* rmean, const float* rvar, int c, float eps, float* mean,
                                     float* invstd) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  mean[ch] = rmean[ch];
  invstd[ch] = 1.0f / sqrtf(rvar[ch] + eps);
}

__global__ void bn_apply_kernel(const float* x, const float* gamma, const float* beta, const float* mean,
                                const float* invstd, float* y, size_t total, int c, int hw) {
  const size_t i = global_index();
  if (i >= total) return;
  const int ch = static_cast<int>(i / hw % c);
  const float a = gamma[ch] * invstd[ch], b = beta[ch] - mean[ch] * a;
  y[i] = x[i] * a + b;
}

__global__ void bn_param_grads_kernel(const double* sums, int c, float* dgamma, float* dbeta) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  dbeta[ch] = static_cast<float>(sums[ch]);
  dgamma[ch] = static_cast<float>(sums[c + ch]);
}

__global__ void bn_backward_dx_kernel(const float* x, const float* dy, const float* gamma, const float* mean,
                                      const float* invstd, const double* sums, bool training, float* dx,
                                      bool accumulate, size_t total, int c, int hw) {
  const size_t i = global_index();
  if (i >= total) return;
  const int ch = static_cast<int>(i / hw % c);
  const double g = gamma[ch] * invstd[ch];
  float a = static_cast<float>(g), b = 0.0f, k = 0.0f;
  if (training) {
    const double m = sums[2 * c];
    b = static_cast<float>(-g * sums[c + ch] / m);
    k = static_cast<float>(-g * sums[ch] / m);
  }
  dx[i] = combine(dx[i], a * dy[i] + b * (x[i] - mean[ch]) * invstd[ch] + k, accumulate);
}

void check_launch() { BP_CUDA_CHECK(cudaGetLastError()); }

}  // namespace

void write_grad(float* dst, const float* src, size_t n, bool accumulate, cudaStream_t stream) {
  if (n == 0) return;
  write_grad_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dst, src, n, accumulate);
  check_launch();
}

void global_avgpool_forward(const float* x, float* y, size_t planes, int hw, cudaStream_t stream) {
  if (planes == 0) return;
  global_avgpool_forward_kernel<<<static_cast<unsigned>(planes), kThreads, 0, stream>>>(x, y, hw);
  check_launch();
}

void global_avgpool_backward(const float* dy, float* dx, size_t planes, int hw, bool accumulate, cudaStream_t stream) {
  if (planes == 0) return;
  global_avgpool_backward_kernel<<<blocks_for(planes * hw), kThreads, 0, stream>>>(dy, dx, planes, hw, accumulate);
  check_launch();
}

void dropout_apply(const float* x, float* y, int n, size_t per, float p, const uint64_t* base,
                   int64_t sample_offset, bool accumulate, cudaStream_t stream) {
  if (n == 0) return;
  dropout_kernel<<<blocks_for(per * n), kThreads, 0, stream>>>(x, y, n, per, p, base, sample_offset, accumulate);
  check_launch();
}

void concat_forward_part(const float* x, float* y, int n, size_t per, size_t offset, size_t out_per,
                         cudaStream_t stream) {
  if (n == 0) return;
  concat_kernel<<<blocks_for(per * n), kThreads, 0, stream>>>(x, y, n, per, offset, out_per, true, false);
  check_launch();
}

void concat_backward_part(const float* dy, float* dx, int n, size_t per, size_t offset, size_t out_per,
                          bool accumulate, cudaStream_t stream) {
  if (n == 0) return;
  concat_kernel<<<blocks_for(per * n), kThreads, 0, stream>>>(dy, dx, n, per, offset, out_per, false, accumulate);
  check_launch();
}

void softmax_xent_forward(const float* z, const int32_t* labels, float* prob, float* loss, double* parts, int n,
                          int k, double loss_scale, cudaStream_t stream) {
  if (n > 0) softmax_xent_kernel<<<blocks_for(n), kThreads, 0, stream>>>(z, labels, prob, parts, n, k);
  loss_total_kernel<<<1, 1, 0, stream>>>(parts, n, loss_scale, loss);
  check_launch();
}

void softmax_xent_backward(const float* prob, const int32_t* labels, float scale, float* dz, int n, int k,
                           bool accumulate, cudaStream_t stream) {
  if (n == 0) return;
  softmax_xent_backward_kernel<<<blocks_for(static_cast<size_t>(n) * k), kThreads, 0, stream>>>(prob, labels, scale,
                                                                                                  dz, n, k, accumulate);
  check_launch();
}

void bn_forward_sums(const float* x, int n, int c, int hw, double* sums, cudaStream_t stream) {
  bn_forward_sums_kernel<<<c, kThreads, 0, stream>>>(x, n, c, hw, sums);  // zeros when n == 0
  set_count_kernel<<<1, 1, 0, stream>>>(sums, c, static_cast<double>(n) * hw);
  check_launch();
}

void bn_forward_finish(const double* sums, int c, float eps, float momentum, float* running_mean, float* running_var,
                       float* mean, float* invstd, cudaStream_t stream) {
  bn_forward_finish_kernel<<<blocks_for(c), kThreads, 0, stream>>>(sums, c, eps, momentum, running_mean, running_var,
                                                                    mean, invstd);
  check_launch();
}

void bn_eval_stats(const float* running_mean, const float* running_var, int c, float eps, float* mean, float* invstd,
                   cudaStream_t stream) {
  bn_eval_stats_kernel<<<blocks_for(c), kThreads, 0, stream>>>(running_mean, running_var, c, eps, mean, invstd);
  check_launch();
}

void bn_apply(const float* x, const float* gamma, const float* beta, const float* mean, const float* invstd, float* y,
              int n, int c, int hw, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(n) * c * hw;
  if (total == 0) return;
  bn_apply_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, gamma, beta, mean, invstd, y, total, c, hw);
  check_launch();
}

void bn_backward_sums(const float* x, const float* dy, const float* mean, const float* invstd, int n, int c, int hw,
                      double* sums, float* dgamma, float* dbeta, cudaStream_t stream) {
  bn_backward_sums_kernel<<<c, kThreads, 0, stream>>>(x, dy, mean, invstd, n, c, hw, sums);  // zeros when n == 0
  set_count_kernel<<<1, 1, 0, stream>>>(sums, c, static_cast<double>(n) * hw);
  bn_param_grads_kernel<<<blocks_for(c), kThreads, 0, stream>>>(sums, c, dgamma, dbeta);
  check_launch();
}

void bn_backward_dx(const float* x, const float* dy, const float* gamma, const float* mean, const float* invstd,
                    const double* sums, bool training, float* dx, bool accumulate, int n, int c, int hw,
                    cudaStream_t stream) {
  const size_t total = static_cast<size_t>(n) * c * hw;
  if (total == 0) return;
  bn_backward_dx_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, dy, gamma, mean, invstd, sums, training, dx,
                                                                     accumulate, total, c, hw);
  check_launch();
}

}  // namespace burstpool::cuda
