// Model averaging across ranks: SMA's average model is the same on every rank
// after every synchronisation, and shadow averaging brings diverged models
// together.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "burstpool/device_model.hpp"
#include "burstpool/error.hpp"
#include "burstpool/model.hpp"
#include "burstpool/model_io.hpp"
#include "burstpool/sma.hpp"
#include "sync/shadow.hpp"

namespace burstpool {
namespace {

int rank_of() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int size_of() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}
// Whether `v` holds bitwise the same values on every rank.
bool same_everywhere(const std::vector<float>& v) {
  std::vector<float> lo(v), hi(v);
  MPI_Allreduce(MPI_IN_PLACE, lo.data(), static_cast<int>(v.size()), MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, hi.data(), static_cast<int>(v.size()), MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

// Two learners per rank with rank- and learner-dependent gradients: after
// every iteration (corrections summed on the rank, one allreduce) z agrees
// bitwise on all ranks, while the learners themselves differ.
TEST(Averaging, SmaAverageModelIsIdenticalOnEveryRank) {
  const int rank = rank_of(), n = 257;
  const SmaOptions o{0.2f, 0.9f, 0.9f, 1e-4f};
  std::vector<float> init(n);
  for (int i = 0; i < n; ++i) init[i] = std::sin(0.1f * i);
  AverageModel z(init.data(), n, o.average_momentum);
  std::vector<std::vector<float>> w(2, init), u(2, std::vector<float>(n, 0.0f));
  for (int step = 0; step < 6; ++step) {
    std::vector<float> delta(n, 0.0f);
    for (int j = 0; j < 2; ++j) {
      std::vector<float> g(n);
      for (int i = 0; i < n; ++i) g[i] = std::cos(0.37f * i * (rank + 1) + j + step);
      sma_learner_step(o, w[j].data(), u[j].data(), g.data(), z.data(), 0.05f, delta.data(), n);
    }
    MPI_Allreduce(MPI_IN_PLACE, delta.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    z.step(delta.data());
    EXPECT_TRUE(same_everywhere(std::vector<float>(z.data(), z.data() + n))) << "after step " << step;
    if (size_of() > 1) EXPECT_FALSE(same_everywhere(w[0])) << "learners should differ across ranks";
  }
}

TEST(Averaging, ShadowBringsDivergedModelsTogether) {
  const int rank = rank_of(), size = size_of(), n = 1000;
  std::vector<float> params(n);
  for (int i = 0; i < n; ++i) params[i] = static_cast<float>(rank * 3 + 1) * std::sin(0.01f * i);  // diverged
  ShadowAverager shadow(MPI_COMM_WORLD, {host_replica(params.data(), n)}, n, 0.0);
  shadow.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  shadow.finish();
  EXPECT_GE(shadow.rounds(), 1);
  EXPECT_TRUE(same_everywhere(params)) << "models still differ after " << shadow.rounds() << " rounds";
  double mean_factor = 0;  // every model became the mean of the starting models
  for (int r = 0; r < size; ++r) mean_factor += (r * 3 + 1) / static_cast<double>(size);
  for (int i = 0; i < n; i += 97) EXPECT_NEAR(params[i], mean_factor * std::sin(0.01f * i), 1e-5);
}

// Training goes on while shadow averages: local changes made between a
// snapshot and its average are kept (w = w - snapshot + average), with the
// thread's work handed over at the ends of the trainer's steps.
TEST(Averaging, ShadowKeepsLocalProgressMadeDuringARound) {
  const int rank = rank_of(), n = 64;
  std::vector<float> params(n, static_cast<float>(rank));
  ShadowAverager shadow(MPI_COMM_WORLD, {host_replica(params.data(), n)}, n, 0.0);
  shadow.start();
  for (int step = 0; step < 200; ++step) {  // a "trainer": every step adds 0.001 to every parameter
    shadow.begin_step(0);
    for (float& p : params) p += 0.001f;
    shadow.end_step(0);
  }
  shadow.finish();
  // The average of the starting values is (size-1)/2; each rank added 0.2 in total, and averaging keeps the mean.
  std::vector<float> sum(params);
  MPI_Allreduce(MPI_IN_PLACE, sum.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const int size = size_of();
  EXPECT_NEAR(sum[0] / size, (size - 1) / 2.0 + 0.2, 1e-3);
}

// The hand-over, step by step: replicas a (4r) and b (4r + 2) are both in a
// step when a round starts (mean c = 2(ranks - 1) + 1). The round waits
// without touching them; a's step ends and the thread reads it, then waits
// for b. a starts another step at once, before b ends: the round's
// correction of a must wait for that step to end, and so must the round.
TEST(Averaging, ShadowHandsOverBetweenSteps) {
  const double c = 2.0 * (size_of() - 1) + 1, r4 = 4.0 * rank_of();
  std::vector<float> a(8, static_cast<float>(r4)), b(8, static_cast<float>(r4 + 2));
  ShadowAverager shadow(MPI_COMM_WORLD, {host_replica(a.data(), a.size()), host_replica(b.data(), b.size())},
                        a.size(), 0.0);
  shadow.begin_step(0);
  shadow.begin_step(1);
  std::thread round([&] { shadow.round(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(shadow.rounds(), 0) << "the round went on without the snapshots of replicas in a step";
  for (float& p : a) p += 1;  // the steps' own progress
  for (float& p : b) p += 1;
  shadow.end_step(0);    // a's snapshot: 4r + 1
  shadow.begin_step(0);  // waits for that copy, then a is in a step again
  shadow.end_step(1);    // b's snapshot: 4r + 3; the sums run, then the corrections wait for a
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(shadow.rounds(), 0) << "the round corrected a replica in a step";
  for (float p : a) EXPECT_EQ(p, static_cast<float>(r4 + 1)) << "a, in its step, was touched";
  for (float& p : a) p += 1;
  shadow.end_step(0);  // a = (4r + 2) + (c + 1) - (4r + 1), then b
  round.join();
  for (float p : a) EXPECT_NEAR(p, c + 2, 1e-5) << "a's correction, added after its step";
  for (float p : b) EXPECT_NEAR(p, c + 1, 1e-5) << "b's correction";
}

// Shadow on a device (the twin): replicas start diverged on each rank's
// device; a trainer adds 0.001 per step on the device while the thread
// averages. Averaging keeps the sum of the ranks' progress, one more round
// brings every rank to the mean, and the parameters cross to the host once
// per round (its snapshot), never per step; each correction goes up once.
TEST(Averaging, ShadowOnADeviceKeepsProgressAndMeetsAtTheMean) {
  const int rank = rank_of(), size = size_of();
  Model host(parse_model_ini("[data]\ntype = input\nshape = 40\n[fc]\ntype = linear\ninputs = data\n"
                             "out_features = 10\n[loss]\ntype = softmax_cross_entropy\ninputs = fc\n",
                             "shadow_twin.ini"),
             2, 7);
  TwinCounts counts;
  std::unique_ptr<DeviceModel> twin = make_twin_model(host, {false, &counts});
  const size_t n = host.param_count();
  std::vector<float> start(n), step(n, 0.001f), out(n);
  for (size_t i = 0; i < n; ++i) start[i] = static_cast<float>(rank * 3 + 1) * std::sin(0.01f * i);
  using B = DeviceModel::Buffer;
  twin->copy_in(B::parameters, -1, 0, start.data(), n);
  twin->copy_in(B::scratch_b, -1, 0, step.data(), n);
  ShadowAverager shadow(MPI_COMM_WORLD, {device_replica(*twin, n)}, n, 0.0);
  const TwinCounts before = counts;
  shadow.start();
  for (int k = 0; k < 200; ++k) {
    shadow.begin_step(0);
    twin->axpby(1.0f, B::scratch_b, 1.0f, B::parameters);
    shadow.end_step(0);
  }
  const int64_t rounds = shadow.finish() + 1;
  shadow.round();
  EXPECT_EQ(counts.parameter_copies - before.parameter_copies, static_cast<size_t>(rounds));
  EXPECT_EQ(counts.floats_in - before.floats_in, rounds * n) << "one correction up per round";
  twin->copy_out(B::parameters, -1, 0, out.data(), n);
  double mean_factor = 0;
  for (int r = 0; r < size; ++r) mean_factor += (r * 3 + 1) / static_cast<double>(size);
  for (size_t i = 0; i < n; i += 37) EXPECT_NEAR(out[i], mean_factor * std::sin(0.01f * i) + 0.2, 1e-3) << i;
}

// Rank r starts at 4r (mean c = 2(N-1)); before each of 4 rounds every rank
// adds `progress` to its model, and the round runs with no training beside it.
std::vector<float> run_rounds(ShadowRule rule, float progress, int rounds = 4) {
  std::vector<float> params(8, 4.0f * rank_of());
  ShadowAverager shadow(MPI_COMM_WORLD, {host_replica(params.data(), params.size())}, params.size(), 0.0, rule);
  for (int k = 0; k < rounds; ++k) {
    for (float& p : params) p += progress;
    shadow.round();
  }
  return params;
}

// Elastic averaging: with no training the centre stays at the mean c and each
// model's distance from it shrinks by (1 - alpha) a round: x = c + (4r - c) 0.75^4.
TEST(Averaging, ShadowElasticPullsModelsToTheCentre) {
  ShadowRule rule;
  rule.kind = ShadowRule::Kind::elastic;
  rule.alpha = 0.25f;
  const double c = 2.0 * (size_of() - 1), x = c + (4.0 * rank_of() - c) * std::pow(0.75, 4);
  for (float p : run_rounds(rule, 0.0f)) EXPECT_NEAR(p, x, 1e-5);
}

// With every rank adding 1 before a round, the centre moves too: worked out
// per round from x' = s - a (s - c), c' = c + a sum(s - c), s = x + 1, in double.
TEST(Averaging, ShadowElasticCentreFollowsTheModels) {
  ShadowRule rule;
  rule.kind = ShadowRule::Kind::elastic;
  rule.alpha = 0.25f;
  const int size = size_of(), rank = rank_of();
  double c = 2.0 * (size - 1), mine = 4.0 * rank;
  std::vector<double> all(size);
  for (int r = 0; r < size; ++r) all[r] = 4.0 * r;
  for (int k = 0; k < 4; ++k) {
    double pull = 0;
    for (double& x : all) {
      const double s = x + 1;
      pull += s - c;
      x = s - 0.25 * (s - c);
    }
    c += 0.25 * pull;
  }
  mine = all[rank];
  for (float p : run_rounds(rule, 1.0f)) EXPECT_NEAR(p, mine, 1e-4);
}

// Two replicas per rank (two trainers): rank r's start at 4r and 4r + 2, so
// the N = 2 x ranks replicas have mean c = 2(ranks - 1) + 1. Averaging puts
// every replica on c in one round; elastic averaging at alpha 0 (so 1 / N)
// pulls each replica to c by 1 - 1/N a round (the centre stays at c with no
// training).
TEST(Averaging, ShadowAveragesEveryReplicaOfEveryRank) {
  const double c = 2.0 * (size_of() - 1) + 1, n = 2.0 * size_of();
  for (ShadowRule::Kind kind : {ShadowRule::Kind::average, ShadowRule::Kind::elastic}) {
    std::vector<float> a(8, 4.0f * rank_of()), b(8, 4.0f * rank_of() + 2);
    ShadowRule rule;
    rule.kind = kind;
    rule.alpha = 0;
    ShadowAverager shadow(MPI_COMM_WORLD, {host_replica(a.data(), a.size()), host_replica(b.data(), b.size())},
                          a.size(), 0.0, rule);
    const int rounds = kind == ShadowRule::Kind::average ? 1 : 4;
    for (int k = 0; k < rounds; ++k) shadow.round();
    const double shrink = kind == ShadowRule::Kind::average ? 0.0 : std::pow(1 - 1 / n, 4);
    for (float p : a) EXPECT_NEAR(p, c + (4.0 * rank_of() - c) * shrink, 1e-5);
    for (float p : b) EXPECT_NEAR(p, c + (4.0 * rank_of() + 2 - c) * shrink, 1e-5);
  }
}

// The elastic rule's alpha: 0 means 1 / N; the models' mean and the centre
// move apart by the factor 1 - alpha (N + 1) a round, so from 2 / (N + 1) on
// the job is refused, naming its key (the old default 0.5 gave 1 - 1.5 =
// -0.5 on 2 ranks, fine, and 1 - 2.5 = -1.5 on 4, where every run diverged).
TEST(Averaging, ShadowElasticAlphaRefusedWhereItDiverges) {
  EXPECT_FLOAT_EQ(elastic_alpha(0, 4), 0.25f);
  EXPECT_FLOAT_EQ(elastic_alpha(0.5f, 2), 0.5f);
  EXPECT_FLOAT_EQ(elastic_alpha(0.39f, 4), 0.39f);
  for (float refused : {0.4f, 0.5f}) {
    try {
      elastic_alpha(refused, 4);
      ADD_FAILURE() << "alpha " << refused << " with 4 models not refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("[sync] shadow_alpha"), std::string::npos) << e.what();
    }
  }
}

// Block momentum: rank r adds r + 1 before each round, so every round's block
// gradient is mean(r + 1) = (N + 1)/2 =: g and, with no training during the
// round, every rank ends it on the global model. After 4 rounds at momentum m
// and block rate 1: c + g sum_k (1 - m^k)/(1 - m); at m = 0.5: c + 6.125 g.
TEST(Averaging, ShadowBlockMomentumFiltersTheBlockUpdate) {
  ShadowRule rule;
  rule.kind = ShadowRule::Kind::block_momentum;
  rule.block_momentum = 0.5f;
  rule.block_lr = 1.0f;
  const int size = size_of();
  std::vector<float> params(8, 4.0f * rank_of());
  ShadowAverager shadow(MPI_COMM_WORLD, {host_replica(params.data(), params.size())}, params.size(), 0.0, rule);
  for (int k = 0; k < 4; ++k) {
    for (float& p : params) p += static_cast<float>(rank_of() + 1);
    shadow.round();
  }
  const double expected = 2.0 * (size - 1) + 6.125 * (size + 1) / 2.0;
  for (float p : params) EXPECT_NEAR(p, expected, 1e-4);
  // Momentum 0 and block rate 1 is plain averaging: the mean of the starts plus the mean progress.
  rule.block_momentum = 0.0f;
  for (float p : run_rounds(rule, 1.0f, 1)) EXPECT_NEAR(p, 2.0 * (size - 1) + 1.0, 1e-5);
}

}  // namespace
}  // namespace burstpool
