// Joins of a model DAG: Add (residual join, identical shapes) and Concat
// (channel join, identical H and W).
#include <cstring>

#include "burstpool/error.hpp"
#include "layers/families.hpp"
#include "layers/kernels.hpp"

namespace burstpool::layers {
namespace {

class Add final : public Layer {
 public:
  using Layer::Layer;

 protected:
  Shape infer_impl(const std::vector<Shape>& in) override {
    if (in.size() < 2) fail_shape("needs at least two inputs");
    for (const Shape& s : in)
      if (!(s == in[0])) fail_shape("all inputs must have the same shape");
    return in[0];
  }
  void forward_impl(const std::vector<const Tensor*>& in, Tensor& out, const Context&) override {
    cpu::write_grad(out.data(), in[0]->data(), out.size(), false);
    for (size_t i = 1; i < in.size(); ++i) cpu::write_grad(out.data(), in[i]->data(), out.size(), true);
  }
  void backward_impl(const std::vector<const Tensor*>&, const Tensor&, const Tensor& dout,
                     const std::vector<GradSlot>& din, const Context&) override {
    for (const GradSlot& slot : din)
      if (slot.tensor) cpu::write_grad(slot.tensor->data(), dout.data(), dout.size(), slot.accumulate);
  }
};

class Concat final : public Layer {
 public:
  using Layer::Layer;

 protected:
  Shape infer_impl(const std::vector<Shape>& in) override {
    if (in.size() < 2) fail_shape("needs at least two inputs");
    int channels = 0;
    for (const Shape& s : in) {
      if (s.h != in[0].h || s.w != in[0].w) fail_shape("inputs must agree in height and width");
      channels += s.c;
    }
    return {1, channels, in[0].h, in[0].w};
  }
  void forward_impl(const std::vector<const Tensor*>& in, Tensor& out, const Context&) override {
    const int n = out.shape().n;
    const size_t out_per = out.shape().per_sample();
#pragma omp parallel for if (cpu::worth_threads(out.size()))
    for (int s = 0; s < n; ++s) {
      size_t off = 0;
      for (const Tensor* t : in) {
        const size_t per = t->shape().per_sample();
        std::memcpy(out.data() + s * out_per + off, t->data() + s * per, per * sizeof(float));
        off += per;
      }
    }
  }
  void backward_impl(const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dout,
                     const std::vector<GradSlot>& din, const Context&) override {
    const int n = dout.shape().n;
    const size_t out_per = dout.shape().per_sample();
    for (int s = 0; s < n; ++s) {
      size_t off = 0;
      for (size_t i = 0; i < in.size(); ++i) {
        const size_t per = in[i]->shape().per_sample();
        if (din[i].tensor)
          cpu::write_grad(din[i].tensor->data() + s * per, dout.data() + s * out_per + off, per,
                          din[i].accumulate);
        off += per;
      }
    }
  }
};

}  // namespace

std::unique_ptr<Layer> make_add(const LayerSpec& spec, SpecReader&) { return std::make_unique<Add>(spec); }
std::unique_ptr<Layer> make_concat(const LayerSpec& spec, SpecReader&) { return std::make_unique<Concat>(spec); }

}  // namespace burstpool::layers
