#pragma once
// The CPU as a device: a DeviceModel whose buffers are the host Model's own
// and the executor's slot buffers, so that the executor drives the CPU, the
// twin and a GPU through one interface. Its layers are the Model's CPU
// layers; copies between "device" and host are no-ops (the same memory);
// its transport is MPI over host memory. It runs layer by layer only
// (whole_model() is false): a data-parallel plan on the CPU takes the
// executor's per-layer path, whose gradient buckets are summed while the
// backward pass goes on.
#include <memory>
#include <vector>

#include "burstpool/device_model.hpp"
#include "burstpool/executor.hpp"

namespace burstpool {

// `model` and `slots` must outlive the device.
std::unique_ptr<DeviceModel> make_host_device(Model& model, SlotBuffers& slots);

}  // namespace burstpool
