// A whole model on the GPU against the same model on the CPU: loss, logits,
// every parameter gradient, and the parameters after SGD steps. The model
// has convolution (with and without bias), batch norm, ReLU, a residual add,
// a concat, max and average pooling, dropout, flatten, a linear layer and the
// loss. Tolerance |gpu - cpu| <= 2e-4 (1 + |cpu|). Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "burstpool/device.hpp"
#include "burstpool/model.hpp"
#include "burstpool/model_io.hpp"
#include "burstpool/optimizer.hpp"
#include "cuda/gpu_model.hpp"
#include "kernels.hpp"

namespace burstpool {
namespace {

constexpr const char* kModel = R"(
[model]
name = gpu_twin
[data]
type = input
shape = 3,8,8
[conv1]
type = conv2d
inputs = data
out_channels = 4
kernel = 3
padding = 1
[bn1]
type = batchnorm2d
inputs = conv1
[relu1]
type = relu
inputs = bn1
[conv2]
type = conv2d
inputs = relu1
out_channels = 4
kernel = 3
padding = 1
bias = false
[sum]
type = add
inputs = relu1, conv2
[cat]
type = concat
inputs = sum, relu1
[pool]
type = maxpool2d
inputs = cat
kernel = 2
[avg]
type = avgpool2d
inputs = pool
kernel = 3
stride = 1
padding = 1
[drop]
type = dropout
inputs = avg
p = 0.25
[flat]
type = flatten
inputs = drop
[fc]
type = linear
inputs = flat
out_features = 10
[loss]
type = softmax_cross_entropy
inputs = fc
)";

void expect_close(const float* gpu, const float* cpu, size_t n, const char* what) {
  for (size_t i = 0; i < n; ++i)
    ASSERT_LE(std::abs(gpu[i] - cpu[i]), 2e-4f * (1 + std::abs(cpu[i]))) << what << " [" << i << "]";
}

TEST(GpuModel, MatchesTheCpuModel) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  const ModelSpec spec = parse_model_ini(kModel, "gpu_twin.ini");
  const int n = 6;
  Model cpu(spec, n, 3), gpu_host(spec, n, 3);  // same seed: same initial weights
  cuda::Context device(0);
  cuda::GpuModel gpu(gpu_host, device);
  std::vector<float> images(n * cpu.sample_shape().per_sample());
  std::vector<int32_t> labels(n);
  for (size_t i = 0; i < images.size(); ++i) images[i] = 2 * cpu::uniform01(1000 + i) - 1;
  for (int i = 0; i < n; ++i) labels[i] = static_cast<int32_t>(cpu::mix64(77 + i) % 10);
  const SgdOptions sgd_options{0.9f, true, 1e-3f};
  Sgd sgd(cpu, sgd_options);
  for (int step = 0; step < 3; ++step) {
    Context ctx;
    ctx.seed = 5;
    ctx.step = step;
    ctx.labels = labels.data();
    ctx.loss_scale = 1.0 / n;
    cpu.load_batch(images.data());
    const float cpu_loss = cpu.forward(ctx);
    cpu.backward(ctx);
    const float gpu_loss = gpu.forward(n, images.data(), labels.data(), ctx);
    gpu.backward(ctx);
    EXPECT_NEAR(gpu_loss, cpu_loss, 2e-4 * (1 + std::abs(cpu_loss))) << "step " << step;
    std::vector<float> logits(n * 10), grads(cpu.param_count());
    gpu.logits(logits.data());
    expect_close(logits.data(), cpu.activation(cpu.logits_layer()).data(), logits.size(), "logits");
    gpu.gradients(grads.data());
    expect_close(grads.data(), cpu.grads().data(), grads.size(), "parameter gradients");
    sgd.step(0.05f);
    gpu.sgd_step(0.05f, sgd_options);
  }
  gpu.download();
  expect_close(gpu_host.params().data(), cpu.params().data(), cpu.param_count(), "parameters after 3 SGD steps");
  expect_close(gpu_host.state().data(), cpu.state().data(), cpu.state().size(), "batch-norm running statistics");
}

}  // namespace
}  // namespace burstpool
