// plan = auto's choice between the planner's plan and data parallel, and the
// simulated figures it weighs, against hand-worked values.
#include <gtest/gtest.h>

#include "burstpool/auto_plan.hpp"
#include "burstpool/error.hpp"
#include "burstpool/profile.hpp"
#include "burstpool/simulator.hpp"

namespace burstpool {
namespace {

Simulation step(double iteration_s, std::vector<double> idle_s) {
  Simulation s;
  s.iteration_s = iteration_s;
  s.idle_s = std::move(idle_s);
  for (double idle : s.idle_s) s.busy_s.push_back(iteration_s - idle);
  s.core_busy_s = s.busy_s;  // a core per rank
  return s;
}

// plan = auto measures the network up to the largest sum: a bucket, all the
// parameters where they fit one, or a layer larger than a bucket.
TEST(AutoPlan, LargestSumIsABucketOrALayerLargerThanOne) {
  ModelProfile p;
  for (double bytes : {1e6, 8e6, 64e6, 0.0}) p.layers.push_back({"l", "linear", 0, bytes, {}, {}});
  EXPECT_DOUBLE_EQ(largest_sum_bytes(p, 25e6), 64e6);  // fc7-like: one layer past the bucket
  EXPECT_DOUBLE_EQ(largest_sum_bytes(p, 100e6), 73e6);  // every parameter in one bucket
  p.layers.resize(2);
  EXPECT_DOUBLE_EQ(largest_sum_bytes(p, 4e6), 8e6);
  EXPECT_DOUBLE_EQ(largest_sum_bytes(p, 5e6), 8e6);
  p.layers.pop_back();
  EXPECT_DOUBLE_EQ(largest_sum_bytes(p, 25e6), 1e6);
}

TEST(AutoPlan, IdleShareIsTheRanksMeanShareOfTheStep) {
  EXPECT_NEAR(idle_share(step(0.010, {0.002, 0.006})), (0.2 + 0.6) / 2, 1e-12);
  EXPECT_EQ(idle_share(step(0.010, {0, 0})), 0);
}

TEST(AutoPlan, TheClusterBoundIsSpeedAgainstDataParallelPlusFreeCoreShare) {
  const Simulation dp = step(0.012, {0.0012, 0.0012});  // idle 10%
  const Simulation plan = step(0.010, {0.002, 0.006});  // idle 40%, 1.2x data parallel's speed
  EXPECT_NEAR(cluster_throughput_bound(plan, dp), 1.2 + 0.4, 1e-12);
  EXPECT_NEAR(cluster_throughput_bound(dp, dp), 1.0 + 0.1, 1e-12);
  EXPECT_THROW(cluster_throughput_bound(step(0, {}), dp), Error);
  // Four ranks on two cores, ranks 2 and 3 idle beside ranks 0 and 1 on
  // their cores: the ranks idle 45% of the step on average, the cores 10%.
  Simulation shared = step(0.010, {0.001, 0.001, 0.008, 0.008});
  shared.core_busy_s = {0.009, 0.009};
  EXPECT_NEAR(cluster_throughput_bound(shared, dp), 1.2 + 0.1, 1e-12);
}

TEST(AutoPlan, WithoutABackgroundThePlanMustBeFasterByTheMargin) {
  AutoCandidates c;
  c.data_parallel_step_s = 0.010;
  c.plan_step_s = 0.0089;  // 11% faster: kept
  EXPECT_EQ(data_parallel_instead(c, false, 0.1), "");
  c.plan_step_s = 0.0095;  // 5% faster: within the predictions' error
  const std::string why = data_parallel_instead(c, false, 0.1);
  EXPECT_NE(why.find("not predicted at least 10% faster"), std::string::npos) << why;
  EXPECT_NE(why.find("no [background] job"), std::string::npos) << why;
  // Rank time freed counts for nothing without a background, however much.
  c.plan_cluster = 5, c.data_parallel_cluster = 1;
  EXPECT_NE(data_parallel_instead(c, false, 0.1), "");
}

TEST(AutoPlan, WithABackgroundThePlanMustGiveMoreClusterThroughputByTheMargin) {
  AutoCandidates c;
  c.data_parallel_step_s = 0.010;
  c.plan_step_s = 0.012;  // slower than data parallel, but frees much rank time
  c.plan_cluster = 1.6, c.data_parallel_cluster = 1.1;
  EXPECT_EQ(data_parallel_instead(c, true, 0.1), "");
  // LeNet-5 at global batch 128 on 1 Gbit/s links (the shaped study, a round):
  // plan 5.30 ms idle 36.7%, data parallel 5.40 ms idle 32.6%.
  c.plan_cluster = 5.40 / 5.30 + 0.367, c.data_parallel_cluster = 1 + 0.326;
  const std::string why = data_parallel_instead(c, true, 0.1);
  EXPECT_NE(why.find("1.39x"), std::string::npos) << why;
  EXPECT_NE(why.find("1.33x"), std::string::npos) << why;
  EXPECT_NE(why.find("not at least 10% more"), std::string::npos) << why;
  // With no margin asked, the plan's small predicted lead is enough.
  EXPECT_EQ(data_parallel_instead(c, true, 0.0), "");
}

}  // namespace
}  // namespace burstpool
