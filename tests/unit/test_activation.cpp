#include "gradcheck.hpp"

namespace burstpool::testing {

using Attrs = std::vector<std::pair<std::string, std::string>>;

TEST(Relu, Gradients) { check_layer_gradients({"relu", {}, {{3, 2, 3, 3}}, Values::distinct}); }
TEST(Relu, GradientsBatchOne) { check_layer_gradients({"relu", {}, {{1, 5, 1, 1}}, Values::distinct}); }

TEST(Flatten, Gradients) { check_layer_gradients({"flatten", {}, {{2, 3, 2, 2}}}); }
TEST(Flatten, GradientsBatchOne) { check_layer_gradients({"flatten", {}, {{1, 2, 3, 1}}}); }
TEST(Flatten, Shape) {
  LayerRig rig({"flatten", {}, {{2, 3, 4, 5}}});
  EXPECT_EQ(rig.out.shape(), (Shape{2, 60, 1, 1}));
}

TEST(Dropout, GradientsTraining) { check_layer_gradients({"dropout", Attrs{{"p", "0.4"}}, {{3, 2, 4, 4}}}); }
TEST(Dropout, GradientsTrainingBatchOne) { check_layer_gradients({"dropout", Attrs{{"p", "0.5"}}, {{1, 7, 1, 1}}}); }
TEST(Dropout, GradientsEvalIsIdentity) {
  check_layer_gradients({"dropout", Attrs{{"p", "0.4"}}, {{2, 3, 1, 1}}, Values::smooth, false});
}

// Inverted dropout: kept elements are scaled by 1/(1-p), about p of them dropped.
TEST(Dropout, DropsAboutPAndRescales) {
  LayerRig rig({"dropout", Attrs{{"p", "0.25"}}, {{8, 16, 8, 8}}});
  rig.inputs[0].fill(1.0f);
  rig.loss();
  size_t dropped = 0;
  for (size_t i = 0; i < rig.out.size(); ++i) {
    float y = rig.out.data()[i];
    ASSERT_TRUE(y == 0.0f || std::fabs(y - 1.0f / 0.75f) < 1e-6f) << y;
    dropped += y == 0.0f;
  }
  EXPECT_NEAR(static_cast<double>(dropped) / rig.out.size(), 0.25, 0.02);
}

// The mask of a sample depends on its global index, not its position in the
// local batch: a rank holding samples 3.. gets the same mask for them.
TEST(Dropout, MaskFollowsGlobalSampleIndex) {
  LayerRig whole({"dropout", Attrs{{"p", "0.5"}}, {{4, 3, 2, 2}}});
  LayerRig tail({"dropout", Attrs{{"p", "0.5"}}, {{1, 3, 2, 2}}});
  whole.inputs[0].fill(1.0f);
  tail.inputs[0].fill(1.0f);
  tail.ctx.sample_offset = 3;
  whole.loss();
  tail.loss();
  for (size_t e = 0; e < 12; ++e) EXPECT_EQ(tail.out.data()[e], whole.out.data()[36 + e]);
}

TEST(Dropout, RejectsPOutOfRange) { EXPECT_THROW(LayerRig({"dropout", Attrs{{"p", "1"}}, {{1, 1, 1, 1}}}), Error); }

}  // namespace burstpool::testing
