#pragma once
// The average model kept on a device (sma_device_load_average, then
// sma_device_resident_step and sma_device_average_step each iteration)
// stays bit for bit the host's AverageModel, with the learner's parameters,
// u_j and c_j as the host step gives them; and, where the device counts its
// copies (the twin), per iteration only c_j comes back and Delta goes up:
// neither z nor the parameters cross. Shared by the unit tests (twin) and
// the CUDA tests (GPU), which feed the same gradients to both sides.
#include <gtest/gtest.h>

#include <vector>

#include "burstpool/device_model.hpp"
#include "burstpool/model.hpp"
#include "burstpool/sma.hpp"

namespace burstpool {

inline const char* kResidentModel = R"(
[data]
type = input
shape = 4
[fc]
type = linear
inputs = data
out_features = 3
[loss]
type = softmax_cross_entropy
inputs = fc
)";

inline void expect_resident_average_is_the_hosts(DeviceModel& device, Model& host, TwinCounts* counts) {
  const size_t n = host.param_count();
  std::vector<float> w(host.params().data(), host.params().data() + n), u(n, 0.0f), grad(n);
  std::vector<float> z0(n);
  for (size_t i = 0; i < n; ++i) z0[i] = w[i] - 0.03f + 0.01f * static_cast<float>(i % 7);
  AverageModel z(z0.data(), n, 0.9f);
  device.copy_in(DeviceModel::Buffer::parameters, -1, 0, w.data(), n);
  device.copy_in(DeviceModel::Buffer::momentum, -1, 0, u.data(), n);
  sma_device_load_average(device, z.z(), z.previous(), n);
  const SmaOptions o{0.2f, 0.9f, 0.9f, 5e-4f};
  if (counts) *counts = {};
  for (int it = 0; it < 4; ++it) {
    for (size_t i = 0; i < n; ++i) grad[i] = 0.21f * static_cast<float>((i * 5 + it) % 9) - 0.8f;
    device.copy_in(DeviceModel::Buffer::parameter_gradient, -1, 0, grad.data(), n);  // backward's, on a GPU
    std::vector<float> host_c(n, 0.0f), device_c(n, 5.0f);
    sma_learner_step(o, w.data(), u.data(), grad.data(), z.data(), 0.05f, host_c.data(), n);
    sma_device_resident_step(device, o, 0.05f, device_c.data(), n);
    EXPECT_EQ(device_c, host_c) << "c_j, iteration " << it + 1;
    std::vector<float> delta(n);
    for (size_t i = 0; i < n; ++i) delta[i] = host_c[i] * 0.5f - 0.001f;  // a stand-in for the summed corrections
    z.step(delta.data());
    sma_device_average_step(device, 0.9f, delta.data(), n);
  }
  if (counts) {
    EXPECT_EQ(counts->parameter_copies, 0u);
    EXPECT_EQ(counts->floats_out, 4 * n) << "c_j once per iteration";
    EXPECT_EQ(counts->floats_in, 4 * (n + n)) << "this test's gradients and Delta, once each per iteration";
  }
  std::vector<float> device_z(n), device_z_prev(n), device_w(n);
  device.copy_out(DeviceModel::Buffer::scratch_a, -1, 0, device_z.data(), n);
  device.copy_out(DeviceModel::Buffer::scratch_c, -1, 0, device_z_prev.data(), n);
  device.copy_out(DeviceModel::Buffer::parameters, -1, 0, device_w.data(), n);
  EXPECT_EQ(device_z, std::vector<float>(z.z(), z.z() + n));
  EXPECT_EQ(device_z_prev, std::vector<float>(z.previous(), z.previous() + n));
  EXPECT_EQ(device_w, w);
}

}  // namespace burstpool
