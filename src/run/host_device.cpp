#include "run/host_device.hpp"

#include <algorithm>

#include "burstpool/error.hpp"
#include "comm/communicator.hpp"
#include "comm/grad_sync.hpp"
#include "comm/slice_mover.hpp"

namespace burstpool {
namespace {

class HostDevice final : public DeviceModel {
 public:
  HostDevice(Model& m, SlotBuffers& slots) : m_(m), slots_(slots) {}

  bool whole_model() const override { return false; }
  void set_before_layer(std::function<void()> hook) override { before_layer_ = std::move(hook); }
  void use_slot_buffers(const std::vector<std::vector<bool>>&) override {}  // the executor's own

  void load_input(const float* images, int images_n, const int32_t*, int, const Context& ctx) override {
    if (images_n > 0) m_.load_batch(images, ctx.precision);  // labels come with each layer's Context
  }

  void forward_layer(int i, const Context& ctx) override {
    std::vector<const Tensor*> in;
    std::vector<Tensor> views;
    views.reserve(m_.inputs(i).size());
    for (size_t s = 0; s < m_.inputs(i).size(); ++s) {
      const int p = m_.inputs(i)[s];
      if (slots_.direct[i][s]) {
        in.push_back(&m_.activation(p));
      } else {
        views.push_back(slots_.in[i][s].view(m_.layer(p).output_shape().with_batch(m_.layer_batch(i))));
        in.push_back(&views.back());
      }
    }
    if (before_layer_) before_layer_();
    m_.layer(i).forward(in, m_.activation(i), ctx);
  }

  void backward_layer(int i, const Context& ctx) override {
    std::vector<const Tensor*> in;
    std::vector<GradSlot> grads;
    std::vector<Tensor> views, grad_views;
    views.reserve(m_.inputs(i).size());
    grad_views.reserve(m_.inputs(i).size());
    for (size_t s = 0; s < m_.inputs(i).size(); ++s) {
      const int p = m_.inputs(i)[s];
      const bool data = p == m_.input_layer();
      if (slots_.direct[i][s]) {
        in.push_back(&m_.activation(p));
        grads.push_back({data ? nullptr : &m_.gradient(p), m_.accumulates(i, static_cast<int>(s))});
        continue;
      }
      const Shape shape = m_.layer(p).output_shape().with_batch(m_.layer_batch(i));
      views.push_back(slots_.in[i][s].view(shape));
      in.push_back(&views.back());
      if (data) {
        grads.push_back({nullptr, false});
      } else {
        grad_views.push_back(slots_.grad[i][s].view(shape));
        grads.push_back({&grad_views.back(), false});  // sent back, then overwritten or added there
      }
    }
    if (before_layer_) before_layer_();
    const Tensor& dout = i == m_.loss_layer() ? m_.loss_seed() : m_.gradient(i);
    m_.layer(i).backward(in, m_.activation(i), dout, grads, ctx);
  }

  float loss() override { return m_.activation(m_.loss_layer()).data()[0]; }

  // The device's buffers are the host's: a copy between them is a copy onto
  // itself, which the executor makes for an accelerator's sake (a no-op).
  void copy_out(Buffer what, int layer, int slot, float* host, size_t floats) override {
    const float* own = address(what, layer, slot);
    if (own != host) std::copy_n(own, floats, host);
  }
  void copy_in(Buffer what, int layer, int slot, const float* host, size_t floats) override {
    float* own = address(what, layer, slot);
    if (own != host) std::copy_n(host, floats, own);
  }

  void download(const float* device, float* host, size_t floats) override {
    if (device != host) std::copy_n(device, floats, host);
  }
  void upload(float* device, const float* host, size_t floats) override {
    if (device != host) std::copy_n(host, floats, device);
  }

  DeviceTransport transport(const GroupCache& groups) override {
    return {std::make_unique<MpiSliceMover>(groups.world()), std::make_unique<MpiGroupReducer>()};
  }

  float* address(Buffer what, int layer, int slot) override {
    switch (what) {
      case Buffer::activation: return m_.activation(layer).data();
      case Buffer::gradient: return m_.gradient(layer).data();
      case Buffer::slot_input: return slots_.in[layer][slot].data();
      case Buffer::slot_gradient: return slots_.grad[layer][slot].data();
      case Buffer::parameter_gradient:
        return m_.grads().data() + (layer < 0 ? 0 : m_.param_range(layer).first);
      case Buffer::parameters: return m_.params().data() + (layer < 0 ? 0 : m_.param_range(layer).first);
      case Buffer::state: return m_.state().data() + (layer < 0 ? 0 : m_.state_range(layer).first);
      default: throw Error("the host device has no address for this buffer");
    }
  }

  std::string describe() const override { return "CPU"; }
  bool supports(LayerKind) const override { return true; }  // every layer has its CPU code
  void synchronize() override {}                             // the work is done when a call returns
  void to_host(float*) override {}                           // it is the host
  void from_host(const float*) override {}

  // Whole-model calls and a device's own update pieces are for devices with
  // memory of their own (whole_model(), Executor::on_accelerator()); the
  // host's parameters are updated by the host optimizer and strategies themselves.
  void join_ranks(DeviceRanks) override { not_here("join_ranks"); }
  float forward(int, const float*, const int32_t*, const Context&) override { not_here("forward"); }
  void backward(const Context&) override { not_here("backward"); }
  void logits(float*) override { not_here("logits"); }
  void sgd_step(float, const SgdOptions&, const std::vector<std::pair<size_t, size_t>>&) override {
    not_here("sgd_step");
  }
  void axpby(float, Buffer, float, Buffer) override { not_here("axpby"); }

 private:
  [[noreturn]] static void not_here(const char* call) {
    throw Error(fmt::format("internal: DeviceModel::{} called on the host device, which runs layer by layer", call));
  }

  Model& m_;
  SlotBuffers& slots_;
  std::function<void()> before_layer_;
};

}  // namespace

std::unique_ptr<DeviceModel> make_host_device(Model& model, SlotBuffers& slots) {
  return std::make_unique<HostDevice>(model, slots);
}

}  // namespace burstpool
