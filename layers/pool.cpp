// Pooling: MaxPool2d and AvgPool2d (kernel, stride, zero padding; average
// counts padded cells like PyTorch's count_include_pad=True), GlobalAvgPool.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "burstpool/error.hpp"
#include "layers/families.hpp"
#include "layers/kernels.hpp"

namespace burstpool::layers {
namespace {

// Shared geometry of the windowed pools; output size floor((H+2p-k)/s)+1.
class Pool2d : public Layer {
 public:
  Pool2d(const LayerSpec& spec, std::pair<int, int> k, std::pair<int, int> s, std::pair<int, int> p)
      : Layer(spec), kh_(k.first), kw_(k.second), sh_(s.first), sw_(s.second), ph_(p.first), pw_(p.second) {
    attrs_.kh = kh_, attrs_.kw = kw_, attrs_.sh = sh_, attrs_.sw = sw_, attrs_.ph = ph_, attrs_.pw = pw_;
  }

 protected:
  Shape infer_impl(const std::vector<Shape>& in) override {
    if (in.size() != 1) fail_shape("takes exactly one input");
    c_ = in[0].c, h_ = in[0].h, w_ = in[0].w;
    if (h_ + 2 * ph_ < kh_ || w_ + 2 * pw_ < kw_)
      fail_shape(fmt::format("window {}x{} is larger than the padded input", kh_, kw_));
    if (ph_ * 2 > kh_ || pw_ * 2 > kw_) fail_shape("padding must be at most half the window");
    oh_ = (h_ + 2 * ph_ - kh_) / sh_ + 1;
    ow_ = (w_ + 2 * pw_ - kw_) / sw_ + 1;
    return {1, c_, oh_, ow_};
  }
  int planes(const Tensor& out) const { return out.shape().n * c_; }

  int kh_, kw_, sh_, sw_, ph_, pw_;
  int c_ = 0, h_ = 0, w_ = 0, oh_ = 0, ow_ = 0;
};

class MaxPool2d final : public Pool2d {
 public:
  using Pool2d::Pool2d;
  uint64_t buffer_bytes(int batch, int) const override {  // argmax_
    return uint64_t{4} * static_cast<uint64_t>(batch) * out_shape_.per_sample();
  }

 protected:
  void forward_impl(const std::vector<const Tensor*>& in, Tensor& out, const Context&) override {
    const int np = planes(out);
    argmax_.resize(out.size());
    const float* x = in[0]->data();
    float* y = out.data();
    if (kh_ == 2 && kw_ == 2 && sh_ == 2 && sw_ == 2 && ph_ == 0 && pw_ == 0) {
      forward_2x2(x, y, np);
      return;
    }
#pragma omp parallel for if (cpu::worth_threads(in[0]->size()))
    for (int p = 0; p < np; ++p) {
      const float* plane = x + static_cast<size_t>(p) * h_ * w_;
      for (int oy = 0; oy < oh_; ++oy)
        for (int ox = 0; ox < ow_; ++ox) {
          float best = -std::numeric_limits<float>::infinity();
          int arg = -1;
          for (int ki = 0; ki < kh_; ++ki) {
            const int iy = oy * sh_ - ph_ + ki;
            if (iy < 0 || iy >= h_) continue;
            for (int kj = 0; kj < kw_; ++kj) {
              const int ix = ox * sw_ - pw_ + kj;
              if (ix < 0 || ix >= w_) continue;
              const float v = plane[iy * w_ + ix];
              if (v > best || arg < 0) best = v, arg = iy * w_ + ix;
            }
          }
          const size_t o = (static_cast<size_t>(p) * oh_ + oy) * ow_ + ox;
          y[o] = best;
          argmax_[o] = arg;
        }
    }
  }

  void backward_impl(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                     const std::vector<GradSlot>& din, const Context&) override {
    if (!din[0].tensor) return;
    const int np = planes(out);
    const float* dy = dout.data();
    float* dx = din[0].tensor->data();
    if (!din[0].accumulate) din[0].tensor->fill(0.0f);
    const size_t out_plane = static_cast<size_t>(oh_) * ow_;
#pragma omp parallel for if (cpu::worth_threads(in[0]->size()))
    for (int p = 0; p < np; ++p) {
      float* plane = dx + static_cast<size_t>(p) * h_ * w_;
      for (size_t o = p * out_plane; o < (p + 1) * out_plane; ++o) plane[argmax_[o]] += dy[o];
    }
  }

 private:
  // The common 2x2 stride-2 window without padding, written branch-free so it
  // vectorises. Ties pick the first maximum in row-major order, as the
  // general path does.
  void forward_2x2(const float* x, float* y, int np) {
#pragma omp parallel for if (cpu::worth_threads(static_cast<size_t>(np) * h_ * w_))
    for (int p = 0; p < np; ++p) {
      const float* plane = x + static_cast<size_t>(p) * h_ * w_;
      for (int oy = 0; oy < oh_; ++oy) {
        const float* r0 = plane + (2 * oy) * w_;
        const float* r1 = r0 + w_;
        const size_t o0 = (static_cast<size_t>(p) * oh_ + oy) * ow_;
        float* out = y + o0;
        int32_t* arg = argmax_.data() + o0;
        const int base = 2 * oy * w_, w = w_, ow = ow_;
#pragma omp simd
        for (int ox = 0; ox < ow; ++ox) {
          const float a = r0[2 * ox], b = r0[2 * ox + 1], c = r1[2 * ox], d = r1[2 * ox + 1];
          // Arithmetic selects (std::max keeps the first of equal values).
          const float m1 = std::max(a, b), m2 = std::max(c, d);
          const int i1 = static_cast<int>(b > a), i2 = w + static_cast<int>(d > c);
          const int bottom = static_cast<int>(m2 > m1);
          out[ox] = std::max(m1, m2);
          arg[ox] = base + 2 * ox + i1 + bottom * (i2 - i1);
        }
      }
    }
  }

  std::vector<int32_t> argmax_;  // flat index within the input plane, per output cell
};

class AvgPool2d final : public Pool2d {
 public:
  using Pool2d::Pool2d;

 protected:
  void forward_impl(const std::vector<const Tensor*>& in, Tensor& out, const Context&) override {
    const int np = planes(out);
    const float* x = in[0]->data();
    float* y = out.data();
    const float scale = 1.0f / (kh_ * kw_);
#pragma omp parallel for if (cpu::worth_threads(in[0]->size()))
    for (int p = 0; p < np; ++p) {
      const float* plane = x + static_cast<size_t>(p) * h_ * w_;
      for (int oy = 0; oy < oh_; ++oy)
        for (int ox = 0; ox < ow_; ++ox) {
          float sum = 0.0f;
          for_window(oy, ox, [&](int idx) { sum += plane[idx]; });
          y[(static_cast<size_t>(p) * oh_ + oy) * ow_ + ox] = sum * scale;
        }
    }
  }

  void backward_impl(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                     const std::vector<GradSlot>& din, const Context&) override {
    if (!din[0].tensor) return;
    const int np = planes(out);
    const float* dy = dout.data();
    float* dx = din[0].tensor->data();
    if (!din[0].accumulate) din[0].tensor->fill(0.0f);
    const float scale = 1.0f / (kh_ * kw_);
#pragma omp parallel for if (cpu::worth_threads(in[0]->size()))
    for (int p = 0; p < np; ++p) {
      float* plane = dx + static_cast<size_t>(p) * h_ * w_;
      for (int oy = 0; oy < oh_; ++oy)
        for (int ox = 0; ox < ow_; ++ox) {
          const float g = dy[(static_cast<size_t>(p) * oh_ + oy) * ow_ + ox] * scale;
          for_window(oy, ox, [&](int idx) { plane[idx] += g; });
        }
    }
  }

 private:
  // Calls f(flat input index) for every in-bounds cell of the window at (oy, ox).
  template <class F>
  void for_window(int oy, int ox, F&& f) const {
    for (int ki = 0; ki < kh_; ++ki) {
      const int iy = oy * sh_ - ph_ + ki;
      if (iy < 0 || iy >= h_) continue;
      for (int kj = 0; kj < kw_; ++kj) {
        const int ix = ox * sw_ - pw_ + kj;
        if (ix >= 0 && ix < w_) f(iy * w_ + ix);
      }
    }
  }
};

class GlobalAvgPool final : public Layer {
 public:
  using Layer::Layer;

 protected:
  Shape infer_impl(const std::vector<Shape>& in) override {
    if (in.size() != 1) fail_shape("takes exactly one input");
    hw_ = in[0].h * in[0].w;
    return {1, in[0].c, 1, 1};
  }
  void forward_impl(const std::vector<const Tensor*>& in, Tensor& out, const Context&) override {
    const float* x = in[0]->data();
    float* y = out.data();
    const size_t planes = out.size();
    for (size_t p = 0; p < planes; ++p) {
      float sum = 0.0f;
      for (int i = 0; i < hw_; ++i) sum += x[p * hw_ + i];
      y[p] = sum / hw_;
    }
  }
  void backward_impl(const std::vector<const Tensor*>&, const Tensor&, const Tensor& dout,
                     const std::vector<GradSlot>& din, const Context&) override {
    if (!din[0].tensor) return;
    const float* dy = dout.data();
    float* dx = din[0].tensor->data();
    const size_t planes = dout.size();
    const bool acc = din[0].accumulate;
    for (size_t p = 0; p < planes; ++p) {
      const float g = dy[p] / hw_;
      for (int i = 0; i < hw_; ++i) dx[p * hw_ + i] = acc ? dx[p * hw_ + i] + g : g;
    }
  }

 private:
  int hw_ = 1;
};

std::unique_ptr<Layer> make_pool(const LayerSpec& spec, SpecReader& r, bool max) {
  auto k = r.require_pair("kernel");
  if (k.first < 1 || k.second < 1) r.fail("kernel", "must be >= 1");
  auto s = r.get_pair("stride", k);
  if (s.first < 1 || s.second < 1) r.fail("stride", "must be >= 1");
  auto p = r.get_pair("padding", {0, 0});
  if (p.first < 0 || p.second < 0) r.fail("padding", "must be >= 0");
  if (max) return std::make_unique<MaxPool2d>(spec, k, s, p);
  return std::make_unique<AvgPool2d>(spec, k, s, p);
}

}  // namespace

std::unique_ptr<Layer> make_maxpool2d(const LayerSpec& spec, SpecReader& r) { return make_pool(spec, r, true); }
std::unique_ptr<Layer> make_avgpool2d(const LayerSpec& spec, SpecReader& r) { return make_pool(spec, r, false); }
std::unique_ptr<Layer> make_global_avgpool(const LayerSpec& spec, SpecReader&) {
  return std::make_unique<GlobalAvgPool>(spec);
}

}  // namespace burstpool::layers
