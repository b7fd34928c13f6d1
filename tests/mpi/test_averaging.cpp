// Model averaging across ranks: SMA's average model is the same on every rank
// after every synchronisation, and shadow averaging brings diverged models
// together.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <mutex>
#include <thread>
#include <vector>

#include "burstpool/sma.hpp"
#include "shadow.hpp"

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
  std::mutex lock;
  ShadowAverager shadow(MPI_COMM_WORLD, params.data(), n, lock, 0.0);
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
// snapshot and its average are kept (w = w - snapshot + average).
TEST(Averaging, ShadowKeepsLocalProgressMadeDuringARound) {
  const int rank = rank_of(), n = 64;
  std::vector<float> params(n, static_cast<float>(rank));
  std::mutex lock;
  ShadowAverager shadow(MPI_COMM_WORLD, params.data(), n, lock, 0.0);
  shadow.start();
  for (int step = 0; step < 200; ++step) {  // a "trainer": every step adds 0.001 to every parameter
    std::lock_guard<std::mutex> guard(lock);
    for (float& p : params) p += 0.001f;
  }
  shadow.finish();
  // The average of the starting values is (size-1)/2; each rank added 0.2 in total, and averaging keeps the mean.
  std::vector<float> sum(params);
  MPI_Allreduce(MPI_IN_PLACE, sum.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const int size = size_of();
  EXPECT_NEAR(sum[0] / size, (size - 1) / 2.0 + 0.2, 1e-3);
}

}  // namespace
}  // namespace burstpool
