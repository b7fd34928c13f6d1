#include <gtest/gtest.h>

#include <cmath>

#include "burstpool/model_io.hpp"
#include "burstpool/optimizer.hpp"

namespace burstpool {
namespace {

ModelSpec tiny() {
  return parse_model_ini(
      "[data]\ntype = input\nshape = 2\n[fc]\ntype = linear\ninputs = data\nout_features = 2\nbias = false\n"
      "[loss]\ntype = softmax_cross_entropy\ninputs = fc\n",
      "tiny.ini");
}

// Two steps by hand with PyTorch's rule: g = grad + wd w; v = mu v + g; w -= lr (nesterov ? g + mu v : v).
void check_two_steps(bool nesterov) {
  Model m(tiny(), 1, 1);
  const float lr = 0.1f, mu = 0.9f, wd = 0.01f;
  Sgd sgd(m, {mu, nesterov, wd});
  std::vector<double> w(m.params().data(), m.params().data() + 4), v(4, 0.0);
  const float grads[2][4] = {{1, -2, 0.5f, 0}, {0.25f, 1, -1, 3}};
  for (const auto& g : grads) {
    std::copy(g, g + 4, m.grads().data());
    sgd.step(lr);
    for (int i = 0; i < 4; ++i) {
      double gi = g[i] + wd * w[i];
      v[i] = mu * v[i] + gi;
      w[i] -= lr * (nesterov ? gi + mu * v[i] : v[i]);
    }
  }
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(m.params().data()[i], w[i], 1e-6) << i;
}

TEST(Sgd, MomentumMatchesHandComputation) { check_two_steps(false); }
TEST(Sgd, NesterovMatchesHandComputation) { check_two_steps(true); }

TEST(LrSchedule, Constant) {
  LrSchedule s;
  s.base_lr = 0.5f;
  EXPECT_FLOAT_EQ(s.at(0), 0.5f);
  EXPECT_FLOAT_EQ(s.at(1000), 0.5f);
}

TEST(LrSchedule, StepDecay) {
  LrSchedule s;
  s.kind = LrSchedule::Kind::step;
  s.base_lr = 1.0f;
  s.step_size = 10;
  s.gamma = 0.5f;
  EXPECT_FLOAT_EQ(s.at(9), 1.0f);
  EXPECT_FLOAT_EQ(s.at(10), 0.5f);
  EXPECT_FLOAT_EQ(s.at(25), 0.25f);
}

TEST(LrSchedule, CosineWithWarmup) {
  LrSchedule s;
  s.kind = LrSchedule::Kind::cosine;
  s.base_lr = 1.0f;
  s.min_lr = 0.1f;
  s.warmup_steps = 4;
  s.total_steps = 104;
  EXPECT_FLOAT_EQ(s.at(0), 0.25f);
  EXPECT_FLOAT_EQ(s.at(3), 1.0f);
  EXPECT_NEAR(s.at(4), 1.0f, 1e-6);
  EXPECT_NEAR(s.at(54), 0.55f, 1e-6);  // halfway: (1 + 0.1) / 2
  EXPECT_NEAR(s.at(104), 0.1f, 1e-6);
}

}  // namespace
}  // namespace burstpool
