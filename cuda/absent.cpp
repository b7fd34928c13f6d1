// The CUDA backend's entry points in a build without it (no toolkit, or
// -DBURSTPOOL_CUDA=OFF): they report no GPU, and asking for one is a clear
// error. CMake compiles this file instead of the backend's sources.
#include "burstpool/device.hpp"
#include "burstpool/device_model.hpp"
#include "burstpool/version.hpp"

namespace burstpool {

bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
unsigned long long cuda_free_bytes(int) { return 0; }
nlohmann::json cuda_info() { return {{"built", false}}; }
std::unique_ptr<DeviceModel> make_cuda_model(Model&, int, const CudaOptions&) {
  choose_device(0, 0);  // throws: no CUDA backend in this build
  return nullptr;
}

}  // namespace burstpool
