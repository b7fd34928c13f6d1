#include <cmath>
#include <cstdio>

#include <omp.h>

#include "gradcheck.hpp"
#include "layers/onednn_conv.hpp"

namespace burstpool::testing {

using Attrs = std::vector<std::pair<std::string, std::string>>;

// The im2col + GEMM path by name (auto picks oneDNN in builds that have it).
Attrs im2col(Attrs a) {
  a.insert(a.begin(), {"algorithm", "im2col"});
  return a;
}

TEST(Conv2d, Gradients3x3Padding1) {
  check_layer_gradients({"conv2d", im2col({{"out_channels", "3"}, {"kernel", "3"}, {"padding", "1"}}), {{2, 2, 5, 5}}});
}
TEST(Conv2d, GradientsStride2OddSize) {
  check_layer_gradients(
      {"conv2d", im2col({{"out_channels", "2"}, {"kernel", "3"}, {"stride", "2"}, {"padding", "1"}}), {{2, 3, 7, 7}}});
}
TEST(Conv2d, GradientsNoPaddingNoBiasBatchOne) {
  check_layer_gradients({"conv2d", im2col({{"out_channels", "4"}, {"kernel", "5"}, {"bias", "false"}}), {{1, 1, 8, 8}}});
}
TEST(Conv2d, GradientsNonSquareKernelAndPadding) {
  check_layer_gradients({"conv2d", im2col({{"out_channels", "2"}, {"kernel", "1,3"}, {"padding", "0,1"}, {"stride", "2,1"}}),
                         {{3, 2, 5, 4}}});
}
// 1x1, stride 1, no padding: the path that skips im2col. Batch 5 with 3x3
// maps groups samples (ceil(256/9) per group) and leaves a partial group.
TEST(Conv2d, Gradients1x1GroupedSamples) {
  check_layer_gradients({"conv2d", im2col({{"out_channels", "3"}, {"kernel", "1"}}), {{5, 4, 3, 3}}});
}
// 1x1 on a map of >= 256 pixels: one sample per group, gradients written in place.
TEST(Conv2d, Gradients1x1SingleSampleGroups) {
  check_layer_gradients({"conv2d", im2col({{"out_channels", "2"}, {"kernel", "1"}}), {{2, 2, 16, 16}}, Values::smooth,
                         true, 1e-2, 2e-2, 5e-3});
}

// Winograd with 2x2 and 4x4 output tiles: odd output sizes leave partial
// tiles; padding 0, 1, 2; batch 1.
class Conv2dWinograd : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Tiles, Conv2dWinograd, ::testing::Values("winograd2", "winograd4"));

TEST_P(Conv2dWinograd, GradientsPadding1OddSize) {
  check_layer_gradients(
      {"conv2d", Attrs{{"out_channels", "3"}, {"kernel", "3"}, {"padding", "1"}, {"algorithm", GetParam()}},
       {{2, 2, 5, 7}}});
}
TEST_P(Conv2dWinograd, GradientsNoPaddingNoBias) {
  check_layer_gradients({"conv2d",
                         Attrs{{"out_channels", "2"}, {"kernel", "3"}, {"bias", "false"}, {"algorithm", GetParam()}},
                         {{3, 3, 9, 6}}});
}
TEST_P(Conv2dWinograd, GradientsPadding2BatchOne) {
  check_layer_gradients(
      {"conv2d", Attrs{{"out_channels", "2"}, {"kernel", "3"}, {"padding", "2"}, {"algorithm", GetParam()}},
       {{1, 2, 3, 4}}});
}
TEST(Conv2dWinograd, RejectsOtherKernels) {
  EXPECT_THROW(LayerRig({"conv2d", Attrs{{"out_channels", "1"}, {"kernel", "3"}, {"stride", "2"}, {"algorithm", "winograd"}},
                         {{1, 1, 6, 6}}}),
               Error);
}

// The rig's output against a direct six-loop convolution of its input
// (square kernel of the weight's size, given stride and padding), summed in
// double. Each output may differ by `ulps` float roundings (2^-24) of the sum
// of its terms' magnitudes, |b| + sum |w x|: a float sum's error bound scales
// with that, not with the result (which cancellation can make small).
// Returns the largest error seen in those units.
double expect_direct_convolution(LayerRig& rig, int stride, int pad, double ulps) {
  rig.loss();
  const Shape i = rig.inputs[0].shape(), o = rig.out.shape(), k = rig.params[0].shape();
  const float* x = rig.inputs[0].data();
  const float* w = rig.params[0].data();
  const float* b = rig.params[1].data();
  const double unit = std::ldexp(1.0, -24);
  double worst = 0;
  for (int n = 0; n < o.n; ++n)
    for (int oc = 0; oc < o.c; ++oc)
      for (int oy = 0; oy < o.h; ++oy)
        for (int ox = 0; ox < o.w; ++ox) {
          double sum = b[oc], magnitude = std::fabs(b[oc]);
          for (int c = 0; c < i.c; ++c)
            for (int ki = 0; ki < k.h; ++ki)
              for (int kj = 0; kj < k.w; ++kj) {
                const int iy = oy * stride - pad + ki, ix = ox * stride - pad + kj;
                if (iy < 0 || iy >= i.h || ix < 0 || ix >= i.w) continue;
                const double term = static_cast<double>(w[((oc * i.c + c) * k.h + ki) * k.w + kj]) *
                                    x[((n * i.c + c) * i.h + iy) * i.w + ix];
                sum += term;
                magnitude += std::fabs(term);
              }
          const double got = rig.out.data()[((n * o.c + oc) * o.h + oy) * o.w + ox];
          EXPECT_NEAR(got, sum, ulps * unit * magnitude);
          worst = std::max(worst, std::fabs(got - sum) / (unit * magnitude));
        }
  return worst;
}

// Float roundings of sum |terms| (expect_direct_convolution) an algorithm may
// be off by with `terms` products per output. im2col and F(2x2,3x3): one
// rounding per product and per addition of the terms and the bias, the bound of a
// float dot product summed in any order (GEMM kernels pick their own, which
// is why the error moves between processors). F(4x4,3x3)'s transforms have
// entries up to 5 (input) and 8 (output), so they round values several times
// larger than the terms: 4 times that bound, about 30 times the worst seen
// on the 9-channel case below (19.6 roundings; im2col 2.4, F(2x2) 1.4),
// which the test prints.
double direct_ulps(const std::string& algorithm, int terms) {
  const double dot = 2.0 * (terms + 1);
  return algorithm == "winograd4" || algorithm == "own" ? 4 * dot : dot;  // own may pick F(4x4)
}

// Every algorithm against the direct convolution ("onednn" only in builds that have it).
class Conv2dDirect : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "onednn" && !cpu::onednn_available()) GTEST_SKIP() << "this build has no oneDNN";
  }
};
INSTANTIATE_TEST_SUITE_P(Algorithms, Conv2dDirect, ::testing::Values("im2col", "winograd2", "winograd4", "onednn", "own"));

TEST_P(Conv2dDirect, ForwardMatches) {
  LayerRig rig({"conv2d", Attrs{{"out_channels", "3"}, {"kernel", "3"}, {"padding", "1"}, {"algorithm", GetParam()}},
                {{2, 9, 11, 6}}});
  const double worst = expect_direct_convolution(rig, 1, 1, direct_ulps(GetParam(), 9 * 3 * 3));
  std::printf("%s: largest error %.1f roundings of sum |terms|\n", GetParam().c_str(), worst);
}

TEST(Conv2d, Stride2ForwardMatchesDirectConvolution) {
  LayerRig rig({"conv2d", im2col({{"out_channels", "2"}, {"kernel", "3"}, {"stride", "2"}, {"padding", "1"}}),
                {{2, 3, 6, 5}}});
  expect_direct_convolution(rig, 2, 1, direct_ulps("im2col", 3 * 3 * 3));
}

// Geometries only the general algorithms take: 5x5, stride 2 with an odd
// size (the right padding oneDNN is given), non-square kernel and padding.
TEST_P(Conv2dDirect, OtherGeometriesMatch) {
  if (GetParam().starts_with("winograd")) GTEST_SKIP() << "Winograd takes 3x3 stride 1 only";
  LayerRig five({"conv2d", Attrs{{"out_channels", "6"}, {"kernel", "5"}, {"padding", "2"}, {"algorithm", GetParam()}},
                 {{3, 1, 9, 8}}});
  expect_direct_convolution(five, 1, 2, direct_ulps(GetParam(), 25));
  LayerRig odd({"conv2d", Attrs{{"out_channels", "2"}, {"kernel", "3"}, {"stride", "2"}, {"padding", "1"},
                                {"algorithm", GetParam()}},
                {{2, 3, 7, 6}}});
  expect_direct_convolution(odd, 2, 1, direct_ulps(GetParam(), 27));
}

// Finite differences for the algorithms that take any geometry: the cases
// of the im2col tests above (odd stride-2 sizes, batch one without bias,
// non-square kernels and padding, 1x1).
TEST_P(Conv2dDirect, Gradients) {
  if (GetParam() != "onednn") GTEST_SKIP() << "im2col has its own tests above; Winograd below";
  const std::string a = GetParam();
  check_layer_gradients({"conv2d", Attrs{{"out_channels", "3"}, {"kernel", "3"}, {"padding", "1"}, {"algorithm", a}},
                         {{2, 2, 5, 5}}});
  check_layer_gradients({"conv2d",
                         Attrs{{"out_channels", "2"}, {"kernel", "3"}, {"stride", "2"}, {"padding", "1"}, {"algorithm", a}},
                         {{2, 3, 7, 7}}});
  check_layer_gradients(
      {"conv2d", Attrs{{"out_channels", "4"}, {"kernel", "5"}, {"bias", "false"}, {"algorithm", a}}, {{1, 1, 8, 8}}});
  check_layer_gradients({"conv2d",
                         Attrs{{"out_channels", "2"}, {"kernel", "1,3"}, {"padding", "0,1"}, {"stride", "2,1"},
                               {"algorithm", a}},
                         {{3, 2, 5, 4}}});
  check_layer_gradients({"conv2d", Attrs{{"out_channels", "3"}, {"kernel", "1"}, {"algorithm", a}}, {{5, 4, 3, 3}}});
}

TEST(Conv2d, OnednnRefusedWithoutIt) {
  if (cpu::onednn_available()) GTEST_SKIP() << "this build has oneDNN";
  EXPECT_THROW(LayerRig({"conv2d", Attrs{{"out_channels", "1"}, {"kernel", "3"}, {"algorithm", "onednn"}}, {{1, 1, 6, 6}}}),
               Error);
}

// Several OpenMP threads (parallel sample groups, per-thread weight-gradient
// buffers) give the same results as one thread.
TEST_P(Conv2dDirect, ThreadedMatchesSingleThread) {
  LayerCase c{"conv2d", Attrs{{"out_channels", "4"}, {"kernel", "3"}, {"padding", "1"}, {"algorithm", GetParam()}},
              {{9, 3, 4, 4}}};
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    LayerRig rig(c);
    rig.loss();
    std::vector<Tensor> din{Tensor::zeros(rig.inputs[0].shape())};
    rig.backward(din, false);
    std::vector<float> all(rig.out.data(), rig.out.data() + rig.out.size());
    all.insert(all.end(), din[0].data(), din[0].data() + din[0].size());
    for (auto& g : rig.grads) all.insert(all.end(), g.data(), g.data() + g.size());
    return all;
  };
  std::vector<float> one = run(1), three = run(3);
  omp_set_num_threads(1);
  ASSERT_EQ(one.size(), three.size());
  for (size_t i = 0; i < one.size(); ++i) EXPECT_NEAR(one[i], three[i], 1e-4f + 1e-4f * std::fabs(one[i])) << i;
}

TEST(Conv2d, RejectsKernelLargerThanInput) {
  EXPECT_THROW(LayerRig({"conv2d", Attrs{{"out_channels", "1"}, {"kernel", "5"}}, {{1, 1, 3, 3}}}), Error);
}

}  // namespace burstpool::testing
