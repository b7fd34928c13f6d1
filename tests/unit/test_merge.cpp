#include "gradcheck.hpp"

namespace burstpool::testing {

TEST(Add, GradientsTwoInputs) { check_layer_gradients({"add", {}, {{2, 3, 2, 2}, {2, 3, 2, 2}}}); }
TEST(Add, GradientsThreeInputsBatchOne) {
  check_layer_gradients({"add", {}, {{1, 2, 3, 1}, {1, 2, 3, 1}, {1, 2, 3, 1}}});
}
TEST(Add, RejectsShapeMismatch) { EXPECT_THROW(LayerRig({"add", {}, {{1, 2, 2, 2}, {1, 3, 2, 2}}}), Error); }

TEST(Concat, GradientsChannels) { check_layer_gradients({"concat", {}, {{2, 1, 3, 3}, {2, 3, 3, 3}, {2, 2, 3, 3}}}); }
TEST(Concat, GradientsBatchOne) { check_layer_gradients({"concat", {}, {{1, 2, 1, 1}, {1, 1, 1, 1}}}); }
TEST(Concat, LayoutIsChannelJoin) {
  LayerRig rig({"concat", {}, {{2, 1, 1, 2}, {2, 2, 1, 2}}});
  for (int i = 0; i < 4; ++i) rig.inputs[0].data()[i] = static_cast<float>(i);
  for (int i = 0; i < 8; ++i) rig.inputs[1].data()[i] = static_cast<float>(10 + i);
  rig.loss();
  const float expected[12] = {0, 1, 10, 11, 12, 13, 2, 3, 14, 15, 16, 17};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(rig.out.data()[i], expected[i]);
}
TEST(Concat, RejectsSpatialMismatch) { EXPECT_THROW(LayerRig({"concat", {}, {{1, 2, 2, 2}, {1, 3, 2, 3}}}), Error); }

}  // namespace burstpool::testing
