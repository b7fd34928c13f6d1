// The twin device: a DeviceModel whose "device" is a second Model of the same
// spec in host memory, run by the CPU layers (make_twin_model). It exists to
// test the executor's, trainer's, learners' and background job's device
// paths on machines without a GPU: every activation, gradient, parameter,
// state and momentum value lives twice, once in the host Model and once in
// the twin, so a copy between them that the callers forget leaves stale
// values on one side and the run no longer matches the CPU path. The layers
// are the CPU ones on the same inputs, so the results are the CPU path's bit
// for bit wherever the sums are taken in the same order.
#include <algorithm>
#include <cstring>

#include "comm/communicator.hpp"
#include "comm/grad_sync.hpp"
#include "comm/slice_mover.hpp"
#include "burstpool/device_model.hpp"
#include "burstpool/error.hpp"

namespace burstpool {
namespace {

// MPI sums that count what they are given.
class CountingReducer final : public GroupReducer {
 public:
  explicit CountingReducer(size_t* floats) : floats_(floats) {}
  void start(float* data, size_t count, const Communicator& group) override {
    if (floats_) *floats_ += count;
    mpi_.start(data, count, group);
  }
  void progress() override { mpi_.progress(); }
  void wait(WaitSite* site) override { mpi_.wait(site); }

 private:
  size_t* floats_;
  MpiGroupReducer mpi_;
};

class TwinDevice final : public DeviceModel {
 public:
  TwinDevice(Model& host, const TwinOptions& options)
      : host_(host),
        options_(options),
        twin_(host.spec(), [&host](const std::string& name) { return host.capacity(host.find(name)); }, 0),
        sgd_(std::make_unique<Sgd>(twin_, SgdOptions{})),
        slot_in_(host.size()),
        slot_grad_(host.size()) {
    for (int i = 0; i < twin_.size(); ++i) {
      slot_in_[i].resize(twin_.inputs(i).size());
      slot_grad_[i].resize(twin_.inputs(i).size());
    }
    from_host(nullptr);
  }

  void join_ranks(DeviceRanks ranks) override { ranks_ = std::move(ranks); }
  void set_before_layer(std::function<void()> hook) override { before_layer_ = std::move(hook); }

  float forward(int batch, const float* images, const int32_t* labels, const Context& ctx) override {
    twin_.set_batch(batch);
    twin_.load_batch(images, ctx.precision);
    Context c = ctx;
    c.labels = labels;
    for (int i = 0; i < twin_.size(); ++i)
      if (i != twin_.input_layer()) {
        if (before_layer_) before_layer_();
        twin_.forward_layer(i, c);
      }
    return twin_.activation(twin_.loss_layer()).data()[0];
  }
  void backward(const Context& ctx) override {
    for (int i = twin_.size() - 1; i >= 0; --i)
      if (i != twin_.input_layer()) {
        if (before_layer_) before_layer_();
        twin_.backward_layer(i, ctx);
      }
    if (!ranks_.host_sum) return;  // one rank
    ranks_.reducing(true);
    ranks_.host_sum(twin_.grads().data(), twin_.param_count());
    ranks_.reducing(false);
  }
  void logits(float* host) override {
    const Tensor& y = twin_.activation(twin_.logits_layer());
    std::memcpy(host, y.data(), y.size() * sizeof(float));
  }
  void sgd_step(float lr, const SgdOptions& options, const std::vector<std::pair<size_t, size_t>>& ranges) override {
    const SgdOptions& now = sgd_->options();
    if (now.momentum != options.momentum || now.nesterov != options.nesterov ||
        now.weight_decay != options.weight_decay) {
      auto sgd = std::make_unique<Sgd>(twin_, options);
      std::swap(sgd->velocity(), sgd_->velocity());
      sgd_ = std::move(sgd);
    }
    sgd_->step(lr, ranges);
  }
  void axpby(float a, Buffer x, float b, Buffer y) override {
    const size_t n = twin_.param_count();
    const float* xs = at(x, -1, 0, n);
    float* ys = at(y, -1, 0, n);
    if (b == 0.0f) {
      for (size_t i = 0; i < n; ++i) ys[i] = a * xs[i];
    } else {
      for (size_t i = 0; i < n; ++i) ys[i] = a * xs[i] + b * ys[i];
    }
  }

  void use_slot_buffers(const std::vector<std::vector<bool>>& direct) override {
    for (int i = 0; i < twin_.size(); ++i)
      for (size_t k = 0; k < twin_.inputs(i).size(); ++k) {
        if (direct[i][k] || twin_.capacity(i) == 0) continue;
        const int p = twin_.inputs(i)[k];
        const Shape shape = twin_.layer(p).output_shape().with_batch(twin_.capacity(i));
        slot_in_[i][k] = Tensor::zeros(shape);
        if (p != twin_.input_layer()) slot_grad_[i][k] = Tensor::zeros(shape);
      }
  }
  void load_input(const float* images, int images_n, const int32_t* labels, int, const Context& ctx) override {
    const int in = twin_.input_layer();
    twin_.set_layer_batch(in, images_n);
    if (images_n > 0) twin_.load_batch(images, ctx.precision);  // the input layer's batch
    labels_ = labels;
  }
  void forward_layer(int i, const Context& ctx) override {
    if (before_layer_) before_layer_();
    twin_.set_layer_batch(i, host_.layer_batch(i));
    std::vector<Tensor> views = inputs(i);
    std::vector<const Tensor*> in;
    for (const Tensor& t : views) in.push_back(&t);
    Context c = ctx;
    c.labels = labels_;
    twin_.layer(i).forward(in, twin_.activation(i), c);
  }
  void backward_layer(int i, const Context& ctx) override {
    if (before_layer_) before_layer_();
    twin_.set_layer_batch(i, host_.layer_batch(i));
    std::vector<Tensor> views = inputs(i), grad_views;
    grad_views.reserve(views.size());
    std::vector<const Tensor*> in;
    std::vector<GradSlot> slots;
    for (size_t k = 0; k < views.size(); ++k) {
      in.push_back(&views[k]);
      const int p = twin_.inputs(i)[k];
      if (p == twin_.input_layer()) {
        slots.push_back({nullptr, false});
      } else if (!slot_grad_[i][k].empty()) {  // overwritten; the executor adds it where it belongs
        grad_views.push_back(slot_grad_[i][k].view(views[k].shape()));
        slots.push_back({&grad_views.back(), false});
      } else {
        grad_views.push_back(twin_.gradient(p).view(views[k].shape()));
        slots.push_back({&grad_views.back(), twin_.accumulates(i, static_cast<int>(k))});
      }
    }
    const Tensor& dout = i == twin_.loss_layer() ? twin_.loss_seed() : twin_.gradient(i);
    Context c = ctx;
    c.labels = labels_;
    twin_.layer(i).backward(in, twin_.activation(i), dout, slots, c);
  }
  float loss() override { return twin_.activation(twin_.loss_layer()).data()[0]; }

  void copy_out(Buffer what, int layer, int slot, float* host, size_t floats) override {
    count_copy(what);
    if (options_.counts) options_.counts->floats_out += floats;
    if (floats == 0) return;
    std::memcpy(host, at(what, layer, slot, floats), floats * sizeof(float));
  }
  void copy_in(Buffer what, int layer, int slot, const float* host, size_t floats) override {
    count_copy(what);
    if (options_.counts) options_.counts->floats_in += floats;
    if (floats == 0) return;
    std::memcpy(at(what, layer, slot, floats), host, floats * sizeof(float));
  }
  DeviceTransport transport(const GroupCache& groups) override {
    DeviceTransport t;
    asked_transport_ = true;
    if (!options_.transport) return t;
    t.slices = std::make_unique<MpiSliceMover>(groups.world());
    t.gradients = std::make_unique<CountingReducer>(options_.counts ? &options_.counts->floats_summed : nullptr);
    return t;
  }
  float* address(Buffer what, int layer, int slot) override { return at(what, layer, slot, 0); }
  void download(const float* device, float* host, size_t floats) override {
    if (options_.counts) options_.counts->floats_out += floats;
    if (floats > 0) std::memcpy(host, device, floats * sizeof(float));
  }
  void upload(float* device, const float* host, size_t floats) override {
    if (options_.counts) options_.counts->floats_in += floats;
    if (floats > 0) std::memcpy(device, host, floats * sizeof(float));
  }
  void to_host(float* velocity) override {
    copy(host_.params(), twin_.params());
    copy(host_.state(), twin_.state());
    if (velocity) std::memcpy(velocity, sgd_->velocity().data(), twin_.param_count() * sizeof(float));
  }
  void from_host(const float* velocity) override {
    copy(twin_.params(), host_.params());
    copy(twin_.state(), host_.state());
    if (velocity) std::memcpy(sgd_->velocity().data(), velocity, twin_.param_count() * sizeof(float));
  }
  void synchronize() override {}  // the twin's work is done when its calls return
  bool supports(LayerKind) const override { return true; }  // it runs the CPU layers
  std::string describe() const override {
    const bool between = ranks_.host_sum || asked_transport_;
    return std::string("twin device (a second model in host memory)") +
           (between ? options_.transport ? ", transport between ranks" : ", between ranks through host memory" : "");
  }

 private:
  void count_copy(Buffer what) {
    if (options_.counts && what == Buffer::parameter_gradient) ++options_.counts->parameter_gradient_copies;
    if (options_.counts && what == Buffer::parameters) ++options_.counts->parameter_copies;
  }
  static void copy(Tensor& to, const Tensor& from) {
    if (from.size() > 0) std::memcpy(to.data(), from.data(), from.size() * sizeof(float));
  }
  // A layer's inputs in its slicing: its own slot buffers, else the producers' activations.
  std::vector<Tensor> inputs(int i) {
    std::vector<Tensor> views;
    for (size_t k = 0; k < twin_.inputs(i).size(); ++k) {
      const int p = twin_.inputs(i)[k];
      const Shape shape = twin_.layer(p).output_shape().with_batch(host_.layer_batch(i));
      views.push_back(slot_in_[i][k].empty() ? twin_.activation(p).view(shape) : slot_in_[i][k].view(shape));
    }
    return views;
  }
  // Where `floats` values of a buffer start; checked against the buffer's full size.
  float* at(Buffer what, int layer, int slot, size_t floats) {
    Tensor* whole = nullptr;
    size_t offset = 0, limit = 0;
    switch (what) {
      case Buffer::activation: whole = &twin_.activation(layer); limit = capacity_floats(layer); break;
      case Buffer::gradient: whole = &twin_.gradient(layer); limit = capacity_floats(layer); break;
      case Buffer::slot_input: whole = &slot_in_[layer][slot]; limit = whole->size(); break;
      case Buffer::slot_gradient: whole = &slot_grad_[layer][slot]; limit = whole->size(); break;
      case Buffer::parameter_gradient: whole = &twin_.grads(); break;
      case Buffer::parameters: whole = &twin_.params(); break;
      case Buffer::state: whole = &twin_.state(); break;
      case Buffer::momentum: whole = &sgd_->velocity(); break;
      case Buffer::scratch_a:
      case Buffer::scratch_b:
      case Buffer::scratch_c:
      case Buffer::scratch_d: whole = &scratch(what); break;
    }
    if (what == Buffer::parameter_gradient || what == Buffer::parameters || what == Buffer::state) {
      const auto range = layer < 0 ? std::pair<size_t, size_t>{0, whole->size()}
                                   : what == Buffer::state ? twin_.state_range(layer) : twin_.param_range(layer);
      offset = range.first;
      limit = range.second;
    }
    if (what == Buffer::momentum || scratch_slot(what) >= 0) {
      BP_CHECK(layer < 0, "twin device: layer {} of a whole-model vector", layer);
      limit = whole->size();
    }
    BP_CHECK(!whole->empty() && floats <= limit, "twin device: {} floats of layer {} slot {} past its buffer", floats,
             layer, slot);
    return whole->data() + offset;
  }
  Tensor& scratch(Buffer which) {
    Tensor& t = scratch_[scratch_slot(which)];
    if (t.empty()) t = Tensor::zeros(Shape{1, static_cast<int>(twin_.param_count())});
    return t;
  }
  size_t capacity_floats(int layer) const {
    if (twin_.layer(layer).is_loss()) return 1;
    return twin_.layer(layer).output_shape().per_sample() * static_cast<size_t>(twin_.capacity(layer));
  }

  Model& host_;
  TwinOptions options_;
  Model twin_;
  std::unique_ptr<Sgd> sgd_;  // the twin's velocity
  Tensor scratch_[kScratchVectors];  // Buffer::scratch_a to scratch_d, made at first use
  std::vector<std::vector<Tensor>> slot_in_, slot_grad_;
  DeviceRanks ranks_;
  std::function<void()> before_layer_;
  const int32_t* labels_ = nullptr;
  bool asked_transport_ = false;
};

}  // namespace

std::unique_ptr<DeviceModel> make_twin_model(Model& host, const TwinOptions& options) {
  return std::make_unique<TwinDevice>(host, options);
}

}  // namespace burstpool
