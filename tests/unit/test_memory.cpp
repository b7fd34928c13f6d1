// The memory estimate: hand-worked bytes for a small model, data parallel and
// under a burst plan, and the estimate against the resident memory a real
// model's construction and one training step touch.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "burstpool/memory.hpp"
#include "burstpool/model.hpp"
#include "burstpool/model_io.hpp"
#include "burstpool/optimizer.hpp"

namespace burstpool {
namespace {

// 1x8x8 -> conv 2x3x3 (2x6x6, 20 parameters) -> linear 3 on its 72 values (219 parameters) -> loss.
// The conv runs by columns (im2col), whose buffers are worked by hand below.
ModelSpec small() {
  return parse_model_ini(R"(
[model]
name = small
[data]
type = input
shape = 1,8,8
[conv]
type = conv2d
inputs = data
out_channels = 2
kernel = 3
algorithm = im2col
[fc]
type = linear
inputs = conv
out_features = 3
[loss]
type = softmax_cross_entropy
inputs = fc
)",
                         "small");
}

TEST(MemoryEstimate, HandWorkedDataParallel) {
  const ModelSpec spec = small();
  const MemoryEstimate e = estimate_model_memory(spec, data_parallel_plan(spec, 1, 4), 0, 1, 1);
  EXPECT_EQ(e.parameters, 4u * 2 * 239);  // values and gradients, no state
  EXPECT_EQ(e.optimizer, 4u * 239);
  // input 4x64 (no gradient), conv 4x72 and fc 4x3 with gradients, the
  // loss's scalar and its seed.
  EXPECT_EQ(e.activations, 4u * (4 * 64 + 2 * 4 * 72 + 2 * 4 * 3 + 2));
  // conv by columns (one input channel is too thin for Winograd): one group
  // of all 4 samples, columns and their gradient (9 x 144) and the reordered
  // output gradient (2 x 144); the loss keeps 4 x 3 probabilities.
  EXPECT_EQ(e.buffers, 4u * ((2 * 9 + 2) * 144 + 4 * 3));
  EXPECT_EQ(e.workspace, 4u * 4 * 64);
  ASSERT_FALSE(e.layers.empty());
  // conv: activations 2304 + buffers 11520 + parameters, gradients and momentum 240 bytes: the largest.
  EXPECT_EQ(e.layers[0].name, "conv");
  EXPECT_EQ(e.layers[0].bytes, 4u * (2 * 4 * 72 + 20 * 144 + 3 * 20));
  EXPECT_EQ(e.layers[1].name, "fc");  // 3 x 219 parameters + 2 x 4 x 3 activations
  EXPECT_EQ(e.layers[1].bytes, 4u * (3 * 219 + 2 * 4 * 3));
}

TEST(MemoryEstimate, BurstPlanCountsOnlyHeldLayersAndResliced) {
  const ModelSpec spec = small();
  Plan plan = data_parallel_plan(spec, 2, 4);
  for (size_t i = 0; i < plan.layer_names.size(); ++i)
    if (plan.layer_names[i] == "fc" || plan.layer_names[i] == "loss") plan.layer_ranks[i] = {0};
  // Rank 1 holds 2 samples of the input and of conv, nothing else.
  const MemoryEstimate r1 = estimate_model_memory(spec, plan, 1, 1, 1);
  EXPECT_EQ(r1.parameters, 4u * 2 * 239);  // every rank holds the whole flat layout
  EXPECT_EQ(r1.activations, 4u * (2 * 64 + 2 * 2 * 72));
  EXPECT_EQ(r1.buffers, 4u * (20 * 72));  // one group of 2 samples
  // Rank 0 also holds fc on all 4 samples, whose input (conv's output, with
  // its gradient) arrives re-sliced, and the loss.
  const MemoryEstimate r0 = estimate_model_memory(spec, plan, 0, 1, 1);
  EXPECT_EQ(r0.activations, 4u * (2 * 64 + 2 * 2 * 72 + (2 * 4 * 3 + 2 * 4 * 72) + 2));
}

// A job of small() on 100 + 20 synthetic samples at global batch 4.
JobConfig small_synthetic_job() {
  JobConfig job;
  job.model_path = "small";
  job.data_source = "synthetic";
  job.synthetic_train = 100;
  job.synthetic_test = 20;
  job.batch_size = 4;
  return job;
}

TEST(MemoryEstimate, JobAddsDataAndLearners) {
  JobConfig job = small_synthetic_job();
  const ModelSpec spec = small();
  const Plan plan = data_parallel_plan(spec, 1, 4);
  const MemoryEstimate one = estimate_model_memory(spec, plan, 0, 1, 1);
  const MemoryEstimate ssgd = estimate_job_memory(job, spec, plan, 0, 1, 1);
  EXPECT_EQ(ssgd.data, 120u * (4 * 64 + 4));
  EXPECT_EQ(ssgd.total(), one.total() + ssgd.data);
  // Three sma learners: three replicas with velocity and momentum, plus z,
  // z_prev and the summed corrections.
  job.sync.strategy = "sma";
  job.sync.learners = 3;
  const MemoryEstimate sma = estimate_job_memory(job, spec, plan, 0, 1, 1);
  EXPECT_EQ(sma.parameters, 3 * one.parameters);
  EXPECT_EQ(sma.optimizer, 3u * 2 * 4 * 239 + 3u * 4 * 239);
  EXPECT_EQ(sma.activations, 3 * one.activations);
}

// On a GPU each device model adds its CUDA context, its cuDNN workspace
// (conv's column matrix: 4 samples x 9 x 36 floats) and, in bf16, a rounded
// copy of the 239 weights; each sma learner is a device model of its own.
TEST(MemoryEstimate, GpuOnlyBytesPerDeviceModel) {
  JobConfig job = small_synthetic_job();
  const ModelSpec spec = small();
  const Plan plan = data_parallel_plan(spec, 1, 4);
  EXPECT_EQ(estimate_job_memory(job, spec, plan, 0, 1, 1).device_only, 0u) << "the CPU has none";
  job.device = "cuda";
  const uint64_t columns = 4u * 4 * 9 * 36;
  const MemoryEstimate fp32 = estimate_job_memory(job, spec, plan, 0, 1, 1);
  EXPECT_EQ(fp32.device_only, kCudaContextBytes + columns);
  EXPECT_EQ(fp32.device_total(), fp32.parameters + fp32.optimizer + fp32.activations + fp32.buffers + fp32.device_only);
  EXPECT_EQ(fp32.total(), estimate_model_memory(spec, plan, 0, 1, 1).total() + fp32.data) << "not host memory";
  job.precision = "bf16";
  EXPECT_EQ(estimate_job_memory(job, spec, plan, 0, 1, 1).device_only, kCudaContextBytes + columns + 4u * 239);
  job.precision = "fp32";
  job.sync.strategy = "sma";
  job.sync.learners = 3;
  EXPECT_EQ(estimate_job_memory(job, spec, plan, 0, 1, 1).device_only, 3 * (kCudaContextBytes + columns));
}

TEST(MemoryEstimate, LimitOverridesDetection) {
  std::string source;
  EXPECT_EQ(node_memory_available(1.5, &source), uint64_t{3} << 29);
  EXPECT_NE(source.find("memory_limit_gb"), std::string::npos);
  EXPECT_GT(node_memory_available(0, &source), 0u);  // MemAvailable at least
}

// Resident bytes of this process: now, and the peak since the last reset.
uint64_t status_kb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string name;
  uint64_t value = 0;
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return std::stoull(line.substr(key.size() + 1)) * 1024;
  return value;
}

// What a real model's construction and one forward and backward touch lies
// within 25% of the estimate (everything except data and staging, which the
// model does not allocate).
TEST(MemoryEstimate, WithinAQuarterOfMeasuredPeak) {
  std::ofstream("/proc/self/clear_refs") << "5";  // resets VmHWM to the current VmRSS
  if (status_kb("VmHWM") > status_kb("VmRSS") + (uint64_t{8} << 20))
    GTEST_SKIP() << "this kernel cannot reset the peak resident size (/proc/self/clear_refs)";
  const ModelSpec spec = load_model_spec(std::string(BURSTPOOL_SOURCE_DIR) + "/jobs/models/vgg_small.ini");
  const int batch = 32;
  const MemoryEstimate e = estimate_model_memory(spec, data_parallel_plan(spec, 1, batch), 0, 1, 1);
  const uint64_t before = status_kb("VmRSS");
  {
    Model model(spec, batch, 1);
    Sgd sgd(model, SgdOptions{});
    std::vector<float> images(static_cast<size_t>(batch) * model.sample_shape().per_sample(), 0.5f);
    std::vector<int32_t> labels(batch, 1);
    Context ctx;
    ctx.labels = labels.data();
    ctx.loss_scale = 1.0 / batch;
    model.set_batch(batch);
    model.load_batch(images.data());
    model.forward(ctx);
    model.backward(ctx);
    sgd.step(0.01f);
  }
  const double measured = static_cast<double>(status_kb("VmHWM") - before);
  const double estimated = static_cast<double>(e.total() - e.workspace);
  RecordProperty("measured_bytes", std::to_string(static_cast<uint64_t>(measured)));
  RecordProperty("estimated_bytes", std::to_string(static_cast<uint64_t>(estimated)));
  EXPECT_GT(estimated, 0.75 * measured) << e.describe();
  EXPECT_LT(estimated, 1.25 * measured) << e.describe();
}

}  // namespace
}  // namespace burstpool
