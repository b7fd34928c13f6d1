// The twin device's two modes (src/run/twin_device.cpp, twin_stream.hpp):
// its stream defers work until waited for, so a host read that skips the
// wait reads stale values every time; and both modes train the CPU model's
// numbers, bf16 included.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "burstpool/device_model.hpp"
#include "burstpool/model_io.hpp"
#include "run/twin_stream.hpp"

namespace burstpool {
namespace {

TEST(TwinStream, AsynchronousWorkRunsInOrderOnlyWhenWaitedFor) {
  TwinStream stream(true);
  std::vector<int> ran;
  stream.launch([&] { ran.push_back(1); });
  const uint64_t first = stream.record();
  stream.launch([&] { ran.push_back(2); });
  EXPECT_TRUE(ran.empty()) << "launched work ran before anyone waited";
  stream.wait(first);
  EXPECT_EQ(ran, std::vector<int>{1});
  stream.synchronize();
  EXPECT_EQ(ran, (std::vector<int>{1, 2}));
  stream.launch([] { throw std::runtime_error("kernel failed"); });
  EXPECT_THROW(stream.synchronize(), std::runtime_error);
  stream.launch([&] { ran.push_back(3); });
  stream.synchronize();  // the error was reported once; later work still runs
  EXPECT_EQ(ran.back(), 3);
}

TEST(TwinStream, SynchronousWorkRunsAtOnce) {
  TwinStream stream(false);
  int ran = 0;
  stream.launch([&] { ++ran; });
  EXPECT_EQ(ran, 1);
}

const char* kModel =
    "[data]\ntype = input\nshape = 6\n[fc]\ntype = linear\ninputs = data\nout_features = 4\n"
    "[loss]\ntype = softmax_cross_entropy\ninputs = fc\n";

struct Step {
  std::vector<float> images;
  std::vector<int32_t> labels;
};

// Values with more bits than bf16 holds, so rounding the input shows.
Step a_step(int batch) {
  Step s;
  for (int i = 0; i < 6 * batch; ++i) s.images.push_back(0.1f + 0.0123457f * i);
  for (int i = 0; i < batch; ++i) s.labels.push_back(i % 4);
  return s;
}

// kModel at batch 2 and its twin, synchronous or not, with one step's data.
struct TwinRig {
  explicit TwinRig(bool async) : host(parse_model_ini(kModel, "twin.ini"), 2, 3), step(a_step(2)) {
    TwinOptions options;
    options.async = async;
    twin = make_twin_model(host, options);
    ctx.loss_scale = 0.5;
  }
  Model host;
  std::unique_ptr<DeviceModel> twin;
  Step step;
  Context ctx;
};

// A host read of a device buffer without waiting (what a forgotten
// synchronisation does on a GPU) reads what was there before the launch in
// the asynchronous mode, every time; the synchronous twin would have hidden it.
TEST(TwinDevice, AHostReadThatSkipsTheWaitReadsStaleValuesAsynchronously) {
  for (const bool async : {false, true}) {
    TwinRig r(async);
    Model& host = r.host;
    DeviceModel* twin = r.twin.get();
    const Step& s = r.step;
    Context& ctx = r.ctx;
    host.set_batch(2);
    twin->load_input(s.images.data(), 2, s.labels.data(), 2, ctx);
    const int fc = host.find("fc");
    twin->forward_layer(fc, ctx);
    const float* y = twin->address(DeviceModel::Buffer::activation, fc, 0);
    const std::vector<float> unwaited(y, y + 8);
    std::vector<float> waited(8);
    twin->copy_out(DeviceModel::Buffer::activation, fc, 0, waited.data(), 8);
    EXPECT_EQ(unwaited == waited, !async) << (async ? "asynchronous" : "synchronous");
    EXPECT_EQ(unwaited, async ? std::vector<float>(8, 0.0f) : waited);
  }
}

// [job] precision = bf16 rounds the input batch on every path: the CPU
// model's forward (its input layer), and the twin's whole-model and
// layer-by-layer calls, which skip the input layer's forward.
TEST(TwinDevice, Bf16RoundsTheInputOnEveryPath) {
  for (const bool async : {false, true}) {
    TwinRig r(async);
    Model& host = r.host;
    DeviceModel* twin = r.twin.get();
    const Step& s = r.step;
    Context& ctx = r.ctx;
    ctx.precision = Precision::bf16;
    host.set_batch(2);
    host.load_batch(s.images.data());
    ctx.labels = s.labels.data();
    const float cpu = host.forward(ctx);
    ctx.labels = nullptr;
    EXPECT_EQ(twin->forward(2, s.images.data(), s.labels.data(), ctx), cpu) << "whole model";
    twin->load_input(s.images.data(), 2, s.labels.data(), 2, ctx);
    twin->forward_layer(host.find("fc"), ctx);
    twin->forward_layer(host.find("loss"), ctx);
    EXPECT_EQ(twin->loss(), cpu) << "layer by layer";
    ctx.precision = Precision::fp32;
    ctx.labels = s.labels.data();
    EXPECT_NE(host.forward(ctx), cpu) << "the input must not be bf16-exact, or this proves nothing";
  }
}

}  // namespace
}  // namespace burstpool
