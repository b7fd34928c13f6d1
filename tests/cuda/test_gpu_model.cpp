// A whole model on the GPU against the same model on the CPU: loss, logits,
// every parameter gradient, and the parameters after SGD steps. The model
// has convolution (with and without bias), batch norm, ReLU, a residual add,
// a concat, max and average pooling, dropout, flatten, a linear layer and the
// loss. Tolerance |gpu - cpu| <= 2e-4 (1 + |cpu|). Also with batch-norm sums
// over a (pretend) rank group, and an SMA learner's step. Skipped without a
// GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "burstpool/device.hpp"
#include "burstpool/model.hpp"
#include "burstpool/model_io.hpp"
#include "burstpool/optimizer.hpp"
#include "burstpool/sma.hpp"
#include "../unit/sma_device_check.hpp"
#include "cuda/gpu_model.hpp"
#include "layers/kernels.hpp"

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

// A random batch of n samples for `model` (images in [-1, 1), labels in
// [0, 10)) and the training context of a step on it.
struct Batch {
  Batch(const Model& model, int n, uint64_t seed) : n(n), images(n * model.sample_shape().per_sample()), labels(n) {
    for (size_t i = 0; i < images.size(); ++i) images[i] = 2 * cpu::uniform01(seed + i) - 1;
    for (int i = 0; i < n; ++i) labels[i] = static_cast<int32_t>(cpu::mix64(seed + images.size() + i) % 10);
  }
  Context context(int step) const {
    Context ctx;
    ctx.seed = 5;
    ctx.step = step;
    ctx.labels = labels.data();
    ctx.loss_scale = 1.0 / n;
    return ctx;
  }
  int n;
  std::vector<float> images;
  std::vector<int32_t> labels;
};

// The test model on the CPU and on GPU 0, from the same initial weights.
struct CpuAndGpu {
  explicit CpuAndGpu(int n)
      : spec(parse_model_ini(kModel, "gpu_twin.ini")), cpu(spec, n, 3), gpu_host(spec, n, 3), device(0),
        gpu(gpu_host, device) {}
  ModelSpec spec;
  Model cpu, gpu_host;
  cuda::Context device;
  cuda::GpuModel gpu;
};

// Three SGD steps of the same batch on the CPU Model and on the GPU, compared
// at every step; `group_sum` (may be empty) is Context::sum_over_group for
// both; `graphs`: CUDA graphs on the GPU (step 0 eager, step 1 captured,
// step 2 replayed). Returns the GPU's first loss.
float compare_three_steps(const std::function<void(double*, size_t)>& group_sum, bool graphs = false) {
  const ModelSpec spec = parse_model_ini(kModel, "gpu_twin.ini");
  const int n = 6;
  Model cpu(spec, n, 3), gpu_host(spec, n, 3);  // same seed: same initial weights
  cuda::Context device(0);
  cuda::GpuModel gpu(gpu_host, device);
  gpu.set_graphs(graphs);
  const Batch batch(cpu, n, 1000);
  const std::vector<float>& images = batch.images;
  const std::vector<int32_t>& labels = batch.labels;
  const SgdOptions sgd_options{0.9f, true, 1e-3f};
  Sgd sgd(cpu, sgd_options);
  float first_loss = 0;
  for (int step = 0; step < 3; ++step) {
    Context ctx = batch.context(step);
    ctx.sum_over_group = group_sum;
    cpu.load_batch(images.data());
    const float cpu_loss = cpu.forward(ctx);
    cpu.backward(ctx);
    const float gpu_loss = gpu.forward(n, images.data(), labels.data(), ctx);
    gpu.backward(ctx);
    if (step == 0) first_loss = gpu_loss;
    EXPECT_NEAR(gpu_loss, cpu_loss, 2e-4 * (1 + std::abs(cpu_loss))) << "step " << step;
    std::vector<float> logits(n * 10), grads(cpu.param_count());
    gpu.logits(logits.data());
    expect_close(logits.data(), cpu.activation(cpu.logits_layer()).data(), logits.size(), "logits");
    gpu.gradients(grads.data());
    expect_close(grads.data(), cpu.grads().data(), grads.size(), "parameter gradients");
    sgd.step(0.05f);
    gpu.sgd_step(0.05f, sgd_options, {{0, cpu.param_count()}});
  }
  gpu.download();
  expect_close(gpu_host.params().data(), cpu.params().data(), cpu.param_count(), "parameters after 3 SGD steps");
  expect_close(gpu_host.state().data(), cpu.state().data(), cpu.state().size(), "batch-norm running statistics");
  return first_loss;
}

TEST(GpuModel, MatchesTheCpuModel) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  compare_three_steps(nullptr);
}

// A replayed graph must see each step's dropout masks (keys in device
// memory) and update the same buffers as the eager layers.
TEST(GpuModel, CudaGraphsMatchTheCpuModel) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  compare_three_steps(nullptr, true);
}

// bf16 (Context::precision): the GPU rounds where the CPU does and its TF32
// tensor cores multiply the bf16 values exactly, so the two differ by the
// order of fp32 sums alone. A sum a few float ulps apart can land on the
// other side of a bf16 rounding step (2^-8 of the value) and carry on from
// there, so the bound is 2^-5 (1 + |cpu|). The GPU's logits must be bf16
// values, and differ from its own fp32 logits.
TEST(GpuModel, Bf16MatchesTheCpusBf16) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  const int n = 6;
  CpuAndGpu models(n);
  Model& cpu = models.cpu;
  cuda::GpuModel& gpu = models.gpu;
  gpu.set_tf32(true);  // as make_cuda_model sets it for bf16
  const Batch batch(cpu, n, 1000);
  Context ctx = batch.context(0);
  std::vector<float> fp32_logits(n * 10), logits(n * 10), grads(cpu.param_count());
  gpu.forward(n, batch.images.data(), batch.labels.data(), ctx);
  gpu.logits(fp32_logits.data());
  ctx.precision = Precision::bf16;
  cpu.load_batch(batch.images.data());
  const float cpu_loss = cpu.forward(ctx);
  cpu.backward(ctx);
  const float gpu_loss = gpu.forward(n, batch.images.data(), batch.labels.data(), ctx);
  gpu.backward(ctx);
  const float bound = 1.0f / 32;
  EXPECT_NEAR(gpu_loss, cpu_loss, bound * (1 + std::abs(cpu_loss)));
  gpu.logits(logits.data());
  const float* cpu_logits = cpu.activation(cpu.logits_layer()).data();
  bool differs = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    EXPECT_LE(std::abs(logits[i] - cpu_logits[i]), bound * (1 + std::abs(cpu_logits[i]))) << "logit " << i;
    uint32_t bits;
    std::memcpy(&bits, &logits[i], sizeof bits);
    EXPECT_EQ(bits & 0xFFFFu, 0u) << "logit " << i << " is not a bf16 value";
    differs = differs || logits[i] != fp32_logits[i];
  }
  EXPECT_TRUE(differs) << "bf16 logits equal the fp32 ones: nothing was rounded";
  gpu.gradients(grads.data());
  const float* cpu_grads = cpu.grads().data();
  for (size_t i = 0; i < grads.size(); ++i)
    EXPECT_LE(std::abs(grads[i] - cpu_grads[i]), bound * (1 + std::abs(cpu_grads[i]))) << "gradient " << i;
}

// Batch norm on several ranks: the GPU must sum its statistics over the group
// at the same points and in the same layout as the CPU layer. The group sum
// here pretends a second rank holds the same values shifted by 0.5 (in
// backward the same arithmetic is applied to the backward sums: meaningless
// there, but the same on both sides), so the result differs from one rank's.
TEST(GpuModel, BatchNormSumsOverTheGroupAsOnTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  auto shifted_twin = [](double* v, size_t count) {  // [sum | sum of squares | count]
    const size_t c = (count - 1) / 2;
    const double m = v[2 * c];
    for (size_t k = 0; k < c; ++k) {
      const double s1 = v[k], s2 = v[c + k];
      v[k] = 2 * s1 + 0.5 * m;
      v[c + k] = 2 * s2 + s1 + 0.25 * m;
    }
    v[2 * c] = 2 * m;
  };
  const float alone = compare_three_steps(nullptr);
  const float grouped = compare_three_steps(shifted_twin);
  EXPECT_GT(std::abs(grouped - alone), 1e-3f) << "the group sum changed nothing: was it called?";
}

// An SMA learner's step on the device (sma_device_step: axpby pieces)
// against sma_learner_step on the CPU, over two steps so the momentum u_j
// matters: parameters, u_j and the correction c_j sent back.
TEST(GpuModel, SmaStepMatchesTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  const int n = 6;
  CpuAndGpu models(n);
  Model &cpu = models.cpu, &gpu_host = models.gpu_host;
  cuda::GpuModel& gpu = models.gpu;
  const size_t p = cpu.param_count();
  const Batch batch(cpu, n, 3000);
  std::vector<float> u(p, 0.0f), z(p), cpu_delta(p), gpu_delta(p, 7.0f);
  for (size_t i = 0; i < p; ++i) z[i] = cpu.params().data()[i] + 0.01f * (2 * cpu::uniform01(5000 + i) - 1);
  const SmaOptions options{0.2f, 0.9f, 0.9f, 1e-3f};
  for (int step = 0; step < 2; ++step) {
    const Context ctx = batch.context(step);
    cpu.load_batch(batch.images.data());
    cpu.forward(ctx);
    cpu.backward(ctx);
    gpu.forward(n, batch.images.data(), batch.labels.data(), ctx);
    gpu.backward(ctx);
    std::fill(cpu_delta.begin(), cpu_delta.end(), 0.0f);
    sma_learner_step(options, cpu.params().data(), u.data(), cpu.grads().data(), z.data(), 0.05f, cpu_delta.data(), p);
    sma_device_step(gpu, options, 0.05f, z.data(), gpu_delta.data(), p);  // overwrites the 7s
    expect_close(gpu_delta.data(), cpu_delta.data(), p, "c_j");
  }
  std::vector<float> gpu_u(p);
  gpu.to_host(gpu_u.data());
  expect_close(gpu_host.params().data(), cpu.params().data(), p, "parameters after 2 SMA steps");
  expect_close(gpu_u.data(), u.data(), p, "u_j after 2 SMA steps");
}

// The average model kept on the GPU: bit for bit the host's, as on the twin
// (the axpby kernel rounds its multiplies and adds apart, never fused).
TEST(GpuModel, AverageKeptOnTheGpuIsTheHostsBitwise) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  Model host(parse_model_ini(kResidentModel, "sma_resident.ini"), 2, 11);
  std::unique_ptr<DeviceModel> gpu = make_cuda_model(host, 0);
  expect_resident_average_is_the_hosts(*gpu, host, nullptr);
}

}  // namespace
}  // namespace burstpool
