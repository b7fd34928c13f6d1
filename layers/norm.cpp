// BatchNorm2d over (N, H, W) per channel; works on (N, C, 1, 1) too.
//
// Training statistics are global over every rank that holds the layer: each
// rank sums x and x^2 over its samples (in double), Context::sum_over_group adds
// those sums across the group, and mean/variance come from the totals. The
// backward pass reduces sum(dy) and sum(dy * x_hat) the same way. With one rank
// (no hook) this is exactly ordinary batch norm. Parameter gradients are the
// local sums; the gradient allreduce adds them across the group.
#include <cmath>
#include <vector>

#include "burstpool/error.hpp"
#include "layers/families.hpp"
#include "layers/kernels.hpp"

namespace burstpool::layers {
namespace {

class BatchNorm2d final : public Layer {
 public:
  BatchNorm2d(const LayerSpec& spec, float eps, float momentum) : Layer(spec), eps_(eps), momentum_(momentum) {
    attrs_.eps = eps_;
    attrs_.momentum = momentum_;
  }

  std::vector<ParamSpec> param_specs() const override {
    return {{"weight", Shape{c_, 1, 1, 1}, Init::ones, 1}, {"bias", Shape{c_, 1, 1, 1}, Init::zeros, 1}};
  }
  std::vector<ParamSpec> state_specs() const override {
    return {{"running_mean", Shape{c_, 1, 1, 1}, Init::zeros, 1},
            {"running_var", Shape{c_, 1, 1, 1}, Init::ones, 1}};
  }
  double forward_flops() const override { return 4.0 * c_ * hw_; }

 protected:
  Shape infer_impl(const std::vector<Shape>& in) override {
    if (in.size() != 1) fail_shape("takes exactly one input");
    c_ = in[0].c;
    hw_ = in[0].h * in[0].w;
    return in[0];
  }

  void forward_impl(const std::vector<const Tensor*>& in, Tensor& out, const Context& ctx) override {
    const int n = out.shape().n;
    const float* x = in[0]->data();
    float* y = out.data();
    const float* gamma = params_[0].data();
    const float* beta = params_[1].data();
    mean_.assign(c_, 0.0f);
    invstd_.assign(c_, 0.0f);
    if (ctx.training) {
      std::vector<double> sums(2 * c_ + 1, 0.0);  // [sum x | sum x^2 | count]
      for (int s = 0; s < n; ++s)
        for (int ch = 0; ch < c_; ++ch) {
          const float* p = x + (static_cast<size_t>(s) * c_ + ch) * hw_;
          float s1 = 0.0f, s2 = 0.0f;
#pragma omp simd reduction(+ : s1, s2)
          for (int i = 0; i < hw_; ++i) s1 += p[i], s2 += p[i] * p[i];
          sums[ch] += s1;
          sums[c_ + ch] += s2;
        }
      sums[2 * c_] = static_cast<double>(n) * hw_;
      if (ctx.sum_over_group) ctx.sum_over_group(sums.data(), sums.size());
      const double m = sums[2 * c_];
      float* rmean = state_[0].data();
      float* rvar = state_[1].data();
      for (int ch = 0; ch < c_; ++ch) {
        const double mean = sums[ch] / m;
        const double var = std::max(0.0, sums[c_ + ch] / m - mean * mean);
        mean_[ch] = static_cast<float>(mean);
        invstd_[ch] = static_cast<float>(1.0 / std::sqrt(var + eps_));
        const double unbiased = m > 1 ? var * m / (m - 1) : var;
        rmean[ch] = static_cast<float>((1 - momentum_) * rmean[ch] + momentum_ * mean);
        rvar[ch] = static_cast<float>((1 - momentum_) * rvar[ch] + momentum_ * unbiased);
      }
    } else {
      for (int ch = 0; ch < c_; ++ch) {
        mean_[ch] = state_[0].data()[ch];
        invstd_[ch] = 1.0f / std::sqrt(state_[1].data()[ch] + eps_);
      }
    }
#pragma omp parallel for if (cpu::worth_threads(out.size()))
    for (int s = 0; s < n; ++s)
      for (int ch = 0; ch < c_; ++ch) {
        const size_t off = (static_cast<size_t>(s) * c_ + ch) * hw_;
        const float a = gamma[ch] * invstd_[ch], b = beta[ch] - mean_[ch] * a;
        for (int i = 0; i < hw_; ++i) y[off + i] = x[off + i] * a + b;
      }
  }

  void backward_impl(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                     const std::vector<GradSlot>& din, const Context& ctx) override {
    const int n = out.shape().n;
    const float* x = in[0]->data();
    const float* dy = dout.data();
    const float* gamma = params_[0].data();
    std::vector<double> sums(2 * c_, 0.0);  // [sum dy | sum dy * x_hat]
    for (int s = 0; s < n; ++s)
      for (int ch = 0; ch < c_; ++ch) {
        const size_t off = (static_cast<size_t>(s) * c_ + ch) * hw_;
        float s1 = 0.0f, s2 = 0.0f;
        const float mean = mean_[ch], invstd = invstd_[ch];
#pragma omp simd reduction(+ : s1, s2)
        for (int i = 0; i < hw_; ++i) {
          s1 += dy[off + i];
          s2 += dy[off + i] * (x[off + i] - mean) * invstd;
        }
        sums[ch] += s1;
        sums[c_ + ch] += s2;
      }
    for (int ch = 0; ch < c_; ++ch) {
      grads_[1].data()[ch] = static_cast<float>(sums[ch]);
      grads_[0].data()[ch] = static_cast<float>(sums[c_ + ch]);
    }
    if (!din[0].tensor) return;
    float* dx = din[0].tensor->data();
    const bool acc = din[0].accumulate;
    std::vector<float> k_dy(c_), k_xhat(c_), k_const(c_);  // dx = k_dy*dy + k_xhat*x_hat + k_const
    if (ctx.training) {
      double count = static_cast<double>(n) * hw_;
      std::vector<double> global(sums);
      global.push_back(count);
      if (ctx.sum_over_group) ctx.sum_over_group(global.data(), global.size());
      const double m = global[2 * c_];
      for (int ch = 0; ch < c_; ++ch) {
        const double g = gamma[ch] * invstd_[ch];
        k_dy[ch] = static_cast<float>(g);
        k_xhat[ch] = static_cast<float>(-g * global[c_ + ch] / m);
        k_const[ch] = static_cast<float>(-g * global[ch] / m);
      }
    } else {
      for (int ch = 0; ch < c_; ++ch) k_dy[ch] = gamma[ch] * invstd_[ch], k_xhat[ch] = 0.0f, k_const[ch] = 0.0f;
    }
#pragma omp parallel for if (cpu::worth_threads(out.size()))
    for (int s = 0; s < n; ++s)
      for (int ch = 0; ch < c_; ++ch) {
        const size_t off = (static_cast<size_t>(s) * c_ + ch) * hw_;
        const float mean = mean_[ch], invstd = invstd_[ch], a = k_dy[ch], b = k_xhat[ch], c = k_const[ch];
        const float keep = acc ? 1.0f : 0.0f;
#pragma omp simd
        for (int i = 0; i < hw_; ++i) dx[off + i] = keep * dx[off + i] + a * dy[off + i] + b * (x[off + i] - mean) * invstd + c;
      }
  }

 private:
  float eps_, momentum_;
  int c_ = 0, hw_ = 1;
  std::vector<float> mean_, invstd_;  // of the last forward, used by backward
};

}  // namespace

std::unique_ptr<Layer> make_batchnorm2d(const LayerSpec& spec, SpecReader& r) {
  float eps = r.get_float("eps", 1e-5f);
  if (!(eps > 0.0f)) r.fail("eps", "must be > 0");
  float momentum = r.get_float("momentum", 0.1f);
  if (!(momentum >= 0.0f && momentum <= 1.0f)) r.fail("momentum", "must be in [0, 1]");
  return std::make_unique<BatchNorm2d>(spec, eps, momentum);
}

}  // namespace burstpool::layers
