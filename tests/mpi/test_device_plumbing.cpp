// What the executor hands a device model on N ranks, checked with a recording
// device model on the CPU (the CUDA model itself needs a GPU, tests/cuda):
// each rank's slice of the batch and its global sample offset, a batch-norm
// group sum over all ranks, a gradient sum over all ranks that raises the
// reduce flag (a background job's gate) while it waits, the background gate
// forwarded to the device. (Burst plans on a device: tests/mpi/test_equivalence.cpp.)
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "burstpool/error.hpp"
#include "burstpool/executor.hpp"
#include "comm/grad_sync.hpp"
#include "comm/slice_mover.hpp"
#include "burstpool/model_io.hpp"

namespace burstpool {
namespace {

const char* kModel =
    "[data]\ntype = input\nshape = 3\n[fc]\ntype = linear\ninputs = data\nout_features = 2\n"
    "[loss]\ntype = softmax_cross_entropy\ninputs = fc\n";

struct Seen {
  bool joined = false;
  int count = -1;
  int64_t offset = -1;
  float first_image = -1;
  int32_t first_label = -1;
  double group_sum = 0;            // of (rank + 1) over the group, from forward
  std::vector<float> gradient;     // after the sum in backward
  bool flag_raised_in_sum = false;
  int hook_calls = 0;
};

class RecordingDevice final : public DeviceModel {
 public:
  RecordingDevice(Seen& seen, std::atomic<bool>& flag, int rank) : seen_(seen), flag_(flag), rank_(rank) {}
  void join_ranks(DeviceRanks ranks) override {
    seen_.joined = true;
    ranks_ = std::move(ranks);
  }
  void set_before_layer(std::function<void()> hook) override { hook_ = std::move(hook); }
  float forward(int batch, const float* images, const int32_t* labels, const Context& ctx) override {
    if (hook_) hook_(), ++seen_.hook_calls;
    seen_.count = batch;
    seen_.offset = ctx.sample_offset;
    seen_.first_image = images[0];
    seen_.first_label = labels[0];
    double v = rank_ + 1;
    if (ctx.sum_over_group) ctx.sum_over_group(&v, 1);
    seen_.group_sum = v;
    return 0.5f;
  }
  void backward(const Context&) override {
    seen_.gradient = {static_cast<float>(rank_), 1.0f, 2.0f * rank_};
    if (!ranks_.host_sum) return;
    ranks_.reducing(true);
    ranks_.host_sum(seen_.gradient.data(), seen_.gradient.size());
    seen_.flag_raised_in_sum = flag_.load();
    ranks_.reducing(false);
  }
  void logits(float*) override {}
  void sgd_step(float, const SgdOptions&, const std::vector<std::pair<size_t, size_t>>&) override {}
  void axpby(float, Buffer, float, Buffer) override { ADD_FAILURE() << "sync strategy pieces"; }
  // Burst plans only: not reached with a data-parallel plan.
  void use_slot_buffers(const std::vector<std::vector<bool>>&) override { ADD_FAILURE() << "burst path"; }
  void load_input(const float*, int, const int32_t*, int, const Context&) override { ADD_FAILURE() << "burst path"; }
  void forward_layer(int, const Context&) override { ADD_FAILURE() << "burst path"; }
  void backward_layer(int, const Context&) override { ADD_FAILURE() << "burst path"; }
  float loss() override { return 0; }
  void copy_out(Buffer, int, int, float*, size_t) override { ADD_FAILURE() << "burst path"; }
  void copy_in(Buffer, int, int, const float*, size_t) override { ADD_FAILURE() << "burst path"; }
  void download(const float*, float*, size_t) override { ADD_FAILURE() << "burst path"; }
  void upload(float*, const float*, size_t) override { ADD_FAILURE() << "burst path"; }
  DeviceTransport transport(const GroupCache&) override {
    ADD_FAILURE() << "burst path";
    return {};
  }
  float* address(Buffer, int, int) override {
    ADD_FAILURE() << "burst path";
    return nullptr;
  }
  void to_host(float*) override {}
  void from_host(const float*) override {}
  std::string describe() const override { return "recording"; }
  bool supports(LayerKind kind) const override { return kind != refused; }
  std::optional<LayerKind> refused;  // a kind this device pretends not to run
  void synchronize() override {}

 private:
  Seen& seen_;
  std::atomic<bool>& flag_;
  int rank_;
  DeviceRanks ranks_;
  std::function<void()> hook_;
};

TEST(DevicePlumbing, SlicesGroupSumsAndGradientSumsReachTheDevice) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const ModelSpec spec = parse_model_ini(kModel, "m.ini");
  const int batch = 4 * size + 1;  // uneven slices
  Executor exec(spec, data_parallel_plan(spec, size, batch), MPI_COMM_WORLD, 1, 1 << 20);
  Seen seen;
  std::atomic<bool> flag{false};
  exec.set_reduce_flag(&flag);
  exec.use_device(std::make_unique<RecordingDevice>(seen, flag, rank));
  int gate = 0;
  exec.set_before_layer([&gate] { ++gate; });  // set after use_device: must still reach the device

  const Slice mine = exec.input_slice(batch);
  std::vector<float> images(3 * mine.count);
  std::vector<int32_t> labels(mine.count);
  for (int s = 0; s < mine.count; ++s) images[3 * s] = static_cast<float>(mine.offset + s), labels[s] = mine.offset + s;
  Context ctx;
  ctx.loss_scale = 1.0 / batch;
  exec.forward(batch, images.data(), labels.data(), ctx);
  exec.backward(ctx);

  EXPECT_EQ(seen.joined, size > 1);
  EXPECT_EQ(seen.count, mine.count);
  EXPECT_EQ(seen.offset, mine.offset);
  EXPECT_EQ(seen.first_image, static_cast<float>(mine.offset));
  EXPECT_EQ(seen.first_label, mine.offset);
  EXPECT_EQ(seen.group_sum, size * (size + 1) / 2.0);  // batch norm would see every rank's sums
  const float ranks_sum = size * (size - 1) / 2.0f;
  EXPECT_EQ(seen.gradient, (std::vector<float>{size > 1 ? ranks_sum : 0.0f, static_cast<float>(size > 1 ? size : 1),
                                               size > 1 ? 2 * ranks_sum : 0.0f}));
  EXPECT_EQ(seen.flag_raised_in_sum, size > 1);
  EXPECT_FALSE(flag.load());
  EXPECT_EQ(gate, 1);
  EXPECT_EQ(seen.hook_calls, 1);
  EXPECT_EQ(exec.times().allreduce > 0, size > 1);  // the sums are timed as reductions
  exec.set_reduce_flag(nullptr);
}

// A device that lacks a layer kind of the model is refused before anything
// runs, with a line naming the layer, its type and the device.
TEST(DevicePlumbing, ADeviceWithoutALayerKindIsRefusedNamingTheLayer) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const ModelSpec spec = parse_model_ini(kModel, "m.ini");
  Executor exec(spec, data_parallel_plan(spec, size, 2 * size), MPI_COMM_WORLD, 1, 1 << 20);
  Seen seen;
  std::atomic<bool> flag{false};
  auto device = std::make_unique<RecordingDevice>(seen, flag, 0);
  device->refused = LayerKind::linear;
  try {
    exec.use_device(std::move(device));
    ADD_FAILURE() << "a device without linear layers was taken";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), spec.name + ": layer 'fc': type linear does not run on recording");
  }
  EXPECT_FALSE(exec.on_accelerator());
}

// The CPU is a device like the others: code that moves values between the
// host Model and "the device" calls it without asking which it is. Its
// buffers are the Model's, so a move from or to the Model's own memory
// copies nothing, and a move from other memory lands in the right range.
TEST(DevicePlumbing, TheHostDeviceIsTheModelsOwnMemory) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const ModelSpec spec = parse_model_ini(kModel, "m.ini");
  Executor exec(spec, data_parallel_plan(spec, size, 2 * size), MPI_COMM_WORLD, 1, 1 << 20);
  EXPECT_FALSE(exec.on_accelerator());
  DeviceModel& device = exec.device();
  EXPECT_EQ(device.describe(), "CPU");
  Model& m = exec.model();
  const size_t n = m.param_count();
  const int fc = 1;
  const auto [offset, count] = m.param_range(fc);
  ASSERT_EQ(count, 8u);  // 3 x 2 weights and 2 biases
  using B = DeviceModel::Buffer;
  EXPECT_EQ(device.address(B::parameters, -1, 0), m.params().data());
  EXPECT_EQ(device.address(B::parameters, fc, 0), m.params().data() + offset);
  std::vector<float> out(n, -1.0f);
  device.copy_out(B::parameters, -1, 0, out.data(), n);
  EXPECT_EQ(out, std::vector<float>(m.params().data(), m.params().data() + n));
  std::vector<float> layer(count);
  std::iota(layer.begin(), layer.end(), 10.0f);
  device.copy_in(B::parameters, fc, 0, layer.data(), count);
  EXPECT_EQ(std::vector<float>(m.params().data() + offset, m.params().data() + offset + count), layer);
  device.copy_in(B::parameters, -1, 0, m.params().data(), n);  // onto itself
  std::iota(m.grads().data(), m.grads().data() + n, 1.0f);
  device.copy_out(B::parameter_gradient, -1, 0, m.grads().data(), n);  // onto itself
  std::vector<float> counted(n);
  std::iota(counted.begin(), counted.end(), 1.0f);
  EXPECT_EQ(std::vector<float>(m.grads().data(), m.grads().data() + n), counted);
  std::vector<float> velocity(n, 7.0f);
  device.to_host(velocity.data());  // the velocity is the host optimizer's: untouched
  device.from_host(velocity.data());
  EXPECT_EQ(velocity, std::vector<float>(n, 7.0f));
  EXPECT_EQ(std::vector<float>(m.params().data() + offset, m.params().data() + offset + count), layer);
}

// One rank has no one to move slices to or sum with: a device asked for its
// transport on one rank makes none (the CUDA model made a one-rank NCCL
// communicator), and the banner does not speak of ranks.
TEST(DevicePlumbing, OneRankMakesNoTransportBetweenRanks) {
  const ModelSpec spec = parse_model_ini(kModel, "m.ini");
  Executor exec(spec, data_parallel_plan(spec, 1, 2), MPI_COMM_SELF, 1, 1 << 20);
  TwinOptions options;
  options.transport = true;
  exec.use_device(make_twin_model(exec.model(), options), {false, false});
  EXPECT_EQ(exec.device().describe().find("between ranks"), std::string::npos) << exec.device().describe();
}

}  // namespace
}  // namespace burstpool
