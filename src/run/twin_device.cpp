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
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/grad_sync.hpp"
#include "comm/slice_mover.hpp"
#include "burstpool/device_model.hpp"
#include "burstpool/error.hpp"
#include "run/twin_stream.hpp"

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

// Orders a transport's work after the twin's launched work, as a CUDA
// stream orders NCCL's: before an exchange or a sum reads device buffers,
// what was launched into them has run. (The transports themselves are MPI
// on the calling thread.)
class OrderedMover final : public SliceMover {
 public:
  OrderedMover(std::unique_ptr<SliceMover> inner, TwinStream& stream) : inner_(std::move(inner)), stream_(stream) {}
  void keep(float* dst, const float* src, size_t n, bool accumulate) override {
    ordered();
    inner_->keep(dst, src, n, accumulate);
  }
  void send(const float* src, size_t n, int peer, int tag) override {
    ordered();
    inner_->send(src, n, peer, tag);
  }
  void receive(float* dst, size_t n, int peer, int tag, bool accumulate) override {
    ordered();
    inner_->receive(dst, n, peer, tag, accumulate);
  }
  void finish(WaitSite* site) override {
    ordered();
    inner_->finish(site);
    synced_ = false;
  }
  bool can_park() const override { return inner_->can_park(); }
  size_t park() override {
    synced_ = false;
    return inner_->park();
  }
  void complete(size_t batch, WaitSite* site) override { inner_->complete(batch, site); }

 private:
  void ordered() {
    if (!synced_) stream_.synchronize();
    synced_ = true;
  }
  std::unique_ptr<SliceMover> inner_;
  TwinStream& stream_;
  bool synced_ = false;  // since the exchange's first piece
};

class OrderedReducer final : public GroupReducer {
 public:
  OrderedReducer(std::unique_ptr<GroupReducer> inner, TwinStream& stream) : inner_(std::move(inner)), stream_(stream) {}
  void start(float* data, size_t count, const Communicator& group) override {
    stream_.synchronize();  // the layer's gradients are written
    inner_->start(data, count, group);
  }
  void progress() override { inner_->progress(); }
  void wait(WaitSite* site) override { inner_->wait(site); }

 private:
  std::unique_ptr<GroupReducer> inner_;
  TwinStream& stream_;
};

// Every call that computes or writes the twin's memory is launched on its
// stream; every call that reads it for the host waits for the stream first.
// Host memory handed in (a batch, a copy_in) is copied when the call is made,
// as the CUDA model's calls read theirs before they return.
class TwinDevice final : public DeviceModel {
 public:
  TwinDevice(Model& host, const TwinOptions& options)
      : host_(host),
        options_(options),
        twin_(host.spec(), [&host](const std::string& name) { return host.capacity(host.find(name)); }, 0),
        sgd_(std::make_unique<Sgd>(twin_, SgdOptions{})),
        slot_in_(host.size()),
        slot_grad_(host.size()),
        stream_(options.async) {
    for (int i = 0; i < twin_.size(); ++i) {
      slot_in_[i].resize(twin_.inputs(i).size());
      slot_grad_[i].resize(twin_.inputs(i).size());
    }
    from_host(nullptr);
  }
  ~TwinDevice() override {
    try {
      stream_.synchronize();
    } catch (...) {  // already reported, or the run is failing anyway
    }
  }

  void join_ranks(DeviceRanks ranks) override { ranks_ = std::move(ranks); }
  void set_before_layer(std::function<void()> hook) override { before_layer_ = std::move(hook); }

  float forward(int batch, const float* images, const int32_t* labels, const Context& ctx) override {
    stage_batch(images, static_cast<size_t>(batch) * twin_.sample_shape().per_sample(), labels, batch);
    stream_.launch([this, batch, precision = ctx.precision, images = images_] {
      twin_.set_batch(batch);
      twin_.load_batch(images->data(), precision);
    });
    for (int i = 0; i < twin_.size(); ++i)
      if (i != twin_.input_layer()) {
        next_piece();
        run_layer(i, ctx, [this, i](const Context& c) { twin_.forward_layer(i, c); });
      }
    return loss();
  }
  void backward(const Context& ctx) override {
    for (int i = twin_.size() - 1; i >= 0; --i)
      if (i != twin_.input_layer()) {
        next_piece();
        run_layer(i, ctx, [this, i](const Context& c) { twin_.backward_layer(i, c); });
      }
    stream_.synchronize();  // as the CUDA model's backward returns with its work done
    if (!ranks_.host_sum) return;  // one rank
    ranks_.reducing(true);
    ranks_.host_sum(twin_.grads().data(), twin_.param_count());
    ranks_.reducing(false);
  }
  void logits(float* host) override {
    stream_.synchronize();
    const Tensor& y = twin_.activation(twin_.logits_layer());
    std::memcpy(host, y.data(), y.size() * sizeof(float));
  }
  void sgd_step(float lr, const SgdOptions& options, const std::vector<std::pair<size_t, size_t>>& ranges) override {
    stream_.launch([this, lr, options, ranges] {
      const SgdOptions& now = sgd_->options();
      if (now.momentum != options.momentum || now.nesterov != options.nesterov ||
          now.weight_decay != options.weight_decay) {
        auto sgd = std::make_unique<Sgd>(twin_, options);
        std::swap(sgd->velocity(), sgd_->velocity());
        sgd_ = std::move(sgd);
      }
      sgd_->step(lr, ranges);
    });
    stream_.synchronize();  // as the CUDA model's step returns with it done
  }
  void axpby(float a, Buffer x, float b, Buffer y) override {
    stream_.launch([this, a, x, b, y] {
      const size_t n = twin_.param_count();
      const float* xs = at(x, -1, 0, n);
      float* ys = at(y, -1, 0, n);
      if (b == 0.0f) {
        for (size_t i = 0; i < n; ++i) ys[i] = a * xs[i];
      } else {
        for (size_t i = 0; i < n; ++i) ys[i] = a * xs[i] + b * ys[i];
      }
    });
  }

  void use_slot_buffers(const std::vector<std::vector<bool>>& direct) override {
    stream_.synchronize();
    for (int i = 0; i < twin_.size(); ++i)
      for (size_t k = 0; k < twin_.inputs(i).size(); ++k) {
        if (direct[i][k] || twin_.capacity(i) == 0) continue;
        const int p = twin_.inputs(i)[k];
        const Shape shape = twin_.layer(p).output_shape().with_batch(twin_.capacity(i));
        slot_in_[i][k] = Tensor::zeros(shape);
        if (p != twin_.input_layer()) slot_grad_[i][k] = Tensor::zeros(shape);
      }
  }
  void load_input(const float* images, int images_n, const int32_t* labels, int labels_n, const Context& ctx) override {
    stage_batch(images, static_cast<size_t>(images_n) * twin_.sample_shape().per_sample(), labels, labels_n);
    stream_.launch([this, images_n, precision = ctx.precision, images = images_] {
      twin_.set_layer_batch(twin_.input_layer(), images_n);
      if (images_n > 0) twin_.load_batch(images->data(), precision);  // the input layer's batch
    });
  }
  void forward_layer(int i, const Context& ctx) override {
    next_piece();
    const int n = host_.layer_batch(i);
    run_layer(i, ctx, [this, i, n](const Context& c) {
      twin_.set_layer_batch(i, n);
      std::vector<Tensor> views = inputs(i, n);
      std::vector<const Tensor*> in;
      for (const Tensor& t : views) in.push_back(&t);
      twin_.layer(i).forward(in, twin_.activation(i), c);
    });
  }
  void backward_layer(int i, const Context& ctx) override {
    next_piece();
    const int n = host_.layer_batch(i);
    run_layer(i, ctx, [this, i, n](const Context& c) { layer_backward(i, n, c); });
  }
  float loss() override {
    stream_.synchronize();
    return twin_.activation(twin_.loss_layer()).data()[0];
  }

  void copy_out(Buffer what, int layer, int slot, float* host, size_t floats) override {
    count_copy(what);
    if (options_.counts) options_.counts->floats_out += floats;
    if (floats == 0) return;
    stream_.synchronize();
    std::memcpy(host, at(what, layer, slot, floats), floats * sizeof(float));
  }
  void copy_in(Buffer what, int layer, int slot, const float* host, size_t floats) override {
    count_copy(what);
    if (options_.counts) options_.counts->floats_in += floats;
    if (floats == 0) return;
    auto staged = std::make_shared<std::vector<float>>(host, host + floats);
    stream_.launch([this, what, layer, slot, staged] {
      std::memcpy(at(what, layer, slot, staged->size()), staged->data(), staged->size() * sizeof(float));
    });
  }
  DeviceTransport transport(const GroupCache& groups) override {
    DeviceTransport t;
    if (groups_size(groups) == 1) return t;  // one rank: nothing moves between ranks
    asked_transport_ = true;
    if (!options_.transport) return t;  // then through the host
    t.slices = std::make_unique<OrderedMover>(std::make_unique<MpiSliceMover>(groups.world()), stream_);
    t.gradients = std::make_unique<OrderedReducer>(
        std::make_unique<CountingReducer>(options_.counts ? &options_.counts->floats_summed : nullptr), stream_);
    return t;
  }
  // No wait, as on a GPU: the address is known before the work that fills it
  // has run. (Asynchronously, the worker runs only while the caller waits,
  // so the two never touch the twin at once.)
  float* address(Buffer what, int layer, int slot) override { return at(what, layer, slot, 0); }
  void download(const float* device, float* host, size_t floats) override {
    if (options_.counts) options_.counts->floats_out += floats;
    if (floats == 0) return;
    stream_.synchronize();
    std::memcpy(host, device, floats * sizeof(float));
  }
  void upload(float* device, const float* host, size_t floats) override {
    if (options_.counts) options_.counts->floats_in += floats;
    if (floats == 0) return;
    auto staged = std::make_shared<std::vector<float>>(host, host + floats);
    stream_.launch([device, staged] { std::memcpy(device, staged->data(), staged->size() * sizeof(float)); });
  }
  void to_host(float* velocity) override {
    stream_.synchronize();
    copy(host_.params(), twin_.params());
    copy(host_.state(), twin_.state());
    if (velocity) std::memcpy(velocity, sgd_->velocity().data(), twin_.param_count() * sizeof(float));
  }
  void from_host(const float* velocity) override {
    stream_.synchronize();  // nothing launched still writes them
    copy(twin_.params(), host_.params());
    copy(twin_.state(), host_.state());
    if (velocity) std::memcpy(sgd_->velocity().data(), velocity, twin_.param_count() * sizeof(float));
  }
  void synchronize() override { stream_.synchronize(); }
  bool supports(LayerKind) const override { return true; }  // it runs the CPU layers
  std::string describe() const override {
    const bool between = ranks_.host_sum || asked_transport_;
    return std::string("twin device (a second model in host memory") + (stream_.async() ? ", asynchronous)" : ")") +
           (between ? options_.transport ? ", transport between ranks" : ", between ranks through host memory" : "");
  }

 private:
  // Launches one layer's work with this step's context (labels: the staged
  // batch's). A batch-norm layer whose statistics are summed over ranks
  // (ctx.sum_over_group: MPI) runs on the calling thread once the stream is
  // done, as the CUDA model copies its sums to the host and waits.
  template <class Work>
  void run_layer(int i, const Context& ctx, Work work, bool staged_labels = true) {
    Context c = ctx;
    if (staged_labels) c.labels = labels_ && !labels_->empty() ? labels_->data() : nullptr;
    if (c.sum_over_group && twin_.layer(i).kind() == LayerKind::batchnorm2d) {
      stream_.synchronize();
      return work(c);
    }
    stream_.launch([work, c, labels = labels_] { work(c); });
  }
  // The background gate decides with the previous layer's work done.
  void next_piece() {
    if (!before_layer_) return;
    stream_.synchronize();
    before_layer_();
  }
  // This step's images and labels, copied now: the caller may reuse its memory once the call returns.
  void stage_batch(const float* images, size_t floats, const int32_t* labels, int labels_n) {
    images_ = std::make_shared<std::vector<float>>();
    if (images && floats > 0) images_->assign(images, images + floats);
    labels_ = std::make_shared<std::vector<int32_t>>();
    if (labels && labels_n > 0) labels_->assign(labels, labels + labels_n);
  }
  void layer_backward(int i, int n, const Context& c) {
    twin_.set_layer_batch(i, n);
    std::vector<Tensor> views = inputs(i, n), grad_views;
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
    twin_.layer(i).backward(in, twin_.activation(i), dout, slots, c);
  }
  static int groups_size(const GroupCache& groups) {
    int size = 1;
    MPI_Comm_size(groups.world(), &size);
    return size;
  }
  void count_copy(Buffer what) {
    if (options_.counts && what == Buffer::parameter_gradient) ++options_.counts->parameter_gradient_copies;
    if (options_.counts && what == Buffer::parameters) ++options_.counts->parameter_copies;
  }
  static void copy(Tensor& to, const Tensor& from) {
    if (from.size() > 0) std::memcpy(to.data(), from.data(), from.size() * sizeof(float));
  }
  // A layer's inputs at `n` samples, in its slicing: its own slot buffers, else the producers' activations.
  std::vector<Tensor> inputs(int i, int n) {
    std::vector<Tensor> views;
    for (size_t k = 0; k < twin_.inputs(i).size(); ++k) {
      const int p = twin_.inputs(i)[k];
      const Shape shape = twin_.layer(p).output_shape().with_batch(n);
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
  std::shared_ptr<std::vector<float>> images_;  // the staged batch, kept alive by the work that reads it
  std::shared_ptr<std::vector<int32_t>> labels_;
  bool asked_transport_ = false;
  TwinStream stream_;  // last: its work, which uses the members above, ends first
};

}  // namespace

std::unique_ptr<DeviceModel> make_twin_model(Model& host, const TwinOptions& options) {
  return std::make_unique<TwinDevice>(host, options);
}

bool twin_async_from_environment() {
  const char* mode = std::getenv("BURSTPOOL_TWIN");
  if (!mode || !*mode || std::string(mode) == "sync") return false;
  BP_CHECK(std::string(mode) == "async", "BURSTPOOL_TWIN={}: sync or async", mode);
  return true;
}

}  // namespace burstpool
