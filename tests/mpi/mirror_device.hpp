#pragma once
// A pretend accelerator for testing the executor's device path of burst
// plans on the CPU: every activation and gradient buffer a device would hold
// lives a second time here, in memory of its own, and the layers run on
// those copies with the Model's CPU layers. A copy between host and "device"
// that the executor forgets leaves stale values on one side, and the run no
// longer matches the CPU executor's bit for bit. Parameters, their gradients
// and layer state stay the Model's (its CPU layers hold them), so parameter
// gradient copies are no-ops here: this double checks the slices, not those.
//
// With `moves_slices`, it also has a transport (DeviceModel::transport): MPI
// between its own buffers standing in for NCCL between device buffers, and
// MPI sums of the parameter gradients where they are (the Model's). Then the
// executor must hand the mover the right buffer addresses and offsets and
// make no host copies of slices at all (the Model's activation and slot
// buffers are not updated in this mode, so a slice read from them would be
// stale), and it must sum parameter gradients through the transport only
// (a copy of them to or from the host fails the test; summing twice doubles
// them).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "burstpool/executor.hpp"
#include "burstpool/model.hpp"
#include "communicator.hpp"
#include "grad_sync.hpp"
#include "slice_mover.hpp"

namespace burstpool {

class MirrorDevice final : public DeviceModel {
 public:
  explicit MirrorDevice(Model& m, bool moves_slices = false)
      : m_(m), moves_slices_(moves_slices), slot_in_(m.size()), slot_grad_(m.size()) {
    for (int i = 0; i < m.size(); ++i) {
      acts_.push_back(Tensor::zeros(full_shape(i, m.capacity(i))));
      grads_.push_back(i == m.input_layer() ? Tensor() : Tensor::zeros(full_shape(i, m.capacity(i))));
      slot_in_[i].resize(m.inputs(i).size());
      slot_grad_[i].resize(m.inputs(i).size());
    }
  }

  void use_slot_buffers(const std::vector<std::vector<bool>>& direct) override {
    for (int i = 0; i < m_.size(); ++i)
      for (size_t k = 0; k < m_.inputs(i).size(); ++k) {
        if (direct[i][k] || m_.capacity(i) == 0) continue;
        const int p = m_.inputs(i)[k];
        const Shape shape = m_.layer(p).output_shape().with_batch(m_.capacity(i));
        slot_in_[i][k] = Tensor::zeros(shape);
        if (p != m_.input_layer()) slot_grad_[i][k] = Tensor::zeros(shape);
      }
  }
  void load_input(const float* images, int images_n, const int32_t*, int, const Context&) override {
    const size_t n = static_cast<size_t>(images_n) * m_.sample_shape().per_sample();
    if (n > 0) std::memcpy(acts_[m_.input_layer()].data(), images, n * sizeof(float));
  }
  void forward_layer(int i, const Context& ctx) override {
    std::vector<Tensor> views = inputs(i);
    std::vector<const Tensor*> in;
    for (const Tensor& t : views) in.push_back(&t);
    Tensor out = acts_[i].view(batch_shape(i));
    m_.layer(i).forward(in, out, ctx);
    if (i == m_.loss_layer()) loss_ = out.data()[0];
  }
  void backward_layer(int i, const Context& ctx) override {
    std::vector<Tensor> views = inputs(i), grad_views;
    grad_views.reserve(views.size());
    std::vector<const Tensor*> in;
    std::vector<GradSlot> slots;
    for (size_t k = 0; k < views.size(); ++k) {
      in.push_back(&views[k]);
      const int p = m_.inputs(i)[k];
      if (p == m_.input_layer()) {
        slots.push_back({nullptr, false});
      } else if (!slot_grad_[i][k].empty()) {  // overwritten; the executor adds it where it belongs
        grad_views.push_back(slot_grad_[i][k].view(views[k].shape()));
        slots.push_back({&grad_views.back(), false});
      } else {
        grad_views.push_back(grads_[p].view(views[k].shape()));
        slots.push_back({&grad_views.back(), m_.accumulates(i, static_cast<int>(k))});
      }
    }
    const Tensor out = acts_[i].view(batch_shape(i));
    const Tensor dout = i == m_.loss_layer() ? m_.loss_seed() : grads_[i].view(batch_shape(i));
    m_.layer(i).backward(in, out, dout, slots, ctx);
  }
  float loss() override { return loss_; }
  void copy_out(Buffer what, int layer, int slot, float* host, size_t floats) override {
    if (moves_slices_ && what == Buffer::parameter_gradient) ADD_FAILURE() << "gradients to the host, with a transport";
    if (model_owned(what)) return;  // the Model's own (see above)
    const Tensor& from = buffer(what, layer, slot);
    ASSERT_LE(floats, from.size()) << "copy_out past the end of layer " << layer << "'s buffer";
    std::memcpy(host, from.data(), floats * sizeof(float));
  }
  void copy_in(Buffer what, int layer, int slot, const float* host, size_t floats) override {
    if (moves_slices_ && what == Buffer::parameter_gradient) ADD_FAILURE() << "gradients from the host, with a transport";
    if (model_owned(what)) return;
    Tensor& to = buffer(what, layer, slot);
    ASSERT_LE(floats, to.size()) << "copy_in past the end of layer " << layer << "'s buffer";
    std::memcpy(to.data(), host, floats * sizeof(float));
  }
  DeviceTransport transport(const GroupCache& groups) override {
    DeviceTransport t;
    if (!moves_slices_) return t;
    t.slices = std::make_unique<MpiSliceMover>(groups.world());
    t.gradients = std::make_unique<CountingReducer>(floats_summed_);
    return t;
  }
  // Floats its transport summed over groups so far (a count of every start).
  size_t floats_summed() const { return floats_summed_; }
  float* address(Buffer what, int layer, int slot) override {
    EXPECT_TRUE(moves_slices_) << "address() without a transport";
    if (what == Buffer::parameter_gradient && layer == -1) return m_.grads().data();
    EXPECT_FALSE(model_owned(what)) << "address() of a parameter buffer";
    return buffer(what, layer, slot).data();
  }

  // The whole-model path (data-parallel plans) is GpuModel's; not used here.
  void join_ranks(DeviceRanks) override { ADD_FAILURE() << "data-parallel path"; }
  void set_before_layer(std::function<void()>) override {}
  float forward(int, const float*, const int32_t*, const Context&) override { return unused(); }
  void backward(const Context&) override { unused(); }
  void logits(float*) override { unused(); }
  void sgd_step(float, const SgdOptions&, const std::vector<std::pair<size_t, size_t>>&) override { unused(); }
  void to_host(float*) override { unused(); }
  void from_host(const float*) override { unused(); }
  std::string describe() const override { return "mirror (host memory)"; }

 private:
  static bool model_owned(Buffer what) {
    return what == Buffer::parameter_gradient || what == Buffer::parameters || what == Buffer::state;
  }
  static float unused() {
    ADD_FAILURE() << "MirrorDevice runs burst plans only";
    return 0;
  }
  Shape full_shape(int i, int n) const {
    return m_.layer(i).is_loss() ? Shape{1, 1, 1, 1} : m_.layer(i).output_shape().with_batch(std::max(n, 1));
  }
  Shape batch_shape(int i) const {
    return m_.layer(i).is_loss() ? Shape{1, 1, 1, 1} : m_.layer(i).output_shape().with_batch(m_.layer_batch(i));
  }
  // Layer i's inputs in its slicing: its own slot buffers, else the producers' activations.
  std::vector<Tensor> inputs(int i) const {
    std::vector<Tensor> views;
    for (size_t k = 0; k < m_.inputs(i).size(); ++k) {
      const int p = m_.inputs(i)[k];
      const Shape shape = m_.layer(p).output_shape().with_batch(m_.layer_batch(i));
      views.push_back(slot_in_[i][k].empty() ? acts_[p].view(shape) : slot_in_[i][k].view(shape));
    }
    return views;
  }
  Tensor& buffer(Buffer what, int layer, int slot) {
    switch (what) {
      case Buffer::activation: return acts_[layer];
      case Buffer::gradient: return grads_[layer];
      case Buffer::slot_input: return slot_in_[layer][slot];
      default: return slot_grad_[layer][slot];
    }
  }

  // MPI sums that count what they are given.
  class CountingReducer final : public GroupReducer {
   public:
    explicit CountingReducer(size_t& floats) : floats_(floats) {}
    void start(float* data, size_t count, const Communicator& group) override {
      floats_ += count;
      mpi_.start(data, count, group);
    }
    void progress() override { mpi_.progress(); }
    void wait(WaitSite* site) override { mpi_.wait(site); }

   private:
    size_t& floats_;
    MpiGroupReducer mpi_;
  };

  Model& m_;
  bool moves_slices_;
  size_t floats_summed_ = 0;
  std::vector<Tensor> acts_, grads_;
  std::vector<std::vector<Tensor>> slot_in_, slot_grad_;
  float loss_ = 0;
};

}  // namespace burstpool
