// The learner-count auto-tuner's decisions (CROSSBOW's rule, docs/learners.md).
#include <gtest/gtest.h>

#include "sync/learners.hpp"

namespace burstpool {
namespace {

TEST(AutoTune, AddsWhileThroughputGrowsThenBacksOffOnce) {
  // 1 learner: 100 samples/s -> try 2; 2: 150 (> 110) -> try 3; 3: 160 (< 165) -> back to 2, done.
  TuningStep t = next_learner_count(1, 100, 0, 0.1, 8);
  EXPECT_EQ(t.learners, 2);
  EXPECT_FALSE(t.done);
  t = next_learner_count(2, 150, t.best, 0.1, 8);
  EXPECT_EQ(t.learners, 3);
  EXPECT_FALSE(t.done);
  t = next_learner_count(3, 160, t.best, 0.1, 8);
  EXPECT_EQ(t.learners, 2);
  EXPECT_TRUE(t.done);
}

TEST(AutoTune, NoGainKeepsOneLearner) {
  TuningStep t = next_learner_count(1, 100, 0, 0.1, 8);
  t = next_learner_count(2, 105, t.best, 0.1, 8);  // +5% is not more than 10%
  EXPECT_EQ(t.learners, 1);
  EXPECT_TRUE(t.done);
}

TEST(AutoTune, StopsAtTheLimit) {
  TuningStep t = next_learner_count(1, 100, 0, 0.1, 2);
  t = next_learner_count(2, 200, t.best, 0.1, 2);
  EXPECT_EQ(t.learners, 2);
  EXPECT_TRUE(t.done);
}

}  // namespace
}  // namespace burstpool
