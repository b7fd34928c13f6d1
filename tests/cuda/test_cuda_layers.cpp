// CUDA layers against their CPU twins, forward and backward. Every test skips
// when no GPU is visible. Tolerance: |gpu - cpu| <= 1e-4 (1 + |cpu|); fp32
// on both sides (cuBLAS in pedantic math mode: no TF32), the difference is the
// order of the sums.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "burstpool/device.hpp"
#include "cuda/ops/kernels.hpp"
#include "cuda/check.hpp"
#include "cuda/context.hpp"
#include "layers/kernels.hpp"

namespace burstpool {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible"

std::vector<float> random_vector(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Device copy of a host vector, freed with the test.
struct DeviceBuffer {
  explicit DeviceBuffer(const std::vector<float>& host) : n(host.size()) {
    BP_CUDA_CHECK(cudaMalloc(&ptr, std::max<size_t>(1, n) * sizeof(float)));
    BP_CUDA_CHECK(cudaMemcpy(ptr, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  }
  explicit DeviceBuffer(size_t count) : DeviceBuffer(std::vector<float>(count, 0.0f)) {}
  ~DeviceBuffer() { cudaFree(ptr); }
  std::vector<float> host() const {
    std::vector<float> out(n);
    BP_CUDA_CHECK(cudaMemcpy(out.data(), ptr, n * sizeof(float), cudaMemcpyDeviceToHost));
    return out;
  }
  float* ptr = nullptr;
  size_t n;
};

void expect_close(const std::vector<float>& gpu, const std::vector<float>& cpu, const char* what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i)
    ASSERT_LE(std::abs(gpu[i] - cpu[i]), 1e-4f * (1 + std::abs(cpu[i]))) << what << " [" << i << "]";
}

TEST(CudaLayers, ReluMatchesCpu) {
  SKIP_WITHOUT_GPU();
  cuda::Context ctx(0);
  const size_t n = 10007;
  const auto x = random_vector(n, 1), dy = random_vector(n, 2), dx0 = random_vector(n, 3);
  DeviceBuffer dx_(x), dy_(dy), y_(n), dx_acc(dx0), dx_over(dx0);
  cudaStream_t s = ctx.stream(StreamRole::foreground);
  cuda::relu_forward(dx_.ptr, y_.ptr, n, s);
  cuda::relu_backward(dx_.ptr, dy_.ptr, dx_acc.ptr, n, true, s);
  cuda::relu_backward(dx_.ptr, dy_.ptr, dx_over.ptr, n, false, s);
  BP_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<float> y(n), acc(n), over(n);
  for (size_t i = 0; i < n; ++i) {
    y[i] = std::max(x[i], 0.0f);
    over[i] = x[i] > 0 ? dy[i] : 0.0f;
    acc[i] = dx0[i] + over[i];
  }
  expect_close(y_.host(), y, "relu forward");
  expect_close(dx_acc.host(), acc, "relu backward, accumulate");
  expect_close(dx_over.host(), over, "relu backward, overwrite");
}

TEST(CudaLayers, LinearMatchesCpuGemm) {
  SKIP_WITHOUT_GPU();
  cuda::Context ctx(0);
  const int n = 33, in = 70, out = 19;
  const auto x = random_vector(size_t(n) * in, 4), w = random_vector(size_t(out) * in, 5),
             b = random_vector(out, 6), dy = random_vector(size_t(n) * out, 7);
  // CPU twin, as layers/linear.cpp computes it.
  std::vector<float> y(size_t(n) * out), dw(size_t(out) * in), db(out, 0.0f), dx(size_t(n) * in);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < out; ++c) y[size_t(r) * out + c] = b[c];
  cpu::gemm(false, true, n, out, in, 1.0f, x.data(), in, w.data(), in, 1.0f, y.data(), out);
  cpu::gemm(true, false, out, in, n, 1.0f, dy.data(), out, x.data(), in, 0.0f, dw.data(), in);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < out; ++c) db[c] += dy[size_t(r) * out + c];
  cpu::gemm(false, false, n, in, out, 1.0f, dy.data(), out, w.data(), in, 0.0f, dx.data(), in);

  DeviceBuffer x_(x), w_(w), b_(b), dy_(dy), y_(y.size()), dw_(dw.size()), db_(db.size()), dx_(dx.size());
  cudaStream_t s = ctx.stream(StreamRole::foreground);
  cuda::linear_forward(ctx.cublas(), x_.ptr, w_.ptr, b_.ptr, y_.ptr, n, in, out, s);
  cuda::linear_backward(ctx.cublas(), x_.ptr, w_.ptr, dy_.ptr, dw_.ptr, db_.ptr, dx_.ptr, false, n, in, out, s);
  BP_CUDA_CHECK(cudaStreamSynchronize(s));
  expect_close(y_.host(), y, "linear forward");
  expect_close(dw_.host(), dw, "linear weight gradient");
  expect_close(db_.host(), db, "linear bias gradient");
  expect_close(dx_.host(), dx, "linear input gradient");
}

// [job] precision = tf32: cuBLAS rounds each product's inputs to TF32 (a
// 10-bit mantissa: relative error at most 2^-11 each, so at most about 2^-10
// per product) and sums in fp32. The bound per output is therefore
// (2^-10 + in x 2^-24) x sum |x w|: from the format, not from a reading.
TEST(CudaLayers, LinearInTf32StaysWithinTheFormatsBound) {
  SKIP_WITHOUT_GPU();
  cuda::Context ctx(0);
  const int n = 64, in = 512, out = 32;
  const auto x = random_vector(size_t(n) * in, 8), w = random_vector(size_t(out) * in, 9);
  DeviceBuffer x_(x), w_(w), y_(size_t(n) * out);
  cudaStream_t s = ctx.stream(StreamRole::foreground);
  cuda::set_gemm_precision(ctx.cublas(), true);
  cuda::linear_forward(ctx.cublas(), x_.ptr, w_.ptr, nullptr, y_.ptr, n, in, out, s);
  BP_CUDA_CHECK(cudaStreamSynchronize(s));
  cuda::set_gemm_precision(ctx.cublas(), false);
  const std::vector<float> y = y_.host();
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < out; ++c) {
      double exact = 0, magnitude = 0;
      for (int k = 0; k < in; ++k) {
        const double t = double(x[size_t(r) * in + k]) * w[size_t(c) * in + k];
        exact += t, magnitude += std::abs(t);
      }
      const double err = std::abs(y[size_t(r) * out + c] - exact);
      ASSERT_LE(err, (std::ldexp(1.0, -10) + in * std::ldexp(1.0, -24)) * magnitude) << "[" << r << ", " << c << "]";
    }
}

// Whether TF32 is used at all, from the format alone: x = 1 + 2^-20 is an
// fp32 value whose TF32 rounding (10 mantissa bits, nearest or truncated) is
// 1, and w = 1. Every partial sum of `in` = 512 such products is exact in
// fp32 (512 + 2^-11 is a multiple of the ulp at 512, 2^-14), so fp32 gives
// 512 + 2^-11 exactly and TF32 gives 512 exactly: any other value, or the
// fp32 one with TF32 asked for, fails. (A statistical check, "the error is
// N times fp32's", fails on real TF32, whose error on random data is only a
// few times fp32's bound.)
TEST(CudaLayers, Tf32RoundsTheProductsInputsAndPedanticModeDoesNot) {
  SKIP_WITHOUT_GPU();
  cuda::Context ctx(0);
  const int n = 64, in = 512, out = 32;
  const float one_plus = 1.0f + std::ldexp(1.0f, -20);
  DeviceBuffer x_(std::vector<float>(size_t(n) * in, one_plus)), w_(std::vector<float>(size_t(out) * in, 1.0f));
  DeviceBuffer y_(size_t(n) * out);
  cudaStream_t s = ctx.stream(StreamRole::foreground);
  for (const bool tf32 : {true, false}) {
    cuda::set_gemm_precision(ctx.cublas(), tf32);
    cuda::linear_forward(ctx.cublas(), x_.ptr, w_.ptr, nullptr, y_.ptr, n, in, out, s);
    BP_CUDA_CHECK(cudaStreamSynchronize(s));
    const float expected = tf32 ? 512.0f : 512.0f + std::ldexp(1.0f, -11);
    for (float v : y_.host()) ASSERT_EQ(v, expected) << (tf32 ? "TF32" : "pedantic fp32");
  }
}

TEST(CudaContext, StreamsGetTheirRolesPriorities) {
  SKIP_WITHOUT_GPU();
  cuda::Context ctx(0);
  for (StreamRole role : {StreamRole::foreground, StreamRole::gradient_sync, StreamRole::background}) {
    int priority = 0;
    BP_CUDA_CHECK(cudaStreamGetPriority(ctx.stream(role), &priority));
    EXPECT_EQ(priority, stream_priority(role, ctx.priorities())) << to_string(role);
  }
}

// A failed cudaMalloc is also the thread's last error; the allocator handles
// it (releasing its cache and retrying, or throwing its own message), so it
// must not surface later as the failure of an unrelated kernel launch.
TEST(CudaContext, AHandledAllocationFailureDoesNotFailTheNextLaunch) {
  SKIP_WITHOUT_GPU();
  cuda::Context ctx(0);
  EXPECT_THROW(ctx.allocator().allocate(size_t(1) << 52), Error);  // 4 PiB: more than any GPU has
  DeviceBuffer x_(random_vector(256, 3)), y_(size_t(256));
  cudaStream_t s = ctx.stream(StreamRole::foreground);
  EXPECT_NO_THROW(cuda::relu_forward(x_.ptr, y_.ptr, 256, s));
  BP_CUDA_CHECK(cudaStreamSynchronize(s));
}

// Without a GPU too: the events the host waits on block exactly when the
// device's schedule does (cudaEventSynchronize spins on an event without
// cudaEventBlockingSync whatever the device's flags).
TEST(CudaContext, HostWaitedEventsBlockWhenTheDeviceBlocks) {
  const unsigned blocking = cudaEventDisableTiming | cudaEventBlockingSync;
  EXPECT_EQ(cuda::host_wait_event_flags(cudaDeviceScheduleBlockingSync), blocking);
  EXPECT_EQ(cuda::host_wait_event_flags(cudaDeviceScheduleBlockingSync | cudaDeviceMapHost), blocking);
  EXPECT_EQ(cuda::host_wait_event_flags(cudaDeviceScheduleSpin), unsigned(cudaEventDisableTiming));
  EXPECT_EQ(cuda::host_wait_event_flags(cudaDeviceScheduleYield), unsigned(cudaEventDisableTiming));
  EXPECT_EQ(cuda::host_wait_event_flags(cudaDeviceScheduleAuto | cudaDeviceMapHost), unsigned(cudaEventDisableTiming));
}

TEST(CudaContext, AllocatorReusesDeviceMemory) {
  SKIP_WITHOUT_GPU();
  cuda::Context ctx(0);
  void* p = ctx.allocator().allocate(1 << 20);
  ctx.allocator().deallocate(p);
  EXPECT_EQ(ctx.allocator().allocate(1 << 20), p);
}

}  // namespace
}  // namespace burstpool
