// Multiplexing pieces that need no MPI: the foreground gate, wait sites and
// the thread-level check.
#include <gtest/gtest.h>
#include <mpi.h>
#include <sched.h>

#include <string>

#include "comm/wait.hpp"
#include "burstpool/background.hpp"
#include "burstpool/runtime.hpp"

namespace burstpool {
namespace {

TEST(ForegroundGate, OpenUntilBaselineThenFollowsTheAverageStep) {
  ForegroundGate gate(1.1, false);
  gate.step_finished(5.0);
  EXPECT_TRUE(gate.open()) << "no baseline yet: nothing to protect";
  ForegroundGate g(1.1, false);
  g.set_baseline(1.0);
  g.step_finished(1.05);
  EXPECT_TRUE(g.open());
  g.step_finished(2.0);  // average 0.875*1.05 + 0.125*2 = 1.169 > 1.1
  EXPECT_FALSE(g.open());
  for (int i = 0; i < 8; ++i) g.step_finished(1.0);  // recovers: 1.169 -> 1 + 0.169*0.875^8 = 1.058
  EXPECT_TRUE(g.open());
}

TEST(ForegroundGate, OnlyPausesInReductionsWhenAskedTo) {
  ForegroundGate cpu(1.1, false), gpu(1.1, true);
  for (ForegroundGate* g : {&cpu, &gpu}) {
    g->set_baseline(1.0);
    g->step_finished(1.0);
    g->in_allreduce().store(true);
  }
  EXPECT_TRUE(cpu.open());
  EXPECT_FALSE(gpu.open());
  gpu.in_allreduce().store(false);
  EXPECT_TRUE(gpu.open());
}

TEST(WaitSite, ExpectsTheShorterOfTheLastTwoWaits) {
  WaitSite site;
  EXPECT_EQ(site.expected(), 0.0);
  site.record(0.010);
  EXPECT_EQ(site.expected(), 0.0) << "one wait is not a pattern yet";
  site.record(0.012);
  EXPECT_DOUBLE_EQ(site.expected(), 0.010);
  site.record(0.500);  // an outlier does not make the next wait sleep long
  EXPECT_DOUBLE_EQ(site.expected(), 0.012);
}

TEST(BackgroundThread, IdleOnlyForCpuWorkUnlessTold) {
  EXPECT_TRUE(idle_background_thread("auto", "cpu"));
  EXPECT_FALSE(idle_background_thread("auto", "cuda"));
  EXPECT_FALSE(idle_background_thread("auto", "twin"));
  EXPECT_TRUE(idle_background_thread("idle", "cuda"));
  EXPECT_FALSE(idle_background_thread("normal", "cpu"));
}

// The affinity mask is read, not the machine's size: confined to one CPU,
// the thread counts one, and the warning names the fix.
TEST(BackgroundThread, OneUsableCoreIsSeenAndWarnedAbout) {
  cpu_set_t all, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  const int before = usable_cores();
  EXPECT_EQ(before, CPU_COUNT(&all));
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  EXPECT_EQ(usable_cores(), 1);
  ASSERT_EQ(sched_setaffinity(0, sizeof all, &all), 0);
  EXPECT_EQ(usable_cores(), before);
  const std::string warning = binding_warning(1);
  EXPECT_NE(warning.find("1 core only"), std::string::npos) << warning;
  EXPECT_NE(warning.find("--cpus-per-task=2"), std::string::npos) << warning;
  EXPECT_NE(warning.find("--bind-to none"), std::string::npos) << warning;
  EXPECT_EQ(binding_warning(2), "");
}

// Two processes on one GPU are time-sliced: the warning says so and names
// the ways out; none when every rank has its own GPU or there is no GPU.
TEST(BackgroundThread, RanksSharingAGpuAreWarnedAbout) {
  const std::string two_on_one = gpu_sharing_warning(2, 1, "node7");
  EXPECT_NE(two_on_one.find("2 ranks share 1 GPU on node7"), std::string::npos) << two_on_one;
  EXPECT_NE(two_on_one.find("time-slices"), std::string::npos) << two_on_one;
  EXPECT_NE(two_on_one.find("MPS"), std::string::npos) << two_on_one;
  EXPECT_NE(gpu_sharing_warning(8, 4, "n").find("8 ranks share 4 GPUs"), std::string::npos);
  EXPECT_EQ(gpu_sharing_warning(4, 4, "n"), "");
  EXPECT_EQ(gpu_sharing_warning(1, 2, "n"), "");
  EXPECT_EQ(gpu_sharing_warning(2, 0, "n"), "");  // no GPU: the device check refuses cuda anyway
}

TEST(ThreadLevel, BelowMultipleIsRefusedWithTheLevel) {
  EXPECT_NO_THROW(check_thread_level(MPI_THREAD_MULTIPLE));
  try {
    check_thread_level(MPI_THREAD_SERIALIZED);
    FAIL() << "serialized accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MPI_THREAD_MULTIPLE"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(MPI_THREAD_SERIALIZED)), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace burstpool
