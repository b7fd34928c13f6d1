#pragma once
// The one error path for CUDA, cuBLAS, cuDNN and NCCL calls: a failed call
// throws Error naming the call, the library's message and file:line.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include "burstpool/error.hpp"

namespace burstpool::cuda {

[[noreturn]] void fail(const char* library, const char* call, const char* message, const char* file, int line);
const char* cublas_message(cublasStatus_t status);

}  // namespace burstpool::cuda

// One shape for all four libraries: the status type, its success value and its message function differ.
#define BP_GPU_LIBRARY_CHECK_(library, call, ok, message)                                   \
  do {                                                                                      \
    const auto bp_status_ = (call);                                                         \
    if (bp_status_ != (ok)) ::burstpool::cuda::fail(library, #call, message(bp_status_), __FILE__, __LINE__); \
  } while (0)
#define BP_CUDA_CHECK(call) BP_GPU_LIBRARY_CHECK_("CUDA", call, cudaSuccess, cudaGetErrorString)
#define BP_CUBLAS_CHECK(call) \
  BP_GPU_LIBRARY_CHECK_("cuBLAS", call, CUBLAS_STATUS_SUCCESS, ::burstpool::cuda::cublas_message)
#define BP_CUDNN_CHECK(call) BP_GPU_LIBRARY_CHECK_("cuDNN", call, CUDNN_STATUS_SUCCESS, cudnnGetErrorString)
#define BP_NCCL_CHECK(call) BP_GPU_LIBRARY_CHECK_("NCCL", call, ncclSuccess, ncclGetErrorString)
