#include "winograd.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels.hpp"

namespace burstpool::cpu {
namespace {

// Samples are processed in chunks whose transformed tiles (V or M: 16 floats
// per tile and channel) take about kChunkFloats floats, so they stay in L2
// between the transform and the GEMMs; on vgg_small this ran 1.2-1.5x faster
// than chunks of ~2000 tiles.
constexpr int kChunkFloats = 16 * 8192;

}  // namespace

Winograd3x3::Winograd3x3(int c, int h, int w, int k, int ph, int pw, int oh, int ow)
    : c_(c), h_(h), w_(w), k_(k), ph_(ph), pw_(pw), oh_(oh), ow_(ow),
      tiles_y_((oh + 1) / 2), tiles_x_((ow + 1) / 2) {}

int Winograd3x3::chunk_samples() const {
  const int per = tiles_y_ * tiles_x_;
  return std::max(1, kChunkFloats / (16 * std::max(c_, k_) * per));
}

// u = G g G^T, G = [[1,0,0],[.5,.5,.5],[.5,-.5,.5],[0,0,1]]
void Winograd3x3::transform_weights(const float* weight) {
  u_.resize(static_cast<size_t>(16) * k_ * c_);
  const size_t kc = static_cast<size_t>(k_) * c_;
#pragma omp parallel for if (parallel : worth_threads(kc * 16))
  for (size_t i = 0; i < kc; ++i) {
    const float* g = weight + i * 9;
    float r[4][3];
    for (int j = 0; j < 3; ++j) {
      r[0][j] = g[j];
      r[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
      r[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
      r[3][j] = g[6 + j];
    }
    for (int a = 0; a < 4; ++a) {
      const float u[4] = {r[a][0], 0.5f * (r[a][0] + r[a][1] + r[a][2]), 0.5f * (r[a][0] - r[a][1] + r[a][2]),
                          r[a][2]};
      for (int b = 0; b < 4; ++b) u_[(a * 4 + b) * kc + i] = u[b];
    }
  }
}

// v = B^T d B for every (channel, tile) of samples s0..s0+samples; layout [16][c][tiles].
// Each plane is first copied into a zero-padded scratch plane so the tile loop
// needs no bounds checks.
void Winograd3x3::transform_input(const float* x, int s0, int samples, float* v) const {
  const int per = tiles_y_ * tiles_x_, t_total = samples * per;
  const size_t ct = static_cast<size_t>(c_) * t_total;
  const int ph2 = 2 * tiles_y_ + 2, pw2 = 2 * tiles_x_ + 2;
#pragma omp parallel if (parallel : worth_threads(ct * 16))
  {
    std::vector<float> pad(static_cast<size_t>(ph2) * pw2);
    std::vector<float> even[4], odd[4];
    for (int i = 0; i < 4; ++i) even[i].resize(tiles_x_ + 1), odd[i].resize(tiles_x_ + 1);
#pragma omp for collapse(2)
    for (int s = 0; s < samples; ++s)
      for (int ch = 0; ch < c_; ++ch) {
        pad_plane(x + (static_cast<size_t>(s0 + s) * c_ + ch) * h_ * w_, pad.data());
        float* out = v + static_cast<size_t>(ch) * t_total + s * per;
        for (int ty = 0; ty < tiles_y_; ++ty) {
          const float* r0 = pad.data() + static_cast<size_t>(2 * ty) * pw2;
          const float* r1 = r0 + pw2;
          const float* r2 = r1 + pw2;
          const float* r3 = r2 + pw2;
          // Rows of B^T d (B^T = [[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]]) over the
          // whole padded row, split into even and odd columns so the column
          // transform below runs on contiguous, vectorisable arrays.
          for (int xx = 0; xx <= tiles_x_; ++xx) {
            const int e = 2 * xx, o = e + 1;
            even[0][xx] = r0[e] - r2[e], odd[0][xx] = r0[o] - r2[o];
            even[1][xx] = r1[e] + r2[e], odd[1][xx] = r1[o] + r2[o];
            even[2][xx] = r2[e] - r1[e], odd[2][xx] = r2[o] - r1[o];
            even[3][xx] = r1[e] - r3[e], odd[3][xx] = r1[o] - r3[o];
          }
          float* o = out + ty * tiles_x_;
          for (int i = 0; i < 4; ++i) {
            const float* e = even[i].data();
            const float* d = odd[i].data();
            float* v0 = o + (i * 4 + 0) * ct;
            float* v1 = o + (i * 4 + 1) * ct;
            float* v2 = o + (i * 4 + 2) * ct;
            float* v3 = o + (i * 4 + 3) * ct;
#pragma omp simd
            for (int tx = 0; tx < tiles_x_; ++tx) {
              v0[tx] = e[tx] - e[tx + 1];
              v1[tx] = d[tx] + e[tx + 1];
              v2[tx] = e[tx + 1] - d[tx];
              v3[tx] = d[tx] - d[tx + 1];
            }
          }
        }
      }
  }
}

// The plane (h x w) at offset (ph, pw) inside zeros of (2*tiles_y+2) x (2*tiles_x+2).
void Winograd3x3::pad_plane(const float* plane, float* pad) const {
  const int ph2 = 2 * tiles_y_ + 2, pw2 = 2 * tiles_x_ + 2;
  std::fill_n(pad, static_cast<size_t>(ph2) * pw2, 0.0f);
  for (int y = 0; y < h_; ++y) {
    const int py = y + ph_;
    if (py >= ph2) break;
    const int n = std::min(w_, pw2 - pw_);
    if (n <= 0) break;
    std::memcpy(pad + static_cast<size_t>(py) * pw2 + pw_, plane + static_cast<size_t>(y) * w_, sizeof(float) * n);
  }
}

void Winograd3x3::forward(const float* x, const float* weight, const float* bias, float* y, int n) {
  transform_weights(weight);
  const int per = tiles_y_ * tiles_x_, chunk = chunk_samples();
  const size_t kc = static_cast<size_t>(k_) * c_;
  for (int s0 = 0; s0 < n; s0 += chunk) {
    const int samples = std::min(chunk, n - s0), t = samples * per;
    const size_t ct = static_cast<size_t>(c_) * t, kt = static_cast<size_t>(k_) * t;
    v_.resize(16 * ct);
    m_.resize(16 * kt);
    transform_input(x, s0, samples, v_.data());
#pragma omp parallel for if (parallel : omp_get_max_threads() > 1)
    for (int xi = 0; xi < 16; ++xi)
      gemm(false, false, k_, t, c_, 1.0f, u_.data() + xi * kc, c_, v_.data() + xi * ct, t, 0.0f,
           m_.data() + xi * kt, t);
    // y = A^T m A, A^T = [[1,1,1,0],[0,1,-1,-1]]
#pragma omp parallel for collapse(2) if (parallel : worth_threads(kt * 16))
    for (int s = 0; s < samples; ++s)
      for (int kk = 0; kk < k_; ++kk) {
        float* out = y + (static_cast<size_t>(s0 + s) * k_ + kk) * oh_ * ow_;
        const float b = bias ? bias[kk] : 0.0f;
        for (int ty = 0; ty < tiles_y_; ++ty)
          for (int tx = 0; tx < tiles_x_; ++tx) {
            const size_t col = static_cast<size_t>(kk) * t + s * per + ty * tiles_x_ + tx;
            float m[4][4];
            for (int a = 0; a < 16; ++a) m[a / 4][a % 4] = m_[a * kt + col];
            float r[2][4];
            for (int j = 0; j < 4; ++j) {
              r[0][j] = m[0][j] + m[1][j] + m[2][j];
              r[1][j] = m[1][j] - m[2][j] - m[3][j];
            }
            for (int i = 0; i < 2; ++i) {
              const int oy = 2 * ty + i;
              if (oy >= oh_) break;
              const float y0 = r[i][0] + r[i][1] + r[i][2] + b, y1 = r[i][1] - r[i][2] - r[i][3] + b;
              out[oy * ow_ + 2 * tx] = y0;
              if (2 * tx + 1 < ow_) out[oy * ow_ + 2 * tx + 1] = y1;
            }
          }
      }
  }
}

void Winograd3x3::backward(const float* x, const float* weight, const float* dy, float* dweight, float* dx,
                           bool accumulate, int n) {
  transform_weights(weight);
  const int per = tiles_y_ * tiles_x_, chunk = chunk_samples();
  const size_t kc = static_cast<size_t>(k_) * c_;
  du_.assign(16 * kc, 0.0f);
  if (dx && !accumulate) std::fill_n(dx, static_cast<size_t>(n) * c_ * h_ * w_, 0.0f);
  std::vector<float> dv;
  for (int s0 = 0; s0 < n; s0 += chunk) {
    const int samples = std::min(chunk, n - s0), t = samples * per;
    const size_t ct = static_cast<size_t>(c_) * t, kt = static_cast<size_t>(k_) * t;
    v_.resize(16 * ct);
    m_.resize(16 * kt);
    transform_input(x, s0, samples, v_.data());
    // dm = A dy A^T over each 2x2 output tile (cells outside the output are 0).
    const int oph = 2 * tiles_y_, opw = 2 * tiles_x_;
#pragma omp parallel if (parallel : worth_threads(kt * 16))
    {
      std::vector<float> pad(static_cast<size_t>(oph) * opw, 0.0f);
#pragma omp for collapse(2)
      for (int s = 0; s < samples; ++s)
        for (int kk = 0; kk < k_; ++kk) {
          const float* g = dy + (static_cast<size_t>(s0 + s) * k_ + kk) * oh_ * ow_;
          for (int y = 0; y < oh_; ++y) std::memcpy(&pad[static_cast<size_t>(y) * opw], g + y * ow_, sizeof(float) * ow_);
          float* out = m_.data() + static_cast<size_t>(kk) * t + s * per;
          for (int ty = 0; ty < tiles_y_; ++ty) {
            const float* g0 = pad.data() + static_cast<size_t>(2 * ty) * opw;
            const float* g1 = g0 + opw;
            float* o = out + ty * tiles_x_;
            for (int tx = 0; tx < tiles_x_; ++tx) {
              const float d00 = g0[2 * tx], d01 = g0[2 * tx + 1], d10 = g1[2 * tx], d11 = g1[2 * tx + 1];
              const float r[4][2] = {{d00, d01}, {d00 + d10, d01 + d11}, {d00 - d10, d01 - d11}, {-d10, -d11}};
              for (int a = 0; a < 4; ++a) {
                const float p = r[a][0], q = r[a][1];
                o[(a * 4 + 0) * kt + tx] = p;
                o[(a * 4 + 1) * kt + tx] = p + q;
                o[(a * 4 + 2) * kt + tx] = p - q;
                o[(a * 4 + 3) * kt + tx] = -q;
              }
            }
          }
        }
    }
    if (dx) dv.resize(16 * ct);
#pragma omp parallel for if (parallel : omp_get_max_threads() > 1)
    for (int xi = 0; xi < 16; ++xi) {
      gemm(false, true, k_, c_, t, 1.0f, m_.data() + xi * kt, t, v_.data() + xi * ct, t, 1.0f,
           du_.data() + xi * kc, c_);
      if (dx)
        gemm(true, false, c_, t, k_, 1.0f, u_.data() + xi * kc, c_, m_.data() + xi * kt, t, 0.0f,
             dv.data() + xi * ct, t);
    }
    if (!dx) continue;
    // dx += B dv B^T, B = [[1,0,0,0],[0,1,-1,1],[-1,1,1,0],[0,0,0,-1]]. Tiles overlap, so
    // each (sample, channel) plane is owned by one thread and summed in a padded
    // scratch plane, whose interior is then added to dx.
    const int ph2 = 2 * tiles_y_ + 2, pw2 = 2 * tiles_x_ + 2;
#pragma omp parallel if (parallel : worth_threads(ct * 16))
    {
      std::vector<float> pad(static_cast<size_t>(ph2) * pw2);
#pragma omp for collapse(2)
      for (int s = 0; s < samples; ++s)
        for (int ch = 0; ch < c_; ++ch) {
          std::fill(pad.begin(), pad.end(), 0.0f);
          const float* in = dv.data() + static_cast<size_t>(ch) * t + s * per;
          for (int ty = 0; ty < tiles_y_; ++ty)
            for (int tx = 0; tx < tiles_x_; ++tx) {
              const float* q0 = in + ty * tiles_x_ + tx;
              float q[4][4];
              for (int a = 0; a < 16; ++a) q[a / 4][a % 4] = q0[a * ct];
              float wr[4][4];
              for (int j = 0; j < 4; ++j) {
                wr[0][j] = q[0][j];
                wr[1][j] = q[1][j] - q[2][j] + q[3][j];
                wr[2][j] = -q[0][j] + q[1][j] + q[2][j];
                wr[3][j] = -q[3][j];
              }
              for (int i = 0; i < 4; ++i) {
                float* row = pad.data() + static_cast<size_t>(2 * ty + i) * pw2 + 2 * tx;
                row[0] += wr[i][0];
                row[1] += wr[i][1] - wr[i][2] + wr[i][3];
                row[2] += -wr[i][0] + wr[i][1] + wr[i][2];
                row[3] += -wr[i][3];
              }
            }
          float* plane = dx + (static_cast<size_t>(s0 + s) * c_ + ch) * h_ * w_;
          for (int y = 0; y < h_; ++y) {
            const int py = y + ph_;
            if (py >= ph2) break;
            const float* src = pad.data() + static_cast<size_t>(py) * pw2 + pw_;
            float* dst = plane + static_cast<size_t>(y) * w_;
            const int n = std::min(w_, pw2 - pw_);
#pragma omp simd
            for (int x = 0; x < n; ++x) dst[x] += src[x];
          }
        }
    }
  }
  // dg = G^T du G, G^T = [[1,.5,.5,0],[0,.5,-.5,0],[0,.5,.5,1]]
#pragma omp parallel for if (parallel : worth_threads(kc * 16))
  for (size_t i = 0; i < kc; ++i) {
    float du[4][4];
    for (int a = 0; a < 16; ++a) du[a / 4][a % 4] = du_[a * kc + i];
    float r[3][4];
    for (int j = 0; j < 4; ++j) {
      r[0][j] = du[0][j] + 0.5f * (du[1][j] + du[2][j]);
      r[1][j] = 0.5f * (du[1][j] - du[2][j]);
      r[2][j] = 0.5f * (du[1][j] + du[2][j]) + du[3][j];
    }
    float* g = dweight + i * 9;
    for (int a = 0; a < 3; ++a) {
      g[a * 3 + 0] = r[a][0] + 0.5f * (r[a][1] + r[a][2]);
      g[a * 3 + 1] = 0.5f * (r[a][1] - r[a][2]);
      g[a * 3 + 2] = 0.5f * (r[a][1] + r[a][2]) + r[a][3];
    }
  }
}

}  // namespace burstpool::cpu
