#pragma once
// CUDA versions of the layers (docs/cuda.md): the
// same math and layouts as the CPU layers in layers/*.cpp (NCHW, samples
// contiguous), so each is tested against its CPU twin. Pointers are device
// memory; work goes on `stream`. fp32 throughout (cuBLAS kept off TF32),
// statistics in double like the CPU code. "accumulate" means dx += instead
// of dx = (the CPU layers' GradSlot contract).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "burstpool/algorithm_cache.hpp"

namespace burstpool::cuda {

// Row-major C[m x n] = alpha op(A)[m x k] op(B)[k x n] + beta C, as cpu::gemm.
void gemm(cublasHandle_t handle, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc);

// y[i] = max(x[i], 0); dx[i] = dy[i] where x[i] > 0 (accumulate: dx +=).
void relu_forward(const float* x, float* y, size_t n, cudaStream_t stream);
void relu_backward(const float* x, const float* dy, float* dx, size_t n, bool accumulate, cudaStream_t stream);

// to[i] = from[i] rounded to the nearest bfloat16, ties to even, kept as a
// float (layers/bf16.hpp's bf16_round, bit for bit); from == to rounds in place.
void bf16_round(const float* from, float* to, size_t n, cudaStream_t stream);

// Rows of a [rows x cols] matrix get `bias` (cols) added / its column sums.
void add_bias_rows(float* y, const float* bias, int rows, int cols, cudaStream_t stream);
void sum_rows(const float* dy, float* bias_grad, int rows, int cols, cudaStream_t stream);

// How a handle's fp32 products are computed ([job] precision): fp32 exactly
// (CUBLAS_PEDANTIC_MATH), or with their inputs rounded to TF32 (10-bit
// mantissa) on the tensor cores and sums kept in fp32.
void set_gemm_precision(cublasHandle_t handle, bool tf32);

// Linear layer (weight [out x in], bias [out]) on n samples, as layers/linear.cpp.
void linear_forward(cublasHandle_t handle, const float* x, const float* weight, const float* bias, float* y, int n,
                    int in, int out, cudaStream_t stream);
// Parameter gradients are overwritten; dx (may be null) overwritten or accumulated.
void linear_backward(cublasHandle_t handle, const float* x, const float* weight, const float* dy, float* dweight,
                     float* dbias, float* dx, bool accumulate, int n, int in, int out, cudaStream_t stream);

}  // namespace burstpool::cuda
namespace burstpool {
class CachingAllocator;  // cuDNN workspaces come from it
}
namespace burstpool::cuda {

// Convolution and pooling through cuDNN, NCHW fp32 (FMA math: no TF32), with
// the CPU layers' geometry (layers/conv.cpp, layers/pool.cpp: average
// pooling divides by the full window, padding included).
struct Geometry2d {
  int n = 0, c = 0, h = 0, w = 0;  // input
  int oc = 0;                      // output channels (convolution; pooling keeps c)
  int kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  int oh() const { return (h + 2 * ph - kh) / sh + 1; }
  size_t weights() const { return static_cast<size_t>(oc) * c * kh * kw; }  // convolution weight count
  int ow() const { return (w + 2 * pw - kw) / sw + 1; }
};

// How a convolution's algorithms are chosen, once per shape ([job]
// cudnn_algorithms). All take deterministic algorithms only, where cuDNN has
// one, so each step's sums are the same bits on every run of that algorithm.
// FFT and Winograd algorithms transform the data and round more than direct
// sums: on an H200, cuDNN's Winograd weight gradient of LeNet-5's first 5x5
// convolution at batch 32 was 1.4e-4 (relative) from the CPU's.
enum class ConvAlgorithms {
  heuristic,  // cuDNN's heuristic ranking: the same choice on every run, so runs repeat bit for bit
  measured,   // each candidate timed once (cudnnFind*, as PyTorch's cudnn.benchmark): faster, but the
              // choice can change from run to run with the timings, and the bits with it
  gemm,       // cuDNN's heuristic ranking of the algorithms that sum products directly (implicit GEMM,
              // GEMM, direct): within float rounding of the CPU's results, slower
};

// By [job] cudnn_algorithms' name; throws Error for another name.
ConvAlgorithms conv_algorithms(const std::string& name);

class CudnnConv {
 public:
  // Chooses the forward, backward-data and backward-filter algorithms for this
  // shape; tf32: cuDNN may round the inputs to TF32 (CUDNN_DEFAULT_MATH), else
  // fp32 only (CUDNN_FMA_MATH).
  // With `cache` and measured algorithms, a choice cached for this shape
  // and precision is used as it is, and a new one is measured and cached.
  CudnnConv(cudnnHandle_t handle, const Geometry2d& g, ConvAlgorithms how = ConvAlgorithms::heuristic,
            bool tf32 = false, AlgorithmCache* cache = nullptr);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;
  // weight [oc, c, kh, kw], bias [oc] (may be null).
  void forward(const float* x, const float* weight, const float* bias, float* y, burstpool::CachingAllocator& memory,
               cudaStream_t stream);
  // dweight, dbias overwritten; dx (may be null) overwritten or accumulated.
  void backward(const float* x, const float* weight, const float* dy, float* dweight, float* dbias, float* dx,
                bool accumulate, burstpool::CachingAllocator& memory, cudaStream_t stream);
  // The chosen algorithms and their math types, as "forward
  // IMPLICIT_PRECOMP_GEMM (fma), data ALGO_1 (fma), filter ALGO_1 (fma)".
  std::string algorithms() const;

 private:
  void describe_and_choose(const Geometry2d& g, ConvAlgorithms how, bool tf32, AlgorithmCache* cache);
  void choose(bool measured, bool direct);  // ranks the candidates and picks
  void release();                           // the descriptors made so far
  void use_math(int direction);             // 0 forward, 1 backward data, 2 backward filter

  cudnnHandle_t handle_;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr, bias_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_{};
  // The math type of each direction's algorithm as cuDNN ranked it (forward,
  // data, filter): the descriptor's own is only what the ranking may use.
  cudnnMathType_t math_[3] = {CUDNN_FMA_MATH, CUDNN_FMA_MATH, CUDNN_FMA_MATH};
};

class CudnnPool {
 public:
  CudnnPool(cudnnHandle_t handle, const Geometry2d& g, bool max);
  ~CudnnPool();
  CudnnPool(const CudnnPool&) = delete;
  CudnnPool& operator=(const CudnnPool&) = delete;
  void forward(const float* x, float* y, cudaStream_t stream);
  void backward(const float* x, const float* y, const float* dy, float* dx, bool accumulate, cudaStream_t stream);

 private:
  cudnnHandle_t handle_;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnPoolingDescriptor_t pool_ = nullptr;
};

// Copies (accumulate: adds) n floats.
void write_grad(float* dst, const float* src, size_t n, bool accumulate, cudaStream_t stream);

// Global average pooling: planes of hw values -> one value each.
void global_avgpool_forward(const float* x, float* y, size_t planes, int hw, cudaStream_t stream);
void global_avgpool_backward(const float* dy, float* dx, size_t planes, int hw, bool accumulate, cudaStream_t stream);

// Dropout with the CPU layer's counter-based mask: `*base` (device memory,
// so a captured CUDA graph reads each step's value) is the layer's key for
// this step (cpu::dropout_step_key, layers/random.hpp), and sample s's
// elements use mix64(base + sample_offset + s) + e. Forward and backward
// apply the same mask.
void dropout_apply(const float* x, float* y, int n, size_t per_sample, float p, const uint64_t* base,
                   int64_t sample_offset, bool accumulate, cudaStream_t stream);

// Concatenation along channels of per-sample blocks: input i (per_i floats a
// sample) lands at offset_i of each output sample (out_per floats).
void concat_forward_part(const float* x, float* y, int n, size_t per, size_t offset, size_t out_per,
                         cudaStream_t stream);
void concat_backward_part(const float* dy, float* dx, int n, size_t per, size_t offset, size_t out_per,
                          bool accumulate, cudaStream_t stream);

// Softmax cross-entropy (layers/loss.cpp). Forward writes the probabilities
// (n x k) and the scalar loss sum * loss_scale to loss[0]; labels are device
// int32; `parts` is the caller's device scratch of n doubles (the per-sample
// losses, summed in a fixed order). Allocating it here from the stream-ordered
// pool (cudaMallocAsync) would let the pool reuse a block freed on another
// stream and make this one wait for it: the foreground for a background job.
// Backward: dz = (p - onehot) * dloss * loss_scale.
void softmax_xent_forward(const float* z, const int32_t* labels, float* prob, float* loss, double* parts, int n,
                          int k, double loss_scale, cudaStream_t stream);
void softmax_xent_backward(const float* prob, const int32_t* labels, float dloss_times_scale, float* dz, int n, int k,
                           bool accumulate, cudaStream_t stream);

// Batch norm (layers/norm.cpp), in steps so that the statistics can be summed
// over a layer's rank group between them (as Context::sum_over_group does):
//   sums = [sum x | sum x^2 | count] per channel      (bn_forward_sums)
//   [allreduce sums over the group]
//   mean, invstd, running stats from sums             (bn_forward_finish), or from running stats (bn_eval_stats)
//   y = gamma (x - mean) invstd + beta                (bn_apply)
// Backward: bn_backward_sums gives [sum dy | sum dy x_hat | count] and the
// local dgamma, dbeta; after the group allreduce, bn_backward_dx.
void bn_forward_sums(const float* x, int n, int c, int hw, double* sums, cudaStream_t stream);
void bn_forward_finish(const double* sums, int c, float eps, float momentum, float* running_mean, float* running_var,
                       float* mean, float* invstd, cudaStream_t stream);
void bn_eval_stats(const float* running_mean, const float* running_var, int c, float eps, float* mean, float* invstd,
                   cudaStream_t stream);
void bn_apply(const float* x, const float* gamma, const float* beta, const float* mean, const float* invstd, float* y,
              int n, int c, int hw, cudaStream_t stream);
void bn_backward_sums(const float* x, const float* dy, const float* mean, const float* invstd, int n, int c, int hw,
                      double* sums, float* dgamma, float* dbeta, cudaStream_t stream);
void bn_backward_dx(const float* x, const float* dy, const float* gamma, const float* mean, const float* invstd,
                    const double* sums, bool training, float* dx, bool accumulate, int n, int c, int hw,
                    cudaStream_t stream);

}  // namespace burstpool::cuda
