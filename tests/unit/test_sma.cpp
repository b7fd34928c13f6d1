// SMA update rules (CROSSBOW's) against values worked out by hand.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "burstpool/device_model.hpp"
#include "burstpool/model.hpp"
#include "burstpool/model_io.hpp"
#include "burstpool/sma.hpp"
#include "sma_device_check.hpp"

namespace burstpool {
namespace {

// One parameter, two learners, alpha = momentum = average momentum = 0.5,
// lr 0.1. By hand:
//   step 1, grads (1, -1): u = (-0.1, 0.1), w = (0.9, 1.1), c = (0, 0), z = 1
//   step 2, grads (2, 0):  u = (-0.25, 0.05), w_old = (0.9, 1.1) -> (0.65, 1.15),
//                          c = (-0.05, 0.05) -> w = (0.70, 1.10), Delta 0, z = 1
//   step 3, grads (0, 0):  u = (-0.125, 0.025), c = (-0.15, 0.05), w = (0.725, 1.075),
//                          Delta = -0.1, z = 1 - 0.1 + 0.5 (1 - 1) = 0.9
//   step 4, grads (0, 0):  u = (-0.0625, 0.0125), c = (-0.0875, 0.0875), w = (0.75, 1.0),
//                          Delta = 0, z = 0.9 + 0.5 (0.9 - 1) = 0.85 (momentum on z)
TEST(Sma, UpdateRulesMatchHandValues) {
  const SmaOptions o{0.5f, 0.5f, 0.5f, 0.0f};
  float w[2] = {1, 1}, u[2] = {0, 0};
  const float init = 1.0f;
  AverageModel z(&init, 1, o.average_momentum);
  const float grads[4][2] = {{1, -1}, {2, 0}, {0, 0}, {0, 0}};
  const float want_w[4][2] = {{0.9f, 1.1f}, {0.70f, 1.10f}, {0.725f, 1.075f}, {0.75f, 1.0f}};
  const float want_z[4] = {1.0f, 1.0f, 0.9f, 0.85f};
  for (int step = 0; step < 4; ++step) {
    float delta = 0;
    for (int j = 0; j < 2; ++j) sma_learner_step(o, &w[j], &u[j], &grads[step][j], z.data(), 0.1f, &delta, 1);
    z.step(&delta);
    for (int j = 0; j < 2; ++j) EXPECT_NEAR(w[j], want_w[step][j], 1e-6) << "step " << step + 1;
    EXPECT_NEAR(z.data()[0], want_z[step], 1e-6) << "step " << step + 1;
  }
}

// g = grad + wd * w: w = 2, grad 1, wd 0.1 -> g = 1.2, u = -0.12, w = 1.88.
TEST(Sma, WeightDecayJoinsTheGradient) {
  const SmaOptions o{0.5f, 0.0f, 0.9f, 0.1f};
  float w = 2.0f, u = 0.0f, delta = 0.0f;
  const float grad = 1.0f, z = 2.0f;
  sma_learner_step(o, &w, &u, &grad, &z, 0.1f, &delta, 1);
  EXPECT_NEAR(w, 1.88f, 1e-6);
  EXPECT_EQ(delta, 0.0f);  // w_old was z
}

// With alpha = 0 each learner is plain momentum SGD on its own gradients and
// the average model never moves.
TEST(Sma, AlphaZeroLeavesLearnersIndependent) {
  const SmaOptions o{0.0f, 0.9f, 0.9f, 0.01f};
  const std::vector<float> init = {0.5f, -1.0f, 2.0f};
  AverageModel z(init.data(), 3, o.average_momentum);
  std::vector<std::vector<float>> w(2, init), u(2, std::vector<float>(3, 0.0f));
  std::vector<std::vector<float>> ref_w(2, init), ref_u(2, std::vector<float>(3, 0.0f));
  for (int step = 0; step < 5; ++step) {
    std::vector<float> delta(3, 0.0f);
    for (int j = 0; j < 2; ++j) {
      std::vector<float> g(3);
      for (int i = 0; i < 3; ++i) g[i] = 0.3f * (j + 1) * (i - 1) + 0.1f * step;
      sma_learner_step(o, w[j].data(), u[j].data(), g.data(), z.data(), 0.05f, delta.data(), 3);
      for (int i = 0; i < 3; ++i) {
        ref_u[j][i] = -0.05f * (g[i] + 0.01f * ref_w[j][i]) + 0.9f * ref_u[j][i];
        ref_w[j][i] += ref_u[j][i];
      }
    }
    z.step(delta.data());
    for (int j = 0; j < 2; ++j)
      for (int i = 0; i < 3; ++i) EXPECT_NEAR(w[j][i], ref_w[j][i], 1e-6);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(z.data()[i], init[i]);
  }
  EXPECT_NE(w[0][0], w[1][0]);  // they did diverge
}

// The device form of the step (DeviceModel::axpby pieces, run here by the
// twin device) equals the host's bit for bit, over three steps so that u_j
// and the drift from z matter; c_j comes back overwriting what was there.
TEST(Sma, DeviceStepEqualsTheHostStepBitwise) {
  Model host(parse_model_ini(kResidentModel, "sma_twin.ini"), 2, 7);
  std::unique_ptr<DeviceModel> twin = make_twin_model(host);
  const size_t n = host.param_count();
  std::vector<float> w(host.params().data(), host.params().data() + n), u(n, 0.0f), z(n), grad(n);
  for (size_t i = 0; i < n; ++i) z[i] = w[i] + 0.01f * static_cast<float>(i % 5) - 0.02f;
  twin->copy_in(DeviceModel::Buffer::parameters, -1, 0, w.data(), n);
  twin->copy_in(DeviceModel::Buffer::momentum, -1, 0, u.data(), n);
  const SmaOptions o{0.3f, 0.9f, 0.9f, 1e-3f};
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < n; ++i) grad[i] = 0.37f * static_cast<float>((i * 7 + step) % 11) - 1.3f;
    twin->copy_in(DeviceModel::Buffer::parameter_gradient, -1, 0, grad.data(), n);
    std::vector<float> host_c(n, 0.0f), device_c(n, 9.0f);
    sma_learner_step(o, w.data(), u.data(), grad.data(), z.data(), 0.05f, host_c.data(), n);
    sma_device_step(*twin, o, 0.05f, z.data(), device_c.data(), n);
    EXPECT_EQ(device_c, host_c) << "c_j, step " << step + 1;
  }
  std::vector<float> device_w(n), device_u(n);
  twin->copy_out(DeviceModel::Buffer::parameters, -1, 0, device_w.data(), n);
  twin->copy_out(DeviceModel::Buffer::momentum, -1, 0, device_u.data(), n);
  EXPECT_EQ(device_w, w);
  EXPECT_EQ(device_u, u);
}

// The average model kept on the device, on the twin, with its copies counted.
TEST(Sma, AverageKeptOnTheDeviceIsTheHostsBitwiseAndOnlyStagingCrosses) {
  const ModelSpec spec = parse_model_ini(kResidentModel, "sma_resident.ini");
  Model host(spec, 2, 11);
  TwinCounts counts;
  std::unique_ptr<DeviceModel> twin = make_twin_model(host, {false, &counts});
  expect_resident_average_is_the_hosts(*twin, host, &counts);
}

}  // namespace
}  // namespace burstpool
