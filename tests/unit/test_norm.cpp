#include "gradcheck.hpp"

namespace burstpool::testing {

TEST(BatchNorm2d, GradientsTraining) { check_layer_gradients({"batchnorm2d", {}, {{3, 2, 3, 3}}}); }
TEST(BatchNorm2d, GradientsTrainingOnFeatures) { check_layer_gradients({"batchnorm2d", {}, {{5, 4, 1, 1}}}); }
TEST(BatchNorm2d, GradientsTrainingBatchOne) { check_layer_gradients({"batchnorm2d", {}, {{1, 2, 3, 3}}}); }
TEST(BatchNorm2d, GradientsEval) { check_layer_gradients({"batchnorm2d", {}, {{2, 3, 2, 2}}, Values::smooth, false}); }

TEST(BatchNorm2d, TrainingNormalisesAndUpdatesRunningStats) {
  LayerRig rig({"batchnorm2d", {}, {{4, 1, 1, 1}}});
  const float x[4] = {1, 2, 3, 6};
  std::copy(x, x + 4, rig.inputs[0].data());
  rig.params[0].fill(1.0f);
  rig.params[1].fill(0.0f);
  rig.state[0].fill(0.0f);
  rig.state[1].fill(1.0f);
  std::vector<const Tensor*> in{&rig.inputs[0]};
  rig.layer->forward(in, rig.out, rig.ctx);
  const double mean = 3.0, var = (4 + 1 + 0 + 9) / 4.0;
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(rig.out.data()[i], (x[i] - mean) / std::sqrt(var + 1e-5), 1e-5);
  EXPECT_NEAR(rig.state[0].data()[0], 0.1 * mean, 1e-6);
  EXPECT_NEAR(rig.state[1].data()[0], 0.9 + 0.1 * var * 4 / 3, 1e-6);  // unbiased variance, like PyTorch
}

// The group-sum hook sees [sum x | sum x^2 | count]; a hook that doubles the
// sums (as if a second rank held identical samples) leaves the output unchanged.
TEST(BatchNorm2d, GroupSumHookIsUsed) {
  LayerRig plain({"batchnorm2d", {}, {{3, 2, 2, 2}}});
  LayerRig twin({"batchnorm2d", {}, {{3, 2, 2, 2}}});
  int calls = 0;
  twin.ctx.sum_over_group = [&](double* v, size_t n) {
    ++calls;
    for (size_t i = 0; i < n; ++i) v[i] *= 2;
  };
  plain.loss();
  twin.loss();
  EXPECT_EQ(calls, 1);
  for (size_t i = 0; i < plain.out.size(); ++i) EXPECT_NEAR(plain.out.data()[i], twin.out.data()[i], 1e-5);
}

}  // namespace burstpool::testing
