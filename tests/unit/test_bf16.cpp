// bf16 numerics on the CPU ([job] precision = bf16): the rounding against
// hand-worked bit patterns; each layer in bf16 against its fp32 self given
// the rounded operands, bit for bit; and linear and conv2d against fp32
// within bounds that follow from bf16's rounding alone.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gradcheck.hpp"
#include "layers/bf16.hpp"

namespace burstpool::testing {
namespace {

constexpr double kU = 1.0 / 256;  // bf16's unit roundoff: 8 significant bits, to nearest

uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }
float from_bits(uint32_t u) { return std::bit_cast<float>(u); }
uint32_t rounded_bits(uint32_t u) { return bits(bf16_round(from_bits(u))); }

TEST(Bf16, RoundsToNearestTiesToEven) {
  EXPECT_EQ(rounded_bits(0x3F800000u), 0x3F800000u);  // 1 is a bf16
  EXPECT_EQ(rounded_bits(0x3F807FFFu), 0x3F800000u);  // below half an ulp (2^-7): down
  EXPECT_EQ(rounded_bits(0x3F808000u), 0x3F800000u);  // 1 + 2^-8, a tie: to the even 1
  EXPECT_EQ(rounded_bits(0x3F808001u), 0x3F810000u);  // above the tie: up
  EXPECT_EQ(rounded_bits(0x3F818000u), 0x3F820000u);  // a tie above the odd 1 + 2^-7: up to even
  EXPECT_EQ(rounded_bits(0xBF808001u), 0xBF810000u);  // signs are symmetric
  EXPECT_EQ(rounded_bits(0x3FFF8000u), 0x40000000u);  // a carry into the exponent: 1.99609375 -> 2
  EXPECT_EQ(rounded_bits(0x00018000u), 0x00020000u);  // subnormals round the same way
  EXPECT_EQ(rounded_bits(0x00008000u), 0x00000000u);
  EXPECT_EQ(rounded_bits(0x7F7F7FFFu), 0x7F7F0000u);  // the largest bf16 stays
  EXPECT_EQ(rounded_bits(0x7F7FFFFFu), 0x7F800000u);  // past it: infinity, as a conversion gives
  EXPECT_EQ(bf16_round(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(from_bits(rounded_bits(0x7F800001u)))) << "a NaN whose payload rounds away stays NaN";
  EXPECT_TRUE(std::isnan(from_bits(rounded_bits(0xFFFFFFFFu))));
}

TEST(Bf16, EveryResultIsABf16WithinHalfAnUlp) {
  std::vector<float> v(100000), r(v.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::ldexp(std::sin(0.37 * i + 0.1), static_cast<int>(i % 60) - 30);
  bf16_round(v.data(), r.data(), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(bits(r[i]) & 0xFFFFu, 0u) << i;
    ASSERT_LE(std::fabs(static_cast<double>(r[i]) - v[i]), kU * std::fabs(v[i])) << i;
  }
}

// One run of a layer: its output, input gradients and parameter gradients.
struct Outcome {
  std::vector<std::vector<float>> values;  // out, din..., grads...
};

Outcome run(LayerRig& rig, Precision p) {
  rig.ctx.precision = p;
  rig.loss();
  std::vector<Tensor> din;
  for (const Tensor& t : rig.inputs) din.push_back(Tensor::zeros(t.shape()));
  rig.backward(din, false);
  Outcome o;
  o.values.emplace_back(rig.out.data(), rig.out.data() + rig.out.size());
  for (const Tensor& t : din) o.values.emplace_back(t.data(), t.data() + t.size());
  for (const Tensor& t : rig.grads) o.values.emplace_back(t.data(), t.data() + t.size());
  return o;
}

void round_tensor(Tensor& t) { bf16_round(t.data(), t.size()); }
void magnitudes(Tensor& t) {
  for (size_t i = 0; i < t.size(); ++i) t.data()[i] = std::fabs(t.data()[i]);
}
std::vector<float> copy_of(const Tensor& t) { return {t.data(), t.data() + t.size()}; }

bool rounds_weights(const LayerCase& c) { return c.type == "linear" || c.type == "conv2d"; }

// The layer in bf16 is its fp32 self on bf16 operands: its inputs (a bf16
// model's activations are), its weights if it is a linear or conv2d layer,
// and the gradient it receives; its output is then rounded (not a loss's).
// Bit for bit, and the master weights are left as they were.
void expect_fp32_on_rounded_operands(const LayerCase& c) {
  SCOPED_TRACE(c.type);
  LayerRig rig(c);
  for (Tensor& t : rig.inputs) round_tensor(t);
  const std::vector<float> weights = rig.params.empty() ? std::vector<float>{} : copy_of(rig.params[0]);
  const Outcome mine = run(rig, Precision::bf16);
  if (!rig.params.empty()) EXPECT_EQ(copy_of(rig.params[0]), weights) << "the master weights changed";
  if (rounds_weights(c)) round_tensor(rig.params[0]);
  if (!rig.layer->is_loss()) round_tensor(rig.weights_r);
  Outcome want = run(rig, Precision::fp32);
  if (!rig.layer->is_loss()) bf16_round(want.values[0].data(), want.values[0].size());
  ASSERT_EQ(mine.values.size(), want.values.size());
  for (size_t k = 0; k < want.values.size(); ++k) EXPECT_EQ(mine.values[k], want.values[k]) << "result " << k;
}

TEST(Bf16, EachLayerIsItsFp32SelfOnRoundedOperands) {
  const std::vector<LayerCase> cases = {
      {"linear", {{"out_features", "5"}}, {{3, 7, 1, 1}}},
      {"conv2d", {{"out_channels", "4"}, {"kernel", "3"}, {"padding", "1"}}, {{2, 3, 6, 6}}},
      {"conv2d", {{"algorithm", "im2col"}, {"out_channels", "4"}, {"kernel", "3"}, {"stride", "2"}}, {{2, 3, 7, 7}}},
      {"relu", {}, {{2, 3, 4, 4}}, Values::distinct},
      {"maxpool2d", {{"kernel", "2"}}, {{2, 3, 4, 4}}, Values::distinct},
      {"avgpool2d", {{"kernel", "2"}}, {{2, 3, 4, 4}}},
      {"batchnorm2d", {}, {{4, 3, 3, 3}}},
      {"add", {}, {{2, 3, 2, 2}, {2, 3, 2, 2}}},
      {"softmax_cross_entropy", {}, {{4, 10, 1, 1}}},
  };
  for (const LayerCase& c : cases) expect_fp32_on_rounded_operands(c);
}

// linear and conv2d in bf16 against fp32, each result within what bf16's
// rounding allows, with a = the same sums over magnitudes (the layer run in
// fp32 on |x|, |w|, |b| and |r|): the output within (u + u^2) a + u |y|
// (weights rounded, then the output), the input gradient within
// (2u + u^2) a (weights and received gradient rounded), the weight and bias
// gradients within u a (the received gradient rounded; the inputs are bf16
// already), each plus 4 k 2^-24 a for fp32's own sums over k terms.
void expect_within_bf16_bounds(const LayerCase& c, int k) {
  SCOPED_TRACE(c.type);
  LayerRig rig(c);
  for (Tensor& t : rig.inputs) round_tensor(t);
  const Outcome bf16 = run(rig, Precision::bf16), fp32 = run(rig, Precision::fp32);
  for (Tensor& t : rig.inputs) magnitudes(t);
  for (Tensor& t : rig.params) magnitudes(t);
  magnitudes(rig.weights_r);
  const Outcome magnitude = run(rig, Precision::fp32);
  const double slack = 4.0 * k * std::ldexp(1.0, -24);
  const size_t inputs = rig.inputs.size();
  bool differs = false;
  for (size_t r = 0; r < bf16.values.size(); ++r) {
    const double factor = r == 0 ? kU + kU * kU : r <= inputs ? 2 * kU + kU * kU : kU;
    for (size_t i = 0; i < bf16.values[r].size(); ++i) {
      const double got = bf16.values[r][i], want = fp32.values[r][i], a = magnitude.values[r][i];
      const double bound = (factor + slack) * a + (r == 0 ? kU * std::fabs(want) : 0.0);
      EXPECT_LE(std::fabs(got - want), bound) << "result " << r << " element " << i;
      differs = differs || got != want;
    }
  }
  EXPECT_TRUE(differs) << "bf16 gave fp32's results exactly: nothing was rounded";
}

TEST(Bf16, LinearWithinTheFormatsBounds) {
  expect_within_bf16_bounds({"linear", {{"out_features", "16"}}, {{4, 64, 1, 1}}}, 64);
}

TEST(Bf16, ConvolutionWithinTheFormatsBounds) {
  // k: the most terms in one sum: 3 x 3 x 8 for the output and input gradient, 2 x 8 x 8 for dW.
  expect_within_bf16_bounds({"conv2d", {{"out_channels", "6"}, {"kernel", "3"}, {"padding", "1"}}, {{2, 8, 8, 8}}},
                            128);
}

}  // namespace
}  // namespace burstpool::testing
