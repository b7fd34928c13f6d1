// Element-wise layers: ReLU, Dropout, and the shape-only Input and Flatten.
#include "burstpool/error.hpp"
#include "layers/families.hpp"
#include "layers/kernels.hpp"

namespace burstpool::layers {
namespace {

// The model's data entry point: the executor writes the batch into its output.
class Input final : public Layer {
 public:
  Input(const LayerSpec& spec, Shape sample) : Layer(spec), sample_(sample) {}

 protected:
  Shape infer_impl(const std::vector<Shape>& in) override {
    if (!in.empty()) fail_shape("an input layer takes no inputs");
    return sample_;
  }
  void forward_impl(const std::vector<const Tensor*>&, Tensor&, const Context&) override {}
  void backward_impl(const std::vector<const Tensor*>&, const Tensor&, const Tensor&,
                     const std::vector<GradSlot>&, const Context&) override {}

 private:
  Shape sample_;
};

class Flatten final : public Layer {
 public:
  using Layer::Layer;

 protected:
  Shape infer_impl(const std::vector<Shape>& in) override {
    if (in.size() != 1) fail_shape("takes exactly one input");
    return {1, static_cast<int>(in[0].per_sample()), 1, 1};
  }
  void forward_impl(const std::vector<const Tensor*>& in, Tensor& out, const Context&) override {
    cpu::write_grad(out.data(), in[0]->data(), out.size(), false);
  }
  void backward_impl(const std::vector<const Tensor*>&, const Tensor&, const Tensor& dout,
                     const std::vector<GradSlot>& din, const Context&) override {
    if (din[0].tensor) cpu::write_grad(din[0].tensor->data(), dout.data(), dout.size(), din[0].accumulate);
  }
};

class Relu final : public Layer {
 public:
  using Layer::Layer;

 protected:
  Shape infer_impl(const std::vector<Shape>& in) override {
    if (in.size() != 1) fail_shape("takes exactly one input");
    return in[0];
  }
  void forward_impl(const std::vector<const Tensor*>& in, Tensor& out, const Context&) override {
    const float* x = in[0]->data();
    float* y = out.data();
    const size_t n = out.size();
#pragma omp parallel for simd if (parallel : cpu::worth_threads(n))
    for (size_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  }
  // Uses the output (y > 0 exactly where x > 0), so the input is not needed.
  // dy is loaded unconditionally so the select vectorises.
  void backward_impl(const std::vector<const Tensor*>&, const Tensor& out, const Tensor& dout,
                     const std::vector<GradSlot>& din, const Context&) override {
    if (!din[0].tensor) return;
    const float* __restrict__ y = out.data();
    const float* __restrict__ dy = dout.data();
    float* __restrict__ dx = din[0].tensor->data();
    const size_t n = out.size();
    const float keep = din[0].accumulate ? 1.0f : 0.0f;
#pragma omp parallel for simd if (parallel : cpu::worth_threads(n))
    for (size_t i = 0; i < n; ++i) {
      const float g = dy[i];
      dx[i] = keep * dx[i] + (y[i] > 0.0f ? g : 0.0f);
    }
  }
};

// Inverted dropout. The mask of element e of global sample s at step t is a
// hash of (seed, layer, t, s, e): no mask is stored, backward recomputes it, and
// it is the same whichever rank holds the sample.
class Dropout final : public Layer {
 public:
  Dropout(const LayerSpec& spec, float p) : Layer(spec), p_(p), salt_(cpu::hash_name(spec.name)) {
    attrs_.p = p_;
    attrs_.salt = salt_;
  }

 protected:
  Shape infer_impl(const std::vector<Shape>& in) override {
    if (in.size() != 1) fail_shape("takes exactly one input");
    return in[0];
  }
  void forward_impl(const std::vector<const Tensor*>& in, Tensor& out, const Context& ctx) override {
    apply(in[0]->data(), out.data(), out.shape(), ctx, false);
  }
  void backward_impl(const std::vector<const Tensor*>&, const Tensor&, const Tensor& dout,
                     const std::vector<GradSlot>& din, const Context& ctx) override {
    if (din[0].tensor) apply(dout.data(), din[0].tensor->data(), dout.shape(), ctx, din[0].accumulate);
  }

 private:
  void apply(const float* x, float* y, Shape shape, const Context& ctx, bool accumulate) const {
    const size_t per = shape.per_sample();
    if (!ctx.training || p_ == 0.0f) {
      cpu::write_grad(y, x, shape.count(), accumulate);
      return;
    }
    const float scale = 1.0f / (1.0f - p_);
    const uint64_t base = cpu::dropout_step_key(ctx.seed, salt_, ctx.step);
#pragma omp parallel for if (cpu::worth_threads(shape.count()))
    for (int s = 0; s < shape.n; ++s) {
      const uint64_t sample_key = cpu::mix64(base + static_cast<uint64_t>(ctx.sample_offset + s));
      const size_t off = static_cast<size_t>(s) * per;
      for (size_t e = 0; e < per; ++e) {
        float m = cpu::uniform01(sample_key + e) >= p_ ? scale : 0.0f;
        float v = x[off + e] * m;
        y[off + e] = accumulate ? y[off + e] + v : v;
      }
    }
  }
  float p_;
  uint64_t salt_;
};

}  // namespace

std::unique_ptr<Layer> make_input(const LayerSpec& spec, SpecReader& r) {
  if (!spec.find("shape")) r.fail("shape", "missing (required: C,H,W)");
  const std::string text = r.get_string("shape", "");
  auto dims = split_list(text);
  int v[3] = {0, 1, 1};
  bool ok = !dims.empty() && dims.size() <= 3;
  for (size_t i = 0; ok && i < dims.size(); ++i) ok = parse_int(dims[i], v[i]) && v[i] >= 1;
  if (!ok) r.fail("shape", fmt::format("'{}' is not C[,H[,W]] with positive integers", text));
  return std::make_unique<Input>(spec, Shape{1, v[0], v[1], v[2]});
}

std::unique_ptr<Layer> make_flatten(const LayerSpec& spec, SpecReader&) {
  return std::make_unique<Flatten>(spec);
}

std::unique_ptr<Layer> make_relu(const LayerSpec& spec, SpecReader&) { return std::make_unique<Relu>(spec); }

std::unique_ptr<Layer> make_dropout(const LayerSpec& spec, SpecReader& r) {
  float p = r.get_float("p", 0.5f);
  if (!(p >= 0.0f && p < 1.0f)) r.fail("p", "must be in [0, 1)");
  return std::make_unique<Dropout>(spec, p);
}

}  // namespace burstpool::layers
