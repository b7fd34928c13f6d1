// Linear (fully connected): y = x W^T + b, with W stored (out, in) like PyTorch.
// Inputs of any per-sample shape are read as flat feature vectors.
#include "burstpool/error.hpp"
#include "layers/families.hpp"
#include "layers/kernels.hpp"

namespace burstpool::layers {
namespace {

class Linear final : public Layer {
 public:
  Linear(const LayerSpec& spec, int out_features, bool bias)
      : Layer(spec), out_(out_features), bias_(bias) {}

  std::vector<ParamSpec> param_specs() const override {
    std::vector<ParamSpec> p{{"weight", Shape{out_, in_, 1, 1}, Init::kaiming_uniform, in_}};
    if (bias_) p.push_back({"bias", Shape{out_, 1, 1, 1}, Init::zeros, in_});
    return p;
  }
  double forward_flops() const override { return 2.0 * in_ * out_; }

 protected:
  Shape infer_impl(const std::vector<Shape>& in) override {
    if (in.size() != 1) fail_shape("takes exactly one input");
    in_ = static_cast<int>(in[0].per_sample());
    return {1, out_, 1, 1};
  }

  void forward_impl(const std::vector<const Tensor*>& in, Tensor& out, const Context&) override {
    const int n = out.shape().n;
    float* y = out.data();
    if (bias_) {
      const float* b = params_[1].data();
      for (int i = 0; i < n; ++i)
        for (int o = 0; o < out_; ++o) y[static_cast<size_t>(i) * out_ + o] = b[o];
    }
    cpu::gemm(false, true, n, out_, in_, 1.0f, in[0]->data(), in_, params_[0].data(), in_,
              bias_ ? 1.0f : 0.0f, y, out_);
  }

  void backward_impl(const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dout,
                     const std::vector<GradSlot>& din, const Context&) override {
    const int n = dout.shape().n;
    const float* dy = dout.data();
    // dW[out,in] = dY^T[out,n] X[n,in]
    cpu::gemm(true, false, out_, in_, n, 1.0f, dy, out_, in[0]->data(), in_, 0.0f, grads_[0].data(), in_);
    if (bias_) {
      float* db = grads_[1].data();
      for (int o = 0; o < out_; ++o) db[o] = 0.0f;
      for (int i = 0; i < n; ++i)
        for (int o = 0; o < out_; ++o) db[o] += dy[static_cast<size_t>(i) * out_ + o];
    }
    if (din[0].tensor)  // dX[n,in] = dY[n,out] W[out,in]
      cpu::gemm(false, false, n, in_, out_, 1.0f, dy, out_, params_[0].data(), in_,
                din[0].accumulate ? 1.0f : 0.0f, din[0].tensor->data(), in_);
  }

 private:
  int out_, in_ = 0;
  bool bias_;
};

}  // namespace

std::unique_ptr<Layer> make_linear(const LayerSpec& spec, SpecReader& r) {
  int out = r.require_int("out_features");
  if (out < 1) r.fail("out_features", "must be >= 1");
  bool bias = r.get_bool("bias", true);
  return std::make_unique<Linear>(spec, out, bias);
}

}  // namespace burstpool::layers
