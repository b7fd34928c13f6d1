#include "burstpool/device.hpp"

#include "burstpool/error.hpp"
#include "burstpool/version.hpp"
#include "burstpool/executor.hpp"

namespace burstpool {

int choose_device(int local_rank, int device_count) {
  if (device_count < 1)
    throw Error(cuda_built() ? "no GPU is visible to this process (check CUDA_VISIBLE_DEVICES and the job's GPU "
                               "request, e.g. --gpus-per-task=1)"
                             : "this build has no CUDA backend (the CUDA toolkit was not found, or -DBURSTPOOL_CUDA=OFF)");
  BP_CHECK(local_rank >= 0, "negative local rank {}", local_rank);
  return local_rank % device_count;
}

int stream_priority(StreamRole role, PriorityRange range) {
  switch (role) {
    case StreamRole::foreground:
    case StreamRole::gradient_sync:
      return range.greatest;
    case StreamRole::background:
      return range.least;
  }
  return range.least;
}

std::string to_string(StreamRole role) {
  switch (role) {
    case StreamRole::foreground: return "foreground";
    case StreamRole::gradient_sync: return "gradient sync";
    case StreamRole::background: return "background";
  }
  return "?";
}

std::unique_ptr<DeviceModel> make_device_model(const std::string& device, Model& model, int local_rank,
                                               const CudaOptions& options) {
  if (device == "cpu") return nullptr;
  if (device == "twin") return make_twin_model(model);
  if (device == "cuda") return make_cuda_model(model, local_rank, options);
  throw Error(fmt::format("unknown device '{}' (cpu, cuda or twin)", device));
}

#ifndef BURSTPOOL_HAVE_CUDA
bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
unsigned long long cuda_free_bytes(int) { return 0; }
nlohmann::json cuda_info() { return {{"built", false}}; }
std::unique_ptr<DeviceModel> make_cuda_model(Model&, int, const CudaOptions&) {
  choose_device(0, 0);  // throws: no CUDA backend in this build
  return nullptr;
}
#endif

}  // namespace burstpool
