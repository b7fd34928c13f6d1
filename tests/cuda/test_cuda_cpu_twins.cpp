// Convolution, pooling, batch norm, dropout, merge and loss on the GPU against
// the CPU layers (built by make_layer, run through the gradcheck rig): forward
// output, parameter gradients, input gradients and batch-norm running
// statistics. Tolerance |gpu - cpu| <= 1e-4 (1 + |cpu|) (fp32 both sides;
// cuDNN in FMA math, no TF32; convolutions with the algorithms that sum
// directly, [job] cudnn_algorithms = gemm: FFT and Winograd ones round more,
// see ConvAlgorithms in cuda/ops/kernels.hpp). Skipped without a GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "../unit/gradcheck.hpp"
#include "burstpool/algorithm_cache.hpp"
#include "burstpool/device.hpp"
#include "cuda/check.hpp"
#include "cuda/context.hpp"
#include "cuda/ops/kernels.hpp"
#include "layers/kernels.hpp"

namespace burstpool {
namespace {

using testing::LayerCase;
using testing::LayerRig;
using Attrs = std::vector<std::pair<std::string, std::string>>;

// Device copies of host data, freed with the test.
class Device {
 public:
  ~Device() {
    for (void* p : owned_) cudaFree(p);
  }
  template <class T>
  T* put(const T* host, size_t n) {
    T* p = get<T>(n);
    BP_CUDA_CHECK(cudaMemcpy(p, host, n * sizeof(T), cudaMemcpyHostToDevice));
    return p;
  }
  float* put(const Tensor& t) { return put(t.data(), t.size()); }
  template <class T>
  T* get(size_t n) {
    void* p = nullptr;
    BP_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
    BP_CUDA_CHECK(cudaMemset(p, 0, std::max<size_t>(n, 1) * sizeof(T)));
    owned_.push_back(p);
    return static_cast<T*>(p);
  }

 private:
  std::vector<void*> owned_;
};

void expect_matches(const float* gpu, const Tensor& cpu, const char* what) {
  std::vector<float> host(cpu.size());
  BP_CUDA_CHECK(cudaMemcpy(host.data(), gpu, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < host.size(); ++i)
    ASSERT_LE(std::abs(host[i] - cpu.data()[i]), 1e-4f * (1 + std::abs(cpu.data()[i])))
        << what << " [" << i << "] gpu " << host[i] << " cpu " << cpu.data()[i];
}

// The CPU side: forward (keeping updated state) and backward with the rig's
// random output gradient; input gradients overwritten.
struct CpuRun {
  explicit CpuRun(const LayerCase& c) : rig(c) {
    for (const Tensor& s : rig.state) {
      initial_state.push_back(Tensor::zeros(s.shape()));
      std::copy(s.data(), s.data() + s.size(), initial_state.back().data());
    }
    std::vector<const Tensor*> in;
    for (auto& t : rig.inputs) in.push_back(&t);
    rig.layer->forward(in, rig.out, rig.ctx);
    for (auto& t : rig.inputs) din.push_back(Tensor::zeros(t.shape()));
    rig.backward(din, false);
  }
  LayerRig rig;
  std::vector<Tensor> initial_state, din;
};

class CudaTwin : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
    ctx = std::make_unique<cuda::Context>(0);
    stream = ctx->stream(StreamRole::foreground);
  }
  void sync() { BP_CUDA_CHECK(cudaStreamSynchronize(stream)); }
  // One convolution on the GPU against the CPU layer, with the algorithms that sum directly.
  void check_conv(const Shape& in, int oc, int k, int stride, int pad);
  std::unique_ptr<cuda::Context> ctx;
  cudaStream_t stream = nullptr;
  Device dev;
};

cuda::Geometry2d geometry(const Shape& in, int oc, int k, int stride, int pad) {
  cuda::Geometry2d g;
  g.n = in.n, g.c = in.c, g.h = in.h, g.w = in.w, g.oc = oc;
  g.kh = g.kw = k, g.sh = g.sw = stride, g.ph = g.pw = pad;
  return g;
}

void CudaTwin::check_conv(const Shape& in, int oc, int k, int stride, int pad) {
  CpuRun cpu({"conv2d", Attrs{{"out_channels", std::to_string(oc)}, {"kernel", std::to_string(k)},
                              {"stride", std::to_string(stride)}, {"padding", std::to_string(pad)}},
              {in}});
  const LayerRig& r = cpu.rig;
  cuda::CudnnConv conv(ctx->cudnn(), geometry(in, oc, k, stride, pad), cuda::ConvAlgorithms::gemm);
  SCOPED_TRACE(fmt::format("input {}x{}x{}x{}, {} outputs, kernel {}, stride {}, padding {}: {}", in.n, in.c, in.h,
                           in.w, oc, k, stride, pad, conv.algorithms()));
  float *x = dev.put(r.inputs[0]), *w = dev.put(r.params[0]), *b = dev.put(r.params[1]);
  float *y = dev.get<float>(r.out.size()), *dy = dev.put(r.weights_r);
  float *dw = dev.get<float>(r.params[0].size()), *db = dev.get<float>(r.params[1].size()),
        *dx = dev.get<float>(r.inputs[0].size());
  conv.forward(x, w, b, y, ctx->allocator(), stream);
  conv.backward(x, w, dy, dw, db, dx, false, ctx->allocator(), stream);
  sync();
  EXPECT_EQ(conv.algorithms().find("FFT"), std::string::npos);
  EXPECT_EQ(conv.algorithms().find("WINOGRAD"), std::string::npos);
  expect_matches(y, r.out, "conv forward");
  expect_matches(dw, r.grads[0], "conv weight gradient");
  expect_matches(db, r.grads[1], "conv bias gradient");
  expect_matches(dx, cpu.din[0], "conv input gradient");
}

// A measured choice kept in the cache comes back with the math type each
// direction was ranked and timed in (a cache of algorithms alone would run
// them in the descriptor's math type, another variant); in fp32 no direction
// may use tensor-op math.
TEST_F(CudaTwin, CachedConvolutionChoiceKeepsItsMathTypes) {
  const std::string path = ::testing::TempDir() + "cudnn_math_" + std::to_string(getpid()) + ".json";
  std::remove(path.c_str());
  const cuda::Geometry2d g = geometry({8, 16, 16, 16}, 32, 3, 1, 1);
  for (const bool tf32 : {false, true}) {
    AlgorithmCache measuring(path, "test GPU", 1, true);
    cuda::CudnnConv first(ctx->cudnn(), g, cuda::ConvAlgorithms::measured, tf32, &measuring);
    AlgorithmCache reading(path, "test GPU", 1, false);
    cuda::CudnnConv again(ctx->cudnn(), g, cuda::ConvAlgorithms::measured, tf32, &reading);
    EXPECT_EQ(reading.reused(), 1);
    EXPECT_EQ(again.algorithms(), first.algorithms());
    if (!tf32) EXPECT_EQ(first.algorithms().find("tensor ops"), std::string::npos) << first.algorithms();
  }
  std::remove(path.c_str());
}

TEST_F(CudaTwin, Conv2d) {
  for (auto [k, stride, pad] : {std::tuple{3, 1, 1}, std::tuple{5, 2, 0}, std::tuple{1, 1, 0}})
    check_conv(Shape{3, 4, 11, 9}, 6, k, stride, pad);
}

// LeNet-5's convolutions at batch 32 (the shapes of tests/e2e/cuda_device.sh).
// There cuDNN's heuristic and measured choices took Winograd algorithms on an
// H200, whose gradients were up to 0.03 from the CPU's (values near 6 to 40).
TEST_F(CudaTwin, Conv2dLeNetShapes) {
  check_conv(Shape{32, 1, 28, 28}, 6, 5, 1, 2);
  check_conv(Shape{32, 6, 14, 14}, 16, 5, 1, 0);
}

TEST_F(CudaTwin, Pooling) {
  for (bool max : {true, false}) {
    const Shape in{2, 3, 9, 7};
    CpuRun cpu({max ? "maxpool2d" : "avgpool2d", Attrs{{"kernel", "3"}, {"stride", "2"}, {"padding", "1"}}, {in},
                testing::Values::distinct});
    const LayerRig& r = cpu.rig;
    cuda::CudnnPool pool(ctx->cudnn(), geometry(in, in.c, 3, 2, 1), max);
    float *x = dev.put(r.inputs[0]), *y = dev.get<float>(r.out.size()), *dy = dev.put(r.weights_r),
          *dx = dev.get<float>(r.inputs[0].size());
    pool.forward(x, y, stream);
    pool.backward(x, y, dy, dx, false, stream);
    sync();
    expect_matches(y, r.out, max ? "max pool forward" : "average pool forward");
    expect_matches(dx, cpu.din[0], max ? "max pool input gradient" : "average pool input gradient");
  }
}

TEST_F(CudaTwin, GlobalAvgPool) {
  const Shape in{3, 5, 6, 7};
  CpuRun cpu({"global_avgpool", {}, {in}});
  const LayerRig& r = cpu.rig;
  const size_t planes = size_t(in.n) * in.c;
  float *x = dev.put(r.inputs[0]), *y = dev.get<float>(planes), *dy = dev.put(r.weights_r),
        *dx = dev.get<float>(r.inputs[0].size());
  cuda::global_avgpool_forward(x, y, planes, in.h * in.w, stream);
  cuda::global_avgpool_backward(dy, dx, planes, in.h * in.w, false, stream);
  sync();
  expect_matches(y, r.out, "global average pool forward");
  expect_matches(dx, cpu.din[0], "global average pool input gradient");
}

TEST_F(CudaTwin, BatchNormTrainingAndEval) {
  for (bool training : {true, false}) {
    const Shape in{4, 3, 5, 6};
    LayerCase c{"batchnorm2d", Attrs{{"momentum", "0.2"}}, {in}};
    c.training = training;
    CpuRun cpu(c);
    const LayerRig& r = cpu.rig;
    const int n = in.n, ch = in.c, hw = in.h * in.w;
    float *x = dev.put(r.inputs[0]), *gamma = dev.put(r.params[0]), *beta = dev.put(r.params[1]);
    float *rmean = dev.put(cpu.initial_state[0]), *rvar = dev.put(cpu.initial_state[1]);
    float *mean = dev.get<float>(ch), *invstd = dev.get<float>(ch), *y = dev.get<float>(r.out.size());
    double* sums = dev.get<double>(2 * ch + 1);
    if (training) {
      cuda::bn_forward_sums(x, n, ch, hw, sums, stream);
      cuda::bn_forward_finish(sums, ch, 1e-5f, 0.2f, rmean, rvar, mean, invstd, stream);
    } else {
      cuda::bn_eval_stats(rmean, rvar, ch, 1e-5f, mean, invstd, stream);
    }
    cuda::bn_apply(x, gamma, beta, mean, invstd, y, n, ch, hw, stream);
    float *dy = dev.put(r.weights_r), *dgamma = dev.get<float>(ch), *dbeta = dev.get<float>(ch),
          *dx = dev.get<float>(r.inputs[0].size());
    cuda::bn_backward_sums(x, dy, mean, invstd, n, ch, hw, sums, dgamma, dbeta, stream);
    cuda::bn_backward_dx(x, dy, gamma, mean, invstd, sums, training, dx, false, n, ch, hw, stream);
    sync();
    const char* mode = training ? "training" : "eval";
    SCOPED_TRACE(mode);
    expect_matches(y, r.out, "batch norm forward");
    expect_matches(rmean, r.state[0], "running mean");
    expect_matches(rvar, r.state[1], "running variance");
    expect_matches(dgamma, r.grads[0], "gamma gradient");
    expect_matches(dbeta, r.grads[1], "beta gradient");
    expect_matches(dx, cpu.din[0], "batch norm input gradient");
  }
}

TEST_F(CudaTwin, DropoutUsesTheCpuMask) {
  const Shape in{5, 2, 4, 3};
  CpuRun cpu({"dropout", Attrs{{"p", "0.3"}}, {in}});
  const LayerRig& r = cpu.rig;
  const uint64_t key = cpu::dropout_step_key(r.ctx.seed, cpu::hash_name("under_test"), r.ctx.step);
  const uint64_t* base = dev.put(&key, 1);
  float *x = dev.put(r.inputs[0]), *y = dev.get<float>(r.out.size()), *dy = dev.put(r.weights_r),
        *dx = dev.get<float>(r.inputs[0].size());
  cuda::dropout_apply(x, y, in.n, in.per_sample(), 0.3f, base, r.ctx.sample_offset, false, stream);
  cuda::dropout_apply(dy, dx, in.n, in.per_sample(), 0.3f, base, r.ctx.sample_offset, false, stream);
  sync();
  expect_matches(y, r.out, "dropout forward");
  expect_matches(dx, cpu.din[0], "dropout input gradient");
}

TEST_F(CudaTwin, ConcatAndAdd) {
  const Shape a{3, 2, 4, 4}, b{3, 5, 4, 4};
  CpuRun cat({"concat", {}, {a, b}});
  const LayerRig& r = cat.rig;
  const size_t out_per = r.out.shape().per_sample();
  float *y = dev.get<float>(r.out.size()), *dy = dev.put(r.weights_r);
  size_t offset = 0;
  for (size_t i = 0; i < 2; ++i) {
    const size_t per = r.inputs[i].shape().per_sample();
    float *x = dev.put(r.inputs[i]), *dx = dev.get<float>(r.inputs[i].size());
    cuda::concat_forward_part(x, y, a.n, per, offset, out_per, stream);
    cuda::concat_backward_part(dy, dx, a.n, per, offset, out_per, false, stream);
    sync();
    expect_matches(dx, cat.din[i], "concat input gradient");
    offset += per;
  }
  expect_matches(y, r.out, "concat forward");

  CpuRun add({"add", {}, {a, a}});
  const LayerRig& s = add.rig;
  float *sum = dev.put(s.inputs[0]), *other = dev.put(s.inputs[1]), *dsum = dev.put(s.weights_r),
        *dx = dev.get<float>(s.inputs[0].size());
  cuda::write_grad(sum, other, s.out.size(), true, stream);   // y = x0 + x1
  cuda::write_grad(dx, dsum, s.out.size(), false, stream);  // dx_i = dy
  sync();
  expect_matches(sum, s.out, "add forward");
  expect_matches(dx, add.din[1], "add input gradient");
}

TEST_F(CudaTwin, SoftmaxCrossEntropy) {
  const Shape in{7, 10, 1, 1};
  CpuRun cpu({"softmax_cross_entropy", {}, {in}});
  const LayerRig& r = cpu.rig;
  float *z = dev.put(r.inputs[0]), *prob = dev.get<float>(r.inputs[0].size()), *loss = dev.get<float>(1),
        *dz = dev.get<float>(r.inputs[0].size());
  auto* parts = dev.get<double>(in.n);
  int32_t* labels = dev.put(r.labels.data(), r.labels.size());
  // Nothing from the stream-ordered pool, which could tie this stream to another's frees.
  cudaMemPool_t pool = nullptr;
  BP_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
  uint64_t used_before = 0, used_after = 0;
  BP_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &used_before));
  cuda::softmax_xent_forward(z, labels, prob, loss, parts, in.n, in.c, r.ctx.loss_scale, stream);
  const float scale = static_cast<float>(r.weights_r.data()[0] * r.ctx.loss_scale);
  cuda::softmax_xent_backward(prob, labels, scale, dz, in.n, in.c, false, stream);
  sync();
  BP_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &used_after));
  EXPECT_EQ(used_after, used_before) << "the loss allocated from the stream-ordered pool";
  expect_matches(loss, r.out, "loss");
  expect_matches(dz, cpu.din[0], "logit gradient");
}

}  // namespace
}  // namespace burstpool
