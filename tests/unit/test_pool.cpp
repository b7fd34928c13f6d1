#include "gradcheck.hpp"

namespace burstpool::testing {

using Attrs = std::vector<std::pair<std::string, std::string>>;

TEST(MaxPool2d, Gradients2x2) {
  check_layer_gradients({"maxpool2d", Attrs{{"kernel", "2"}}, {{2, 2, 4, 4}}, Values::distinct});
}
TEST(MaxPool2d, Gradients3x3Stride2PaddingOddSize) {
  check_layer_gradients(
      {"maxpool2d", Attrs{{"kernel", "3"}, {"stride", "2"}, {"padding", "1"}}, {{1, 3, 7, 5}}, Values::distinct});
}
TEST(MaxPool2d, GradientsOverlappingWindowsBatchOne) {
  check_layer_gradients({"maxpool2d", Attrs{{"kernel", "3"}, {"stride", "1"}}, {{1, 1, 5, 5}}, Values::distinct});
}
TEST(MaxPool2d, ForwardPicksMaximum) {
  LayerRig rig({"maxpool2d", Attrs{{"kernel", "2"}}, {{1, 1, 2, 4}}});
  const float x[8] = {1, 5, -2, -3, 4, 2, -1, -9};
  std::copy(x, x + 8, rig.inputs[0].data());
  rig.loss();
  EXPECT_EQ(rig.out.data()[0], 5);
  EXPECT_EQ(rig.out.data()[1], -1);
}

TEST(AvgPool2d, Gradients2x2) { check_layer_gradients({"avgpool2d", Attrs{{"kernel", "2"}}, {{2, 2, 4, 6}}}); }
TEST(AvgPool2d, Gradients3x3Stride2PaddingOddSize) {
  check_layer_gradients({"avgpool2d", Attrs{{"kernel", "3"}, {"stride", "2"}, {"padding", "1"}}, {{2, 1, 5, 7}}});
}
TEST(AvgPool2d, GradientsOverlappingBatchOne) {
  check_layer_gradients({"avgpool2d", Attrs{{"kernel", "2"}, {"stride", "1"}}, {{1, 2, 3, 3}}});
}
TEST(AvgPool2d, PaddingCountsAsZero) {
  LayerRig rig({"avgpool2d", Attrs{{"kernel", "3"}, {"stride", "1"}, {"padding", "1"}}, {{1, 1, 2, 2}}});
  rig.inputs[0].fill(9.0f);
  rig.loss();
  EXPECT_FLOAT_EQ(rig.out.data()[0], 4.0f);  // 4 real cells of 9 in a 3x3 window
}

TEST(GlobalAvgPool, Gradients) { check_layer_gradients({"global_avgpool", {}, {{3, 4, 3, 5}}}); }
TEST(GlobalAvgPool, GradientsBatchOne) { check_layer_gradients({"global_avgpool", {}, {{1, 2, 1, 1}}}); }

}  // namespace burstpool::testing
