#include <cmath>

#include "gradcheck.hpp"

namespace burstpool::testing {

TEST(SoftmaxCrossEntropy, Gradients) { check_layer_gradients({"softmax_cross_entropy", {}, {{4, 5, 1, 1}}}); }
TEST(SoftmaxCrossEntropy, GradientsBatchOne) { check_layer_gradients({"softmax_cross_entropy", {}, {{1, 3, 1, 1}}}); }

TEST(SoftmaxCrossEntropy, ValueMatchesHandComputation) {
  LayerRig rig({"softmax_cross_entropy", {}, {{2, 3, 1, 1}}});
  const float z[6] = {1, 2, 3, 0, 0, 0};
  std::copy(z, z + 6, rig.inputs[0].data());
  rig.labels = {2, 0};
  rig.ctx.labels = rig.labels.data();
  rig.loss();
  const double l0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0, l1 = std::log(3.0);
  EXPECT_NEAR(rig.out.data()[0], (l0 + l1) / 2, 1e-6);
}

TEST(SoftmaxCrossEntropy, StableForLargeLogits) {
  LayerRig rig({"softmax_cross_entropy", {}, {{1, 2, 1, 1}}});
  rig.inputs[0].data()[0] = 1000.0f;
  rig.inputs[0].data()[1] = -1000.0f;
  rig.labels = {1};
  rig.ctx.labels = rig.labels.data();
  rig.loss();
  EXPECT_NEAR(rig.out.data()[0], 2000.0, 1e-2);
}

TEST(SoftmaxCrossEntropy, RejectsLabelOutOfRange) {
  LayerRig rig({"softmax_cross_entropy", {}, {{1, 3, 1, 1}}});
  rig.labels = {3};
  rig.ctx.labels = rig.labels.data();
  EXPECT_THROW(rig.loss(), Error);
}

}  // namespace burstpool::testing
