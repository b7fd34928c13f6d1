#pragma once
// The first CUDA layers (issue #7, in progress): matrix products through
// cuBLAS with the same row-major contract as cpu::gemm, and element-wise
// kernels. Pointers are device memory; work goes on `stream`. fp32 throughout
// (the cuBLAS handle is kept off TF32 by cuda::gemm), so results can be
// compared with the CPU layers.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace burstpool::cuda {

// Row-major C[m x n] = alpha op(A)[m x k] op(B)[k x n] + beta C, as cpu::gemm.
void gemm(cublasHandle_t handle, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc);

// y[i] = max(x[i], 0); dx[i] = dy[i] where x[i] > 0 (accumulate: dx +=).
void relu_forward(const float* x, float* y, size_t n, cudaStream_t stream);
void relu_backward(const float* x, const float* dy, float* dx, size_t n, bool accumulate, cudaStream_t stream);

// Rows of a [rows x cols] matrix get `bias` (cols) added / its column sums.
void add_bias_rows(float* y, const float* bias, int rows, int cols, cudaStream_t stream);
void sum_rows(const float* dy, float* bias_grad, int rows, int cols, cudaStream_t stream);

// Linear layer (weight [out x in], bias [out]) on n samples, as layers/linear.cpp.
void linear_forward(cublasHandle_t handle, const float* x, const float* weight, const float* bias, float* y, int n,
                    int in, int out, cudaStream_t stream);
// Parameter gradients are overwritten; dx (may be null) overwritten or accumulated.
void linear_backward(cublasHandle_t handle, const float* x, const float* weight, const float* dy, float* dweight,
                     float* dbias, float* dx, bool accumulate, int n, int in, int out, cudaStream_t stream);

}  // namespace burstpool::cuda
