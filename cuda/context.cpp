#include "cuda/context.hpp"

#include <nccl.h>

#include "burstpool/version.hpp"
#include "cuda/check.hpp"

namespace burstpool {

bool cuda_built() { return true; }

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;  // no driver or no device: no GPU
  return count;
}

nlohmann::json cuda_info() {
  const auto dotted = [](int v) { return fmt::format("{}.{}", v / 1000, v % 1000 / 10); };
  int runtime = 0, driver = 0, nccl = 0;
  cudaRuntimeGetVersion(&runtime);
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  ncclGetVersion(&nccl);
  const size_t cudnn = cudnnGetVersion();  // major * 10000 + minor * 100 + patch, as NCCL's since 2.9
  return {{"built", true},
          {"runtime", dotted(runtime)},
          {"driver", driver ? dotted(driver) : std::string("none")},
          {"gpus", cuda_device_count()},
          {"cudnn", fmt::format("{}.{}.{}", cudnn / 10000, cudnn / 100 % 100, cudnn % 100)},
          {"nccl", fmt::format("{}.{}.{}", nccl / 10000, nccl / 100 % 100, nccl % 100)}};
}

unsigned long long cuda_free_bytes(int local_rank) {
  const int count = cuda_device_count();
  size_t free = 0, total = 0;
  if (count == 0 || cudaSetDevice(choose_device(local_rank, count)) != cudaSuccess ||
      cudaMemGetInfo(&free, &total) != cudaSuccess)
    return 0;
  return free;
}

namespace cuda {

void fail(const char* library, const char* call, const char* message, const char* file, int line) {
  throw Error(fmt::format("{} call failed: {}: {} ({}:{})", library, call, message, file, line));
}

const char* cublas_message(cublasStatus_t status) { return cublasGetStatusString(status); }

Context::Context(int local_rank, StreamRole work, const std::string& wait) : work_(work) {
  device_ = choose_device(local_rank, cuda_device_count());
  BP_CUDA_CHECK(cudaSetDevice(device_));
  // Since CUDA 11 this may follow the device's initialisation (the memory
  // check's cudaMemGetInfo): the flags are overwritten.
  if (!wait.empty())
    BP_CUDA_CHECK(cudaSetDeviceFlags(wait == "block" ? cudaDeviceScheduleBlockingSync : cudaDeviceScheduleSpin));
  BP_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&range_.least, &range_.greatest));
  for (StreamRole role : {StreamRole::foreground, StreamRole::gradient_sync, StreamRole::background}) {
    cudaStream_t s;
    BP_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, stream_priority(role, range_)));
    streams_[role] = s;
  }
  BP_CUBLAS_CHECK(cublasCreate(&cublas_));
  BP_CUBLAS_CHECK(cublasSetStream(cublas_, streams_[work_]));
  BP_CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_PEDANTIC_MATH));  // fp32 until a model asks for TF32 (set_gemm_precision)
  BP_CUDNN_CHECK(cudnnCreate(&cudnn_));
  BP_CUDNN_CHECK(cudnnSetStream(cudnn_, streams_[work_]));
  allocator_ = std::make_unique<CachingAllocator>(
      [](size_t bytes) -> void* {
        void* p = nullptr;
        if (cudaMalloc(&p, bytes) == cudaSuccess) return p;
        // A failed call is also the thread's "last error" until read, and
        // the launch checks read it (cudaGetLastError): the allocator
        // retries after releasing its cache, so clear it here, or the next
        // kernel launch would report this handled failure as its own.
        cudaGetLastError();
        return nullptr;
      },
      [](void* p) { cudaFree(p); });
}

// cudaEventBlockingSync when the device's schedule is blocking: the flag
// read when the event is made (a background job's context leaves the
// schedule to the foreground's, made first).
unsigned host_wait_event_flags(unsigned device_flags) {
  const bool block = (device_flags & cudaDeviceScheduleMask) == cudaDeviceScheduleBlockingSync;
  return cudaEventDisableTiming | (block ? cudaEventBlockingSync : 0u);
}

cudaEvent_t host_wait_event(int device) {
  BP_CUDA_CHECK(cudaSetDevice(device));
  unsigned flags = 0;
  BP_CUDA_CHECK(cudaGetDeviceFlags(&flags));
  cudaEvent_t e = nullptr;
  BP_CUDA_CHECK(cudaEventCreateWithFlags(&e, host_wait_event_flags(flags)));
  return e;
}

Context::~Context() {
  allocator_.reset();
  if (cudnn_) cudnnDestroy(cudnn_);
  if (cublas_) cublasDestroy(cublas_);
  for (auto& [role, s] : streams_) cudaStreamDestroy(s);
}

}  // namespace cuda
}  // namespace burstpool
