#include "burstpool/layer.hpp"

#include <utility>

#include "burstpool/error.hpp"
#include "layers/bf16.hpp"

namespace burstpool {

void Layer::fail_shape(const std::string& message) const {
  std::string shapes;
  for (const Shape& s : in_shapes_) shapes += (shapes.empty() ? "" : ", ") + s.str();
  throw Error(fmt::format("layer '{}' ({}): {} (input shapes per sample: {})", name_, type_,
                          message, shapes.empty() ? "none" : shapes));
}

Shape Layer::infer(const std::vector<Shape>& inputs) {
  in_shapes_.clear();
  for (const Shape& s : inputs) in_shapes_.push_back(s.with_batch(1));
  out_shape_ = infer_impl(in_shapes_).with_batch(1);
  if (out_shape_.count() == 0) fail_shape(fmt::format("empty output {}", out_shape_.str()));
  return out_shape_;
}

void Layer::bind(std::vector<Tensor> params, std::vector<Tensor> grads, std::vector<Tensor> state) {
  BP_CHECK(params.size() == param_specs().size() && grads.size() == params.size() &&
               state.size() == state_specs().size(),
           "layer '{}': bind got a wrong number of tensors", name_);
  params_ = std::move(params);
  grads_ = std::move(grads);
  state_ = std::move(state);
}

template <class Impl>
void Layer::in_precision(const Context& ctx, Impl&& impl) {
  const bool products = kind_ == LayerKind::linear || kind_ == LayerKind::conv2d;
  if (ctx.precision == Precision::fp32 || !products || params_.empty()) {
    impl();
    return;
  }
  if (bf16_weight_.size() != params_[0].size()) bf16_weight_ = Tensor::zeros(params_[0].shape());
  bf16_round(params_[0].data(), bf16_weight_.data(), params_[0].size());
  struct Swap {  // the master weights come back however impl ends
    Layer& l;
    explicit Swap(Layer& layer) : l(layer) { std::swap(l.params_[0], l.bf16_weight_); }
    ~Swap() { std::swap(l.params_[0], l.bf16_weight_); }
  } swap(*this);
  impl();
}

void Layer::forward(const std::vector<const Tensor*>& in, Tensor& out, const Context& ctx) {
  BP_CHECK(in.size() == in_shapes_.size(), "layer '{}': {} inputs, expected {}", name_, in.size(),
           in_shapes_.size());
  const int n = out.shape().n;
  for (size_t i = 0; i < in.size(); ++i)
    BP_CHECK(in[i]->shape() == in_shapes_[i].with_batch(is_loss() ? in[i]->shape().n : n),
             "layer '{}': input {} is {}, expected {} per sample", name_, i, in[i]->shape().str(),
             in_shapes_[i].str());
  if (!is_loss())
    BP_CHECK(out.shape() == out_shape_.with_batch(n), "layer '{}': output is {}, expected {}", name_,
             out.shape().str(), out_shape_.with_batch(n).str());
  in_precision(ctx, [&] { forward_impl(in, out, ctx); });
  if (ctx.precision == Precision::bf16 && !is_loss()) bf16_round(out.data(), out.size());
}

void Layer::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                     const std::vector<GradSlot>& din, const Context& ctx) {
  BP_CHECK(din.size() == in.size(), "layer '{}': {} gradient slots for {} inputs", name_, din.size(),
           in.size());
  BP_CHECK(dout.shape() == out.shape(), "layer '{}': output gradient {} vs output {}", name_,
           dout.shape().str(), out.shape().str());
  for (size_t i = 0; i < in.size(); ++i)
    if (din[i].tensor)
      BP_CHECK(din[i].tensor->shape() == in[i]->shape(), "layer '{}': input gradient {} vs input {}",
               name_, din[i].tensor->shape().str(), in[i]->shape().str());
  if (ctx.precision == Precision::fp32 || is_loss()) {  // the loss's own gradient stays fp32, and it has no weights
    backward_impl(in, out, dout, din, ctx);
    return;
  }
  thread_local Tensor rounded;  // the gradient received, in bf16 (one buffer per thread, grown as needed)
  if (rounded.size() < dout.size()) rounded = Tensor::zeros(dout.shape());
  Tensor dout_bf16 = rounded.view(dout.shape());
  bf16_round(dout.data(), dout_bf16.data(), dout.size());
  in_precision(ctx, [&] { backward_impl(in, out, dout_bf16, din, ctx); });
}

}  // namespace burstpool
