// The one place a job's `[job] device` name becomes a device object.
#include "burstpool/device_model.hpp"
#include "burstpool/error.hpp"

namespace burstpool {

std::unique_ptr<DeviceModel> make_device_model(const std::string& device, Model& model, int local_rank,
                                               const CudaOptions& options) {
  if (device == "cpu") return nullptr;
  if (device == "twin") return make_twin_model(model);
  if (device == "cuda") return make_cuda_model(model, local_rank, options);
  throw Error(fmt::format("unknown device '{}' (cpu, cuda or twin)", device));
}

}  // namespace burstpool
