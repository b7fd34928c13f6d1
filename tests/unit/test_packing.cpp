// The cluster-throughput figure and the packing model's fit, on hand-made numbers.
#include <gtest/gtest.h>

#include <cstdio>
#include <tuple>

#include "burstpool/cluster_throughput.hpp"
#include "burstpool/error.hpp"
#include "burstpool/packing.hpp"

namespace burstpool {
namespace {

TEST(ClusterThroughput, AgainstDataParallelChargesASlowPlan) {
  // Foreground: 1000 samples/s data parallel alone, 800 under its burst plan
  // alone, 720 under the plan beside the background; background 600 of 1500.
  const double vs_own = cluster_throughput(720, 800, 600, 1500);
  const double vs_dp = cluster_throughput(720, 1000, 600, 1500);
  EXPECT_DOUBLE_EQ(vs_own, 0.9 + 0.4);
  EXPECT_DOUBLE_EQ(vs_dp, 0.72 + 0.4);
  // A plan much slower than data parallel loses even with its background.
  EXPECT_DOUBLE_EQ(cluster_throughput(500, 1000, 300, 1500), 0.5 + 0.2);
  EXPECT_LT(cluster_throughput(500, 1000, 300, 1500), 1.0);
  // Nothing measured: that term is 0, not a division by zero.
  EXPECT_DOUBLE_EQ(cluster_throughput(500, 0, 300, 1500), 0.2);
  EXPECT_DOUBLE_EQ(cluster_throughput(500, 1000, 300, 0), 0.5);
}

TEST(PackingFit, CpuFitsABaseShareAndIdleEfficiencyByLeastSquares) {
  // Three runs off a line: simple linear regression by hand,
  // slope = sum((x - mean x)(y - mean y)) / sum((x - mean x)^2), base = mean y - slope mean x.
  const std::vector<PackingSample> s = {{"a", 0.5, 0.3, 0.36, 1.05}, {"b", 0.25, 0.1, 0.18, 1.07},
                                        {"c", 0.0, 0.2, 0.08, 1.09}};
  const PackingModel m = fit_packing(s, "cpu");
  const double mx = 0.25, my = (0.36 + 0.18 + 0.08) / 3;
  const double slope = (0.25 * (0.36 - my) + 0 * (0.18 - my) + -0.25 * (0.08 - my)) / (2 * 0.0625);
  EXPECT_NEAR(m.idle_efficiency, slope, 1e-12);
  EXPECT_NEAR(m.base_share, my - slope * mx, 1e-12);
  EXPECT_EQ(m.busy_efficiency, 0) << "a CPU rank's busy core leaves the background nothing";
  EXPECT_NEAR(m.foreground_slowdown, (1.05 + 1.07 + 1.09) / 3, 1e-12);
  EXPECT_NE(m.calibration.find("a, b, c"), std::string::npos);
  EXPECT_NEAR(background_share(m, 0.5, 0.9), m.base_share + m.idle_efficiency * 0.5, 1e-12);
  EXPECT_EQ(background_share(m, 5.0, 0), 1.0) << "clamped";
}

TEST(PackingFit, GpuRecoversAllThreeCoefficients) {
  // Made from share = 0.02 + 0.8 idle + 0.3 slack.
  std::vector<PackingSample> s;
  for (auto [i, k] : {std::pair{0.1, 0.5}, {0.4, 0.2}, {0.0, 0.6}, {0.3, 0.3}, {0.2, 0.0}})
    s.push_back({"x", i, k, 0.02 + 0.8 * i + 0.3 * k, 1.1});
  const PackingModel m = fit_packing(s, "cuda");
  EXPECT_NEAR(m.base_share, 0.02, 1e-9);
  EXPECT_NEAR(m.idle_efficiency, 0.8, 1e-9);
  EXPECT_NEAR(m.busy_efficiency, 0.3, 1e-9);
}

TEST(PackingFit, CoefficientsStayNonNegative) {
  // The background got less where the foreground idled more: the
  // unconstrained slope is negative, so it is held at 0 and the base share is
  // the mean.
  const PackingModel m = fit_packing({{"a", 0.1, 0, 0.3, 1}, {"b", 0.5, 0, 0.1, 1}}, "cpu");
  EXPECT_EQ(m.idle_efficiency, 0);
  EXPECT_NEAR(m.base_share, 0.2, 1e-12);
  // One data-parallel run (no idle time) fixes only the base share.
  const PackingModel dp = fit_packing({{"dp", 0.0, 0.2, 0.05, 1.1}}, "cpu");
  EXPECT_NEAR(dp.base_share, 0.05, 1e-12);
  EXPECT_EQ(dp.idle_efficiency, 0);
}

TEST(PackingFit, UsableIdleShareCountsEachStretchLessItsCost) {
  // Two ranks, a 10 ms step: rank 0 idles 0.5 ms and 4 ms, rank 1 6 ms in one stretch.
  const std::vector<std::vector<double>> gaps = {{0.5e-3, 4e-3}, {6e-3}};
  EXPECT_NEAR(usable_idle_share(gaps, 10e-3, 0), (4.5 + 6) / 10 / 2, 1e-12);
  EXPECT_NEAR(usable_idle_share(gaps, 10e-3, 1e-3), (0 + 3 + 5) / 10.0 / 2, 1e-12);
  EXPECT_EQ(usable_idle_share(gaps, 10e-3, 7e-3), 0);
  EXPECT_EQ(usable_idle_share({}, 10e-3, 0), 0);
  EXPECT_EQ(usable_idle_share(gaps, 0, 0), 0);
}

TEST(PackingFit, FindsTheGapCostWhereTheSamplesHaveTheirStretches) {
  // Made from share = 0.03 + 0.9 x usable idle share with stretches less 1.5 ms:
  // short waits (LeNet-5 on a slow link) give a background little, long ones
  // nearly all; no single efficiency without a cost fits both.
  std::vector<PackingSample> s;
  for (auto [gap, count, step] : {std::tuple{0.8e-3, 3, 4e-3}, {2e-3, 2, 6e-3}, {30e-3, 1, 100e-3},
                                  {300e-3, 1, 400e-3}, {5e-3, 4, 50e-3}}) {
    PackingSample p;
    p.label = "x";
    p.step_s = step;
    p.idle_gaps_s = {std::vector<double>(count, gap), std::vector<double>(count, gap)};
    p.idle_share = count * gap / step;
    p.background_share = 0.03 + 0.9 * usable_idle_share(p.idle_gaps_s, step, 1.5e-3);
    s.push_back(p);
  }
  const PackingModel m = fit_packing(s, "cpu");
  EXPECT_NEAR(m.gap_cost_s, 1.5e-3, 1e-9);
  EXPECT_NEAR(m.base_share, 0.03, 1e-9);
  EXPECT_NEAR(m.idle_efficiency, 0.9, 1e-9);
  EXPECT_NE(m.calibration.find("less 1.50 ms"), std::string::npos) << m.calibration;
  // One sample without its stretches: the plain idle share, no cost.
  s.push_back({"no stretches", 0.2, 0, 0.2, 1});
  EXPECT_EQ(fit_packing(s, "cpu").gap_cost_s, 0);
  // The cost and the stretches survive the file.
  s.pop_back();
  const std::string path = testing::TempDir() + "packing_gaps.json";
  save_packing(m, s, path);
  EXPECT_NEAR(load_packing(path).gap_cost_s, 1.5e-3, 1e-15);
  const std::vector<PackingSample> back = load_packing_samples(path);
  ASSERT_EQ(back.size(), s.size());
  EXPECT_EQ(back[0].idle_gaps_s, s[0].idle_gaps_s);
  EXPECT_NEAR(fit_packing(back, "cpu").gap_cost_s, 1.5e-3, 1e-9);
}

TEST(PackingFit, RefusesNoSamples) { EXPECT_THROW(fit_packing({}, "cpu"), Error); }

TEST(PackingFile, RoundTripsAndNamesBadKeys) {
  const std::string path = testing::TempDir() + "packing.json";
  const std::vector<PackingSample> s = {{"a", 0.5, 0, 0.35, 1.1}, {"b", 0.1, 0, 0.15, 1.1}};
  const PackingModel m = fit_packing(s, "cpu");
  save_packing(m, s, path);
  const PackingModel back = load_packing(path);
  EXPECT_EQ(back.device, "cpu");
  EXPECT_NEAR(back.base_share, 0.1, 1e-12);
  EXPECT_NEAR(back.idle_efficiency, 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(back.foreground_slowdown, 1.1);
  EXPECT_EQ(load_packing_samples(path).size(), 2u);
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("{\"format\": \"burstpool-packing\", \"device\": \"cpu\", \"base_share\": 0, \"idle_efficiency\": \"x\"}", f);
  std::fclose(f);
  try {
    load_packing(path);
    FAIL() << "a string efficiency was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"idle_efficiency\" must be a finite number"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
  // A file from before the gap cost loads with none; a negative one is refused.
  f = std::fopen(path.c_str(), "w");
  std::fputs("{\"format\": \"burstpool-packing\", \"device\": \"cpu\", \"base_share\": 0.1, \"idle_efficiency\": 0.5, "
             "\"busy_efficiency\": 0, \"foreground_slowdown\": 1.1}", f);
  std::fclose(f);
  EXPECT_EQ(load_packing(path).gap_cost_s, 0);
  f = std::fopen(path.c_str(), "w");
  std::fputs("{\"format\": \"burstpool-packing\", \"device\": \"cpu\", \"base_share\": 0.1, \"idle_efficiency\": 0.5, "
             "\"busy_efficiency\": 0, \"foreground_slowdown\": 1.1, \"gap_cost_s\": -1}", f);
  std::fclose(f);
  EXPECT_THROW(load_packing(path), Error);
}

}  // namespace
}  // namespace burstpool
