// Conv2d (stride, zero padding, optional bias), by one of three algorithms:
// oneDNN's primitives (layers/onednn_conv.cpp) in builds that have it, else
// burstpool's own: Winograd F(4x4,3x3) or F(2x2,3x3) (layers/winograd.cpp)
// for 3x3 stride-1 kernels with enough input channels, im2col + GEMM for
// everything else. The `algorithm` key forces one.
//
// im2col:
// Samples are processed in groups whose column matrix has at least ~256
// columns, so late layers with small feature maps still feed BLAS a wide
// matrix. 1x1 convolutions with stride 1 and no padding skip im2col. With more
// than one thread, groups run in parallel and weight gradients are reduced from
// per-thread buffers in a fixed order.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "burstpool/error.hpp"
#include "layers/families.hpp"
#include "layers/kernels.hpp"
#include "layers/onednn_conv.hpp"
#include "layers/winograd.hpp"

namespace burstpool::layers {
namespace {

struct Geometry : cpu::ConvShape {
  int ckk() const { return c * kh * kw; }
  int ohw() const { return oh * ow; }
  bool direct() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
};

// col[(ci*kh+ki)*kw+kj][col0 + oy*ow+ox] = x[ci][oy*sh-ph+ki][ox*sw-pw+kj] (0 outside)
void im2col(const Geometry& g, const float* x, float* col, int ld, int col0) {
  for (int ci = 0; ci < g.c; ++ci)
    for (int ki = 0; ki < g.kh; ++ki)
      for (int kj = 0; kj < g.kw; ++kj) {
        float* row = col + static_cast<size_t>((ci * g.kh + ki) * g.kw + kj) * ld + col0;
        const float* plane = x + static_cast<size_t>(ci) * g.h * g.w;
        for (int oy = 0; oy < g.oh; ++oy) {
          const int iy = oy * g.sh - g.ph + ki;
          float* out = row + oy * g.ow;
          if (iy < 0 || iy >= g.h) {
            std::memset(out, 0, sizeof(float) * g.ow);
            continue;
          }
          const float* in = plane + static_cast<size_t>(iy) * g.w;
          if (g.sw == 1) {
            const int lo = std::clamp(g.pw - kj, 0, g.ow), hi = std::clamp(g.w + g.pw - kj, lo, g.ow);
            for (int ox = 0; ox < lo; ++ox) out[ox] = 0.0f;
            const float* src = in + lo - g.pw + kj;
            for (int ox = lo; ox < hi; ++ox) out[ox] = src[ox - lo];
            for (int ox = hi; ox < g.ow; ++ox) out[ox] = 0.0f;
          } else {
            for (int ox = 0; ox < g.ow; ++ox) {
              const int ix = ox * g.sw - g.pw + kj;
              out[ox] = (ix >= 0 && ix < g.w) ? in[ix] : 0.0f;
            }
          }
        }
      }
}

// dx[ci][iy][ix] += col[...] : the adjoint of im2col.
void col2im(const Geometry& g, const float* col, int ld, int col0, float* dx) {
  for (int ci = 0; ci < g.c; ++ci)
    for (int ki = 0; ki < g.kh; ++ki)
      for (int kj = 0; kj < g.kw; ++kj) {
        const float* row = col + static_cast<size_t>((ci * g.kh + ki) * g.kw + kj) * ld + col0;
        float* plane = dx + static_cast<size_t>(ci) * g.h * g.w;
        // Output columns whose input column lies inside the image (stride 1: one range).
        const int lo = std::clamp(g.pw - kj, 0, g.ow), hi = std::clamp(g.w + g.pw - kj, lo, g.ow);
        for (int oy = 0; oy < g.oh; ++oy) {
          const int iy = oy * g.sh - g.ph + ki;
          if (iy < 0 || iy >= g.h) continue;
          float* out = plane + static_cast<size_t>(iy) * g.w;
          const float* in = row + oy * g.ow;
          if (g.sw == 1) {
            float* dst = out + lo - g.pw + kj;
#pragma omp simd
            for (int ox = lo; ox < hi; ++ox) dst[ox - lo] += in[ox];
          } else {
            for (int ox = 0; ox < g.ow; ++ox) {
              const int ix = ox * g.sw - g.pw + kj;
              if (ix >= 0 && ix < g.w) out[ix] += in[ox];
            }
          }
        }
      }
}

class Conv2d final : public Layer {
 public:
  // automatic: onednn in builds that have it, else own. own: Winograd where
  // it pays (below), im2col + GEMM elsewhere.
  enum class Algorithm { automatic, own, im2col, winograd, winograd2, winograd4, onednn };

  Conv2d(const LayerSpec& spec, int out_channels, std::pair<int, int> k, std::pair<int, int> s,
         std::pair<int, int> p, bool bias, Algorithm algorithm)
      : Layer(spec), bias_(bias), algorithm_(algorithm) {
    g_.oc = out_channels;
    std::tie(g_.kh, g_.kw) = k;
    std::tie(g_.sh, g_.sw) = s;
    std::tie(g_.ph, g_.pw) = p;
    attrs_.kh = g_.kh, attrs_.kw = g_.kw, attrs_.sh = g_.sh, attrs_.sw = g_.sw, attrs_.ph = g_.ph, attrs_.pw = g_.pw;
  }

  std::vector<ParamSpec> param_specs() const override {
    std::vector<ParamSpec> p{{"weight", Shape{g_.oc, g_.c, g_.kh, g_.kw}, Init::kaiming_uniform, g_.ckk()}};
    if (bias_) p.push_back({"bias", Shape{g_.oc, 1, 1, 1}, Init::zeros, g_.ckk()});
    return p;
  }
  double forward_flops() const override { return 2.0 * g_.oc * g_.ckk() * g_.ohw(); }
  uint64_t shared_buffer_bytes(int batch, int threads) const override {
    return kernel_ ? kernel_->shared_buffer_bytes(batch, threads) : 0;
  }
  uint64_t buffer_bytes(int batch, int threads) const override {
    if (kernel_) return kernel_->buffer_bytes(batch, threads);
    // Backward's peak: each thread's column, column-gradient and reordered
    // output-gradient matrices for one group of samples, plus the partial
    // weight gradients of every thread but the first.
    const int groups = (batch + group_ - 1) / group_;
    const uint64_t workers = std::max(1, std::min(groups, threads));
    const uint64_t ld = static_cast<uint64_t>(std::min(group_, std::max(batch, 1))) * g_.ohw();
    const uint64_t per_thread = (2 * static_cast<uint64_t>(g_.ckk()) + g_.oc) * ld;
    const uint64_t partial = (workers - 1) * static_cast<uint64_t>(g_.oc) * g_.ckk();
    return 4 * (workers * per_thread + partial);
  }

 protected:
  Shape infer_impl(const std::vector<Shape>& in) override {
    if (in.size() != 1) fail_shape("takes exactly one input");
    g_.c = in[0].c;
    g_.h = in[0].h;
    g_.w = in[0].w;
    g_.oh = (g_.h + 2 * g_.ph - g_.kh) / g_.sh + 1;
    g_.ow = (g_.w + 2 * g_.pw - g_.kw) / g_.sw + 1;
    if (g_.h + 2 * g_.ph < g_.kh || g_.w + 2 * g_.pw < g_.kw)
      fail_shape(fmt::format("kernel {}x{} is larger than the padded input", g_.kh, g_.kw));
    group_ = std::max(1, (256 + g_.ohw() - 1) / g_.ohw());
    kernel_ = choose_kernel();
    return {1, g_.oc, g_.oh, g_.ow};
  }

  void forward_impl(const std::vector<const Tensor*>& in, Tensor& out, const Context&) override {
    if (kernel_) {
      kernel_->forward(in[0]->data(), params_[0].data(), bias_ ? params_[1].data() : nullptr, out.data(),
                         out.shape().n);
      return;
    }
    const int n = out.shape().n, ohw = g_.ohw(), ckk = g_.ckk();
    const size_t in_per = in[0]->shape().per_sample(), out_per = out.shape().per_sample();
    const float* x = in[0]->data();
    float* y = out.data();
    const float* w = params_[0].data();
    const float* b = bias_ ? params_[1].data() : nullptr;
    const int groups = (n + group_ - 1) / group_;
#pragma omp parallel if (groups > 1 && omp_get_max_threads() > 1)
    {
      std::vector<float> col, tmp;
#pragma omp for schedule(static)
      for (int gi = 0; gi < groups; ++gi) {
        const int s0 = gi * group_, gs = std::min(group_, n - s0), ld = gs * ohw;
        const float* cols = columns(x + s0 * in_per, gs, col);
        float* dst = y + s0 * out_per;
        if (gs > 1) {
          tmp.resize(static_cast<size_t>(g_.oc) * ld);
          dst = tmp.data();
        }
        for (int o = 0; o < g_.oc; ++o) std::fill_n(dst + static_cast<size_t>(o) * ld, ld, b ? b[o] : 0.0f);
        cpu::gemm(false, false, g_.oc, ld, ckk, 1.0f, w, ckk, cols, ld, 1.0f, dst, ld);
        if (gs > 1)  // [oc][j*ohw + p] -> sample j, channel o
          for (int j = 0; j < gs; ++j)
            for (int o = 0; o < g_.oc; ++o)
              std::memcpy(y + (s0 + j) * out_per + static_cast<size_t>(o) * ohw,
                          dst + static_cast<size_t>(o) * ld + j * ohw, sizeof(float) * ohw);
      }
    }
  }

  void backward_impl(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                     const std::vector<GradSlot>& din, const Context&) override {
    const int n = out.shape().n, ohw = g_.ohw(), ckk = g_.ckk();
    const size_t in_per = in[0]->shape().per_sample(), out_per = out.shape().per_sample();
    const size_t wsize = static_cast<size_t>(g_.oc) * ckk;
    const float* x = in[0]->data();
    const float* dy = dout.data();
    const float* w = params_[0].data();
    float* dx = din[0].tensor ? din[0].tensor->data() : nullptr;
    const bool acc = din[0].accumulate;
    if (kernel_) {
      kernel_->backward(x, w, dy, grads_[0].data(), dx, acc, n);
      bias_gradient(dy, n);
      return;
    }
    const int groups = (n + group_ - 1) / group_;
    const int threads = (groups > 1) ? std::min(groups, omp_get_max_threads()) : 1;
    // Thread t accumulates dW into partial[t]; thread 0 writes straight into the gradient.
    std::vector<std::vector<float>> partial(threads > 1 ? threads - 1 : 0, std::vector<float>(wsize, 0.0f));
    float* dw_main = grads_[0].data();
    std::fill_n(dw_main, wsize, 0.0f);
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
      const int t = omp_get_thread_num();
      float* dw = t == 0 ? dw_main : partial[t - 1].data();
      std::vector<float> col, dcol, dtmp;
#pragma omp for schedule(static)
      for (int gi = 0; gi < groups; ++gi) {
        const int s0 = gi * group_, gs = std::min(group_, n - s0), ld = gs * ohw;
        const float* dyg = dy + s0 * out_per;
        if (gs > 1) {
          dtmp.resize(static_cast<size_t>(g_.oc) * ld);
          for (int j = 0; j < gs; ++j)
            for (int o = 0; o < g_.oc; ++o)
              std::memcpy(&dtmp[static_cast<size_t>(o) * ld + j * ohw],
                          dy + (s0 + j) * out_per + static_cast<size_t>(o) * ohw, sizeof(float) * ohw);
          dyg = dtmp.data();
        }
        const float* cols = columns(x + s0 * in_per, gs, col);
        // dW[oc,ckk] += dY[oc,ld] col^T[ld,ckk]
        cpu::gemm(false, true, g_.oc, ckk, ld, 1.0f, dyg, ld, cols, ld, 1.0f, dw, ckk);
        if (!dx) continue;
        if (g_.direct() && gs == 1) {  // dX = W^T dY straight into the gradient
          cpu::gemm(true, false, ckk, ld, g_.oc, 1.0f, w, ckk, dyg, ld, acc ? 1.0f : 0.0f,
                    dx + s0 * in_per, ld);
          continue;
        }
        dcol.resize(static_cast<size_t>(ckk) * ld);
        cpu::gemm(true, false, ckk, ld, g_.oc, 1.0f, w, ckk, dyg, ld, 0.0f, dcol.data(), ld);
        for (int j = 0; j < gs; ++j) {
          float* dxs = dx + (s0 + j) * in_per;
          if (!acc) std::fill_n(dxs, in_per, 0.0f);
          if (g_.direct())
            for (int ci = 0; ci < ckk; ++ci) {
              const float* src = &dcol[static_cast<size_t>(ci) * ld + j * ohw];
              float* d = dxs + ci * ohw;
              for (int p = 0; p < ohw; ++p) d[p] += src[p];
            }
          else
            col2im(g_, dcol.data(), ld, j * ohw, dxs);
        }
      }
    }
    for (const auto& p : partial)
      for (size_t i = 0; i < wsize; ++i) dw_main[i] += p[i];
    bias_gradient(dy, n);
  }

 private:
  // The algorithm the layer runs (null: its own im2col + GEMM).
  std::unique_ptr<cpu::ConvKernel> choose_kernel() const {
    if (algorithm_ == Algorithm::onednn || (algorithm_ == Algorithm::automatic && cpu::onednn_available()))
      return cpu::make_onednn_conv(g_, bias_);
    const bool fits = g_.kh == 3 && g_.kw == 3 && g_.sh == 1 && g_.sw == 1;
    const bool forced = algorithm_ == Algorithm::winograd || algorithm_ == Algorithm::winograd2 ||
                        algorithm_ == Algorithm::winograd4;
    if (forced && !fits) fail_shape("a winograd algorithm needs a 3x3 kernel with stride 1");
    // Few input channels make the transformed GEMMs too thin to pay for the transforms.
    const bool chosen = algorithm_ == Algorithm::automatic || algorithm_ == Algorithm::own;
    const bool use = forced || (chosen && fits && g_.c >= 8);
    if (!use) return nullptr;
    // 4x4 output tiles need a quarter of the multiplies of direct convolution;
    // maps too small to fill them take 2x2 tiles.
    int tile = std::min(g_.oh, g_.ow) >= 6 ? 4 : 2;
    if (algorithm_ == Algorithm::winograd2) tile = 2;
    if (algorithm_ == Algorithm::winograd4) tile = 4;
    return cpu::make_winograd(tile, g_);
  }

  void bias_gradient(const float* dy, int n) {
    if (!bias_) return;
    const int ohw = g_.ohw();
    const size_t out_per = static_cast<size_t>(g_.oc) * ohw;
    float* db = grads_[1].data();
    for (int o = 0; o < g_.oc; ++o) {
      double sum = 0.0;
      for (int s = 0; s < n; ++s) {
        const float* row = dy + s * out_per + static_cast<size_t>(o) * ohw;
        float part = 0.0f;
#pragma omp simd reduction(+ : part)
        for (int p = 0; p < ohw; ++p) part += row[p];
        sum += part;
      }
      db[o] = static_cast<float>(sum);
    }
  }

  // The column matrix [ckk, gs*ohw] of `gs` consecutive samples starting at x:
  // x itself for a single-sample 1x1 convolution, else built in `col`.
  const float* columns(const float* x, int gs, std::vector<float>& col) const {
    const int ohw = g_.ohw(), ckk = g_.ckk(), ld = gs * ohw;
    const size_t in_per = static_cast<size_t>(g_.c) * g_.h * g_.w;
    if (g_.direct() && gs == 1) return x;
    col.resize(static_cast<size_t>(ckk) * ld);
    for (int j = 0; j < gs; ++j) {
      if (g_.direct())
        for (int ci = 0; ci < ckk; ++ci)
          std::memcpy(&col[static_cast<size_t>(ci) * ld + j * ohw], x + j * in_per + ci * ohw,
                      sizeof(float) * ohw);
      else
        im2col(g_, x + j * in_per, col.data(), ld, j * ohw);
    }
    return col.data();
  }

  Geometry g_{};
  bool bias_;
  Algorithm algorithm_;
  int group_ = 1;
  std::unique_ptr<cpu::ConvKernel> kernel_;  // set unless im2col + GEMM is used
};

}  // namespace

std::unique_ptr<Layer> make_conv2d(const LayerSpec& spec, SpecReader& r) {
  int oc = r.require_int("out_channels");
  if (oc < 1) r.fail("out_channels", "must be >= 1");
  auto k = r.require_pair("kernel");
  if (k.first < 1 || k.second < 1) r.fail("kernel", "must be >= 1");
  auto s = r.get_pair("stride", {1, 1});
  if (s.first < 1 || s.second < 1) r.fail("stride", "must be >= 1");
  auto p = r.get_pair("padding", {0, 0});
  if (p.first < 0 || p.second < 0) r.fail("padding", "must be >= 0");
  bool bias = r.get_bool("bias", true);
  const std::string algorithm = r.get_string("algorithm", "auto");
  Conv2d::Algorithm a = Conv2d::Algorithm::automatic;
  if (algorithm == "own")
    a = Conv2d::Algorithm::own;
  else if (algorithm == "im2col")
    a = Conv2d::Algorithm::im2col;
  else if (algorithm == "winograd")
    a = Conv2d::Algorithm::winograd;
  else if (algorithm == "winograd2")
    a = Conv2d::Algorithm::winograd2;
  else if (algorithm == "winograd4")
    a = Conv2d::Algorithm::winograd4;
  else if (algorithm == "onednn")
    a = Conv2d::Algorithm::onednn;
  else if (algorithm != "auto")
    r.fail("algorithm",
           fmt::format("'{}' is not one of: auto, own, im2col, winograd, winograd2, winograd4, onednn", algorithm));
  if (a == Conv2d::Algorithm::onednn && !cpu::onednn_available())
    r.fail("algorithm", "'onednn' needs a build with oneDNN (install libdnnl-dev and rebuild)");
  return std::make_unique<Conv2d>(spec, oc, k, s, p, bias, a);
}

}  // namespace burstpool::layers
