#include "layers/winograd.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "burstpool/error.hpp"
#include "layers/kernels.hpp"

namespace burstpool::cpu {
namespace {

// Transform matrices (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks").
template <int M>
struct Matrices;

template <>
struct Matrices<2> {
  static constexpr float BT[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  static constexpr float G[4][3] = {{1, 0, 0}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0, 0, 1}};
  static constexpr float AT[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
};

template <>
struct Matrices<4> {
  static constexpr float BT[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                     {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
  static constexpr float G[6][3] = {{1.0f / 4, 0, 0},
                                    {-1.0f / 6, -1.0f / 6, -1.0f / 6},
                                    {-1.0f / 6, 1.0f / 6, -1.0f / 6},
                                    {1.0f / 24, 1.0f / 12, 1.0f / 6},
                                    {1.0f / 24, -1.0f / 12, 1.0f / 6},
                                    {0, 0, 1}};
  static constexpr float AT[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
};

// out[a][b][l] = sum_i sum_j P[a][i] in[i][j][l] Q[b][j] for l < len; the
// [.][.] planes are `stride` floats apart in both in and out. `tmp` holds
// RA*RJ*len floats. Each output row is one pass that keeps its sum in
// registers; zero coefficients (known once the loops are unrolled) are skipped.
template <int RA, int RI, int RB, int RJ>
inline void sandwich(const float (&P)[RA][RI], const float (&Q)[RB][RJ], const float* in, size_t in_stride, float* out,
                     size_t out_stride, float* tmp, int len, bool accumulate = false) {
  for (int a = 0; a < RA; ++a)
    for (int j = 0; j < RJ; ++j) {
      float* t = tmp + (a * RJ + j) * static_cast<size_t>(len);
      const float* src = in + j * in_stride;
#pragma omp simd
      for (int l = 0; l < len; ++l) {
        float acc = 0.0f;
#pragma GCC unroll 8
        for (int i = 0; i < RI; ++i)
          acc += P[a][i] * src[i * RJ * in_stride + l];
        t[l] = acc;
      }
    }
  for (int a = 0; a < RA; ++a)
    for (int b = 0; b < RB; ++b) {
      float* dst = out + (a * RB + b) * out_stride;
      const float* t = tmp + a * RJ * static_cast<size_t>(len);
      const float keep = accumulate ? 1.0f : 0.0f;
#pragma omp simd
      for (int l = 0; l < len; ++l) {
        float acc = keep * dst[l];
#pragma GCC unroll 8
        for (int j = 0; j < RJ; ++j)
          acc += Q[b][j] * t[j * static_cast<size_t>(len) + l];
        dst[l] = acc;
      }
    }
}

// Transposed view of a constant matrix, built once.
template <int R, int C>
struct Transposed {
  float m[C][R];
  constexpr explicit Transposed(const float (&src)[R][C]) : m{} {
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) m[c][r] = src[r][c];
  }
};

// Samples are processed in chunks whose transformed tiles (V or M) take about
// kChunkFloats floats, so they stay in L2 between the transforms and the
// GEMMs; on vgg_small this ran 1.2-1.5x faster than chunks 8x larger.
constexpr int kChunkFloats = 16 * 8192;

// Forward keeps the transformed input of the whole batch for backward up to
// this many floats per layer (64 MiB), instead of transforming it again.
constexpr size_t kSavedInputFloats = size_t{16} << 20;

template <int M>
class Winograd final : public ConvKernel {
  static constexpr int A = M + 2;  // input tile edge
  static constexpr int AA = A * A;
  using Mat = Matrices<M>;

 public:
  Winograd(int c, int h, int w, int k, int ph, int pw, int oh, int ow)
      : c_(c), h_(h), w_(w), k_(k), ph_(ph), pw_(pw), oh_(oh), ow_(ow), ty_((oh + M - 1) / M), tx_((ow + M - 1) / M) {}

  void forward(const float* x, const float* weight, const float* bias, float* y, int n) override {
    transform_weights(weight);
    const int per = ty_ * tx_, chunk = chunk_samples();
    const size_t kc = static_cast<size_t>(k_) * c_;
    // Keep every chunk's transformed input for backward when the batch's fit the budget.
    const size_t batch_v = static_cast<size_t>(AA) * c_ * per * n;
    saved_batch_ = batch_v <= kSavedInputFloats ? n : 0;
    if (saved_batch_) saved_v_.resize(batch_v);
    for (int s0 = 0; s0 < n; s0 += chunk) {
      const int samples = std::min(chunk, n - s0), t = samples * per;
      const size_t ct = static_cast<size_t>(c_) * t, kt = static_cast<size_t>(k_) * t;
      float* v = chunk_input(s0, ct);
      m_.resize(AA * kt);
      transform_input(x, s0, samples, v);
#pragma omp parallel for if (parallel : omp_get_max_threads() > 1)
      for (int xi = 0; xi < AA; ++xi)
        gemm(false, false, k_, t, c_, 1.0f, u_.data() + xi * kc, c_, v + xi * ct, t, 0.0f,
             m_.data() + xi * kt, t);
      // Y = A^T M A per out channel, over all tiles of the chunk, then scattered.
#pragma omp parallel if (parallel : worth_threads(kt * AA))
      {
        std::vector<float> tmp(static_cast<size_t>(M) * A * t), out(static_cast<size_t>(M) * M * t);
#pragma omp for
        for (int kk = 0; kk < k_; ++kk) {
          sandwich(Mat::AT, Mat::AT, m_.data() + kk * static_cast<size_t>(t), kt, out.data(), t, tmp.data(), t);
          const float b = bias ? bias[kk] : 0.0f;
          for (int s = 0; s < samples; ++s) {
            float* plane = y + (static_cast<size_t>(s0 + s) * k_ + kk) * oh_ * ow_;
            const float* tiles = out.data() + s * per;
            // Output row oy = ty*M + p is written left to right from the M column phases.
            for (int ty = 0; ty < ty_; ++ty)
              for (int p = 0; p < M && ty * M + p < oh_; ++p) {
                float* row = plane + static_cast<size_t>(ty * M + p) * ow_;
                const float* src = tiles + p * M * static_cast<size_t>(t) + ty * tx_;
                for (int ox = 0; ox < ow_; ++ox) row[ox] = src[(ox % M) * static_cast<size_t>(t) + ox / M] + b;
              }
          }
        }
      }
    }
  }

  uint64_t buffer_bytes(int n, int threads) const override {
    const uint64_t kc = static_cast<uint64_t>(k_) * c_, per = static_cast<uint64_t>(ty_) * tx_;
    const uint64_t chunk = std::min(chunk_samples(), std::max(n, 1)), t = chunk * per;
    const uint64_t batch_v = uint64_t{AA} * c_ * per * n;
    const uint64_t saved = batch_v <= kSavedInputFloats ? batch_v : uint64_t{AA} * c_ * t;  // saved_v_ or v_
    const uint64_t weights = 2 * AA * kc + 9 * kc + uint64_t{A} * 3 * kc;  // u_, du_, g/dg, tmp
    const uint64_t chunks = uint64_t{AA} * (k_ + c_) * t;                     // m_, dv_
    const uint64_t pad = static_cast<uint64_t>(ty_ * M + 2) * (tx_ * M + 2);
    const uint64_t per_thread = 2 * uint64_t{AA} * t + pad;                   // d, tmp, pad
    return 4 * (saved + weights + chunks + static_cast<uint64_t>(std::max(threads, 1)) * per_thread);
  }

  void backward(const float* x, const float* weight, const float* dy, float* dweight, float* dx, bool accumulate,
                int n) override {
    transform_weights(weight);
    const int per = ty_ * tx_, chunk = chunk_samples();
    du_.assign(AA * static_cast<size_t>(k_) * c_, 0.0f);
    if (dx && !accumulate) std::fill_n(dx, static_cast<size_t>(n) * c_ * h_ * w_, 0.0f);
    const bool saved = saved_batch_ == n;  // forward kept the transformed input of this batch
    for (int s0 = 0; s0 < n; s0 += chunk) {
      const int samples = std::min(chunk, n - s0), t = samples * per;
      const size_t ct = static_cast<size_t>(c_) * t;
      float* v = saved ? saved_v_.data() + static_cast<size_t>(AA) * c_ * per * s0 : chunk_input(s0, ct);
      if (!saved) transform_input(x, s0, samples, v);
      transform_output_gradient(dy, s0, samples);
      chunk_gemms(v, t, dx != nullptr);
      if (dx) add_input_gradient(dx, s0, samples);
    }
    weight_gradient(dweight);
  }

 private:
  // dM = A dY A^T per out channel, into m_: dY's tiles of one chunk gathered
  // (zero outside the output), then transformed.
  void transform_output_gradient(const float* dy, int s0, int samples) {
    static const Transposed<M, A> Am(Mat::AT);  // A = (A^T)^T
    const int per = ty_ * tx_, t = samples * per;
    const size_t kt = static_cast<size_t>(k_) * t;
    m_.resize(AA * kt);
#pragma omp parallel if (parallel : worth_threads(kt * AA))
    {
      std::vector<float> g(static_cast<size_t>(M) * M * t), tmp(static_cast<size_t>(A) * M * t);
#pragma omp for
      for (int kk = 0; kk < k_; ++kk) {
        for (int s = 0; s < samples; ++s) {
          const float* plane = dy + (static_cast<size_t>(s0 + s) * k_ + kk) * oh_ * ow_;
          float* tiles = g.data() + s * per;
          // Tile cells past the output's edge are zero.
          for (int ty = 0; ty < ty_; ++ty)
            for (int p = 0; p < M; ++p) {
              float* dst = tiles + p * M * static_cast<size_t>(t) + ty * tx_;
              const int oy = ty * M + p;
              for (int ox = 0; ox < tx_ * M; ++ox)
                dst[(ox % M) * static_cast<size_t>(t) + ox / M] = (oy < oh_ && ox < ow_) ? plane[oy * ow_ + ox] : 0.0f;
            }
        }
        sandwich(Am.m, Am.m, g.data(), t, m_.data() + kk * static_cast<size_t>(t), kt, tmp.data(), t);
      }
    }
  }

  // Per transformed element: dU += dM V^T, and (when dx is wanted) dV = U^T dM.
  void chunk_gemms(const float* v, int t, bool want_dx) {
    const size_t kc = static_cast<size_t>(k_) * c_, ct = static_cast<size_t>(c_) * t,
                 kt = static_cast<size_t>(k_) * t;
    if (want_dx) dv_.resize(AA * ct);
#pragma omp parallel for if (parallel : omp_get_max_threads() > 1)
    for (int xi = 0; xi < AA; ++xi) {
      gemm(false, true, k_, c_, t, 1.0f, m_.data() + xi * kt, t, v + xi * ct, t, 1.0f, du_.data() + xi * kc, c_);
      if (want_dx)
        gemm(true, false, c_, t, k_, 1.0f, u_.data() + xi * kc, c_, m_.data() + xi * kt, t, 0.0f,
             dv_.data() + xi * ct, t);
    }
  }

  // dD = B dV B^T per in channel, then summed into dx over overlapping tiles
  // (through a padded plane, so no bounds checks per element).
  void add_input_gradient(float* dx, int s0, int samples) {
    static const Transposed<A, A> B(Mat::BT);  // B = (B^T)^T
    const int per = ty_ * tx_, t = samples * per;
    const size_t ct = static_cast<size_t>(c_) * t;
    const int ph2 = ty_ * M + 2, pw2 = tx_ * M + 2;
#pragma omp parallel if (parallel : worth_threads(ct * AA))
    {
      std::vector<float> d(static_cast<size_t>(AA) * t), tmp(static_cast<size_t>(AA) * t);
      std::vector<float> pad(static_cast<size_t>(ph2) * pw2);
#pragma omp for
      for (int ch = 0; ch < c_; ++ch) {
        sandwich(B.m, B.m, dv_.data() + ch * static_cast<size_t>(t), ct, d.data(), t, tmp.data(), t);
        for (int s = 0; s < samples; ++s) {
          std::fill(pad.begin(), pad.end(), 0.0f);
          for (int ty = 0; ty < ty_; ++ty)
            for (int i = 0; i < A; ++i) {
              float* row = pad.data() + static_cast<size_t>(ty * M + i) * pw2;
              const float* src = d.data() + i * A * static_cast<size_t>(t) + s * per + ty * tx_;
              for (int tx = 0; tx < tx_; ++tx)
                for (int j = 0; j < A; ++j) row[tx * M + j] += src[j * static_cast<size_t>(t) + tx];
            }
          float* plane = dx + (static_cast<size_t>(s0 + s) * c_ + ch) * h_ * w_;
          for (int yy = 0; yy < h_; ++yy) {
            const int py = yy + ph_;
            if (py >= ph2) break;
            const int count = std::min(w_, pw2 - pw_);
            const float* src = pad.data() + static_cast<size_t>(py) * pw2 + pw_;
            float* dst = plane + static_cast<size_t>(yy) * w_;
#pragma omp simd
            for (int xx = 0; xx < count; ++xx) dst[xx] += src[xx];
          }
        }
      }
    }
  }

  // dg = G^T dU G for every (out, in) channel pair.
  void weight_gradient(float* dweight) const {
    static const Transposed<A, 3> Gt(Mat::G);
    const size_t kc = static_cast<size_t>(k_) * c_;
    std::vector<float> dg(9 * kc), tmp(3 * A * kc);
    sandwich(Gt.m, Gt.m, du_.data(), kc, dg.data(), kc, tmp.data(), static_cast<int>(kc));
    for (size_t i = 0; i < kc; ++i)
      for (int e = 0; e < 9; ++e) dweight[i * 9 + e] = dg[e * kc + i];
  }

  // Where chunk s0's transformed input goes: the saved batch buffer, else scratch.
  float* chunk_input(int s0, size_t ct) {
    if (saved_batch_) return saved_v_.data() + static_cast<size_t>(AA) * c_ * ty_ * tx_ * s0;
    v_.resize(AA * ct);
    return v_.data();
  }

  int chunk_samples() const {
    return std::max(1, kChunkFloats / (AA * std::max(c_, k_) * ty_ * tx_));
  }

  // U = G g G^T for every (out, in) channel pair; layout [AA][k][c].
  void transform_weights(const float* weight) {
    const size_t kc = static_cast<size_t>(k_) * c_;
    std::vector<float> g(9 * kc), tmp(static_cast<size_t>(A) * 3 * kc);
    for (size_t i = 0; i < kc; ++i)
      for (int e = 0; e < 9; ++e) g[e * kc + i] = weight[i * 9 + e];
    u_.resize(AA * kc);
    sandwich(Mat::G, Mat::G, g.data(), kc, u_.data(), kc, tmp.data(), static_cast<int>(kc));
  }

  // V = B^T d B for every (channel, tile) of samples s0..s0+samples; layout [AA][c][tiles].
  void transform_input(const float* x, int s0, int samples, float* v) const {
    const int per = ty_ * tx_, t = samples * per;
    const size_t ct = static_cast<size_t>(c_) * t;
    const int ph2 = ty_ * M + 2, pw2 = tx_ * M + 2;
#pragma omp parallel if (parallel : worth_threads(ct * AA))
    {
      std::vector<float> pad(static_cast<size_t>(ph2) * pw2), d(static_cast<size_t>(AA) * t),
          tmp(static_cast<size_t>(AA) * t);
#pragma omp for
      for (int ch = 0; ch < c_; ++ch) {
        for (int s = 0; s < samples; ++s) {
          // The plane inside zeros, so tiles read without bounds checks.
          std::fill(pad.begin(), pad.end(), 0.0f);
          const float* plane = x + (static_cast<size_t>(s0 + s) * c_ + ch) * h_ * w_;
          for (int yy = 0; yy < h_ && yy + ph_ < ph2; ++yy) {
            const int count = std::min(w_, pw2 - pw_);
            if (count > 0)
              std::memcpy(pad.data() + static_cast<size_t>(yy + ph_) * pw2 + pw_, plane + yy * w_,
                          sizeof(float) * count);
          }
          for (int ty = 0; ty < ty_; ++ty)
            for (int i = 0; i < A; ++i) {
              const float* row = pad.data() + static_cast<size_t>(ty * M + i) * pw2;
              float* dst = d.data() + i * A * static_cast<size_t>(t) + s * per + ty * tx_;
              for (int tx = 0; tx < tx_; ++tx)
                for (int j = 0; j < A; ++j) dst[j * static_cast<size_t>(t) + tx] = row[tx * M + j];
            }
        }
        sandwich(Mat::BT, Mat::BT, d.data(), t, v + ch * static_cast<size_t>(t), ct, tmp.data(), t);
      }
    }
  }

  int c_, h_, w_, k_, ph_, pw_, oh_, ow_;
  int ty_, tx_;              // tiles per sample, vertically and horizontally
  std::vector<float> u_;     // [AA][k][c]: transformed weights of the current step
  std::vector<float> v_, m_, dv_, du_;
  std::vector<float> saved_v_;  // transformed input of the last forward's whole batch
  int saved_batch_ = 0;         // its batch size; 0 when it did not fit the budget
};

}  // namespace

std::unique_ptr<ConvKernel> make_winograd(int tile, const ConvShape& s) {
  if (tile == 2) return std::make_unique<Winograd<2>>(s.c, s.h, s.w, s.oc, s.ph, s.pw, s.oh, s.ow);
  BP_CHECK(tile == 4, "Winograd tile {} is not 2 or 4", tile);
  return std::make_unique<Winograd<4>>(s.c, s.h, s.w, s.oc, s.ph, s.pw, s.oh, s.ow);
}

}  // namespace burstpool::cpu
