// SoftmaxCrossEntropy: the loss head. Input: logits (N, K, 1, 1) or any shape
// read as N x K; labels come from Context. Output: one scalar,
// sum over local samples of -log softmax(logits)[label], times loss_scale
// (1 / global batch), so per-rank partial losses and gradients add up to the
// mean over the global batch.
#include <cmath>
#include <vector>

#include "burstpool/error.hpp"
#include "layers/families.hpp"
#include "layers/kernels.hpp"

namespace burstpool::layers {
namespace {

class SoftmaxCrossEntropy final : public Layer {
 public:
  using Layer::Layer;
  bool is_loss() const override { return true; }
  uint64_t buffer_bytes(int batch, int) const override {  // prob_
    return uint64_t{4} * static_cast<uint64_t>(batch) * k_;
  }

 protected:
  Shape infer_impl(const std::vector<Shape>& in) override {
    if (in.size() != 1) fail_shape("takes exactly one input (the logits)");
    k_ = static_cast<int>(in[0].per_sample());
    if (k_ < 2) fail_shape("needs at least two classes");
    return {1, 1, 1, 1};
  }

  void forward_impl(const std::vector<const Tensor*>& in, Tensor& out, const Context& ctx) override {
    const int n = in[0]->shape().n;
    BP_CHECK(ctx.labels || n == 0, "layer '{}': no labels given to the loss", name_);
    const float* z = in[0]->data();
    prob_.resize(static_cast<size_t>(n) * k_);
    double loss = 0.0;
    for (int s = 0; s < n; ++s) {
      const float* row = z + static_cast<size_t>(s) * k_;
      float* p = prob_.data() + static_cast<size_t>(s) * k_;
      const int label = ctx.labels[s];
      if (label < 0 || label >= k_)
        throw Error(fmt::format("layer '{}': label {} of sample {} is outside 0..{}", name_, label,
                                ctx.sample_offset + s, k_ - 1));
      float mx = row[0];
      for (int j = 1; j < k_; ++j) mx = std::max(mx, row[j]);
      double sum = 0.0;
      for (int j = 0; j < k_; ++j) sum += (p[j] = std::exp(row[j] - mx));
      const float inv = static_cast<float>(1.0 / sum);
      for (int j = 0; j < k_; ++j) p[j] *= inv;
      loss += std::log(sum) - (row[label] - mx);
    }
    out.data()[0] = static_cast<float>(loss * ctx.loss_scale);
  }

  void backward_impl(const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dout,
                     const std::vector<GradSlot>& din, const Context& ctx) override {
    if (!din[0].tensor) return;
    const int n = in[0]->shape().n;
    const float scale = static_cast<float>(dout.data()[0] * ctx.loss_scale);
    float* dz = din[0].tensor->data();
    for (int s = 0; s < n; ++s)
      for (int j = 0; j < k_; ++j) {
        const size_t i = static_cast<size_t>(s) * k_ + j;
        const float v = (prob_[i] - (j == ctx.labels[s] ? 1.0f : 0.0f)) * scale;
        dz[i] = din[0].accumulate ? dz[i] + v : v;
      }
  }

 private:
  int k_ = 0;
  std::vector<float> prob_;  // softmax of the last forward
};

}  // namespace

std::unique_ptr<Layer> make_softmax_cross_entropy(const LayerSpec& spec, SpecReader&) {
  return std::make_unique<SoftmaxCrossEntropy>(spec);
}

}  // namespace burstpool::layers
