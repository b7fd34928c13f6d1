#pragma once
// One rank's GPU for one job: the device chosen by its local rank, a stream
// per role at the role's priority, cuBLAS and cuDNN handles on the job's work
// stream (the foreground's, or the background's for a background job), and
// the caching allocator for device memory. RAII throughout.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <map>
#include <memory>
#include <string>

#include "burstpool/allocator.hpp"
#include "burstpool/device.hpp"

namespace burstpool::cuda {

// An event of `device` that the host waits on (cudaEventSynchronize): it
// blocks the waiting thread when the device's threads are set to block, as a
// stream synchronisation does. cudaEventSynchronize busy-waits on an event
// made without cudaEventBlockingSync whatever the device's flags, so a
// background job's waits for its pieces would spin on a core the foreground
// needs. The caller destroys it.
cudaEvent_t host_wait_event(int device);
// Its flags for the device flags given (cudaGetDeviceFlags).
unsigned host_wait_event_flags(unsigned device_flags);

class Context {
 public:
  // `wait`: "block" or "spin" sets how the process's threads wait for this
  // GPU (cudaSetDeviceFlags, one setting per device); "" leaves it.
  explicit Context(int local_rank, StreamRole work = StreamRole::foreground, const std::string& wait = "");
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int device() const { return device_; }
  PriorityRange priorities() const { return range_; }
  cudaStream_t stream(StreamRole role) const { return streams_.at(role); }
  cudaStream_t work_stream() const { return stream(work_); }  // where the job's layers run
  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  CachingAllocator& allocator() { return *allocator_; }

 private:
  int device_ = 0;
  StreamRole work_;
  PriorityRange range_;
  std::map<StreamRole, cudaStream_t> streams_;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  std::unique_ptr<CachingAllocator> allocator_;
};

}  // namespace burstpool::cuda
