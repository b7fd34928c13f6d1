// cuBLAS matrix products and the linear layer on the GPU (kernels.hpp).
#include <cuda_runtime.h>

#include "cuda/check.hpp"
#include "cuda/ops/kernels.hpp"

namespace burstpool::cuda {

// cuBLAS is column-major: a row-major C = op(A) op(B) is the column-major
// C^T = op(B)^T op(A)^T, so the operands swap and the shapes transpose.
void set_gemm_precision(cublasHandle_t handle, bool tf32) {
  BP_CUBLAS_CHECK(cublasSetMathMode(handle, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH));
}

// The handle's math mode decides fp32 or TF32 (set_gemm_precision; the context sets fp32).
void gemm(cublasHandle_t handle, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  BP_CUBLAS_CHECK(cublasSgemm(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m,
                              k, &alpha, b, ldb, a, lda, &beta, c, ldc));
}

void linear_forward(cublasHandle_t handle, const float* x, const float* weight, const float* bias, float* y, int n,
                    int in, int out, cudaStream_t stream) {
  BP_CUBLAS_CHECK(cublasSetStream(handle, stream));
  gemm(handle, false, true, n, out, in, 1.0f, x, in, weight, in, 0.0f, y, out);  // y = x W^T
  if (bias) add_bias_rows(y, bias, n, out, stream);
}

void linear_backward(cublasHandle_t handle, const float* x, const float* weight, const float* dy, float* dweight,
                     float* dbias, float* dx, bool accumulate, int n, int in, int out, cudaStream_t stream) {
  BP_CUBLAS_CHECK(cublasSetStream(handle, stream));
  gemm(handle, true, false, out, in, n, 1.0f, dy, out, x, in, 0.0f, dweight, in);  // dW = dy^T x
  if (dbias) sum_rows(dy, dbias, n, out, stream);
  if (dx) gemm(handle, false, false, n, in, out, 1.0f, dy, out, weight, in, accumulate ? 1.0f : 0.0f, dx, in);
}

}  // namespace burstpool::cuda
