#include "gradcheck.hpp"

namespace burstpool::testing {

TEST(Linear, GradientsWithBias) { check_layer_gradients({"linear", {{"out_features", "5"}}, {{3, 7, 1, 1}}}); }
TEST(Linear, GradientsWithoutBias) {
  check_layer_gradients({"linear", {{"out_features", "4"}, {"bias", "false"}}, {{2, 6, 1, 1}}});
}
TEST(Linear, GradientsBatchOne) { check_layer_gradients({"linear", {{"out_features", "3"}}, {{1, 5, 1, 1}}}); }
// A (N,C,H,W) input is read as N flat feature vectors: no explicit flatten needed.
TEST(Linear, GradientsFromImageInput) { check_layer_gradients({"linear", {{"out_features", "4"}}, {{2, 2, 3, 3}}}); }

TEST(Linear, ForwardMatchesHandComputation) {
  LayerRig rig({"linear", {{"out_features", "2"}}, {{1, 3, 1, 1}}});
  const float w[6] = {1, 2, 3, -1, 0, 1}, b[2] = {0.5f, -0.5f}, x[3] = {1, -1, 2};
  std::copy(w, w + 6, rig.params[0].data());
  std::copy(b, b + 2, rig.params[1].data());
  std::copy(x, x + 3, rig.inputs[0].data());
  rig.loss();
  EXPECT_FLOAT_EQ(rig.out.data()[0], 1 - 2 + 6 + 0.5f);
  EXPECT_FLOAT_EQ(rig.out.data()[1], -1 + 0 + 2 - 0.5f);
}

TEST(Linear, RejectsBadKeys) {
  EXPECT_THROW(check_layer_gradients({"linear", {{"out_features", "0"}}, {{1, 3, 1, 1}}}), Error);
  EXPECT_THROW(check_layer_gradients({"linear", {{"outfeatures", "3"}}, {{1, 3, 1, 1}}}), Error);
}

}  // namespace burstpool::testing
