// Waits under the polite policy (while a background job runs): they still
// deliver the data, the thread level is what a background job needs, and a
// thread's cancel flag gets it out of a wait that would never end, and a rank
// asleep in a wait still moves its other transfers (which matters over TCP:
// the ctest mpi_waits_over_tcp runs these tests there too).
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "comm/wait.hpp"
#include "burstpool/background.hpp"

namespace burstpool {
namespace {

TEST(Waits, MpiRunsAtTheLevelABackgroundJobNeeds) { EXPECT_NO_THROW(require_thread_multiple()); }

TEST(Waits, PoliteWaitsDeliverEveryMessage) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  set_wait_policy({true, 0, 20, 0.5, 0.8, 1000, 0});  // sleep at once, predicted, with long back-off: the slow path
  WaitSite site;
  for (int round = 0; round < 5; ++round) {
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    std::vector<float> out(1000, static_cast<float>(rank * 10 + round)), in(1000, -1.0f);
    MPI_Request r[2];
    MPI_Irecv(in.data(), 1000, MPI_FLOAT, prev, round, MPI_COMM_WORLD, &r[0]);
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(3));  // others wait a while
    MPI_Isend(out.data(), 1000, MPI_FLOAT, next, round, MPI_COMM_WORLD, &r[1]);
    wait_all(2, r, &site);
    EXPECT_EQ(in[0], static_cast<float>(prev * 10 + round));
    EXPECT_EQ(in[999], static_cast<float>(prev * 10 + round));
  }
  set_wait_policy({});
  MPI_Barrier(MPI_COMM_WORLD);
}

// A site's predicted sleep: `predict` of the shorter of its last two waits,
// only where that is at least predict_min_us and longer than the spin.
TEST(Waits, OnlyLongExpectedWaitsAreSleptThrough) {
  WaitPolicy p;
  p.spin_us = 200;
  p.predict = 0.8;
  p.predict_min_us = 2000;
  WaitSite site;
  EXPECT_EQ(predicted_sleep_seconds(p, nullptr), 0.0);
  EXPECT_EQ(predicted_sleep_seconds(p, &site), 0.0) << "no waits seen yet";
  site.record(0.010);
  site.record(0.004);
  EXPECT_DOUBLE_EQ(predicted_sleep_seconds(p, &site), 0.8 * 0.004) << "the shorter of the last two";
  site.record(0.0015);  // now 4 ms and 1.5 ms: expected 1.5 ms, under the 2 ms floor
  EXPECT_EQ(predicted_sleep_seconds(p, &site), 0.0);
  p.predict_min_us = 1000;
  EXPECT_DOUBLE_EQ(predicted_sleep_seconds(p, &site), 0.8 * 0.0015);
  p.spin_us = 1600;  // an expected wait within the spin is not slept through
  EXPECT_EQ(predicted_sleep_seconds(p, &site), 0.0);
  p.spin_us = 1400;
  EXPECT_DOUBLE_EQ(predicted_sleep_seconds(p, &site), 0.8 * 0.0015);
}

// Rank 1 sends rank 0 a message too large to go eagerly, then waits where it
// expects 2 s of waiting for rank 0's answer, which rank 0 sends only after
// the whole message has arrived. Over TCP the rest of the message moves only
// while rank 1 polls, so a rank that slept through 0.8 x 2 s in one piece
// would hold rank 0, and itself, up for that long.
TEST(Waits, ASleepingRankStillMovesItsOtherTransfers) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  constexpr int kFloats = 8 << 20;  // 32 MB
  constexpr double kExpected = 2.0;
  std::vector<float> big(rank < 2 ? kFloats : 0, static_cast<float>(rank));
  float answer = 0;
  if (rank == 0) {
    MPI_Recv(big.data(), kFloats, MPI_FLOAT, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    answer = big[kFloats - 1] + 1;
    MPI_Send(&answer, 1, MPI_FLOAT, 1, 2, MPI_COMM_WORLD);
  } else if (rank == 1) {
    set_wait_policy({true, 0, 20, 0.02, 0.8, 1000});
    WaitSite site;
    site.record(kExpected);
    site.record(kExpected);
    MPI_Request send, receive;
    MPI_Isend(big.data(), kFloats, MPI_FLOAT, 0, 1, MPI_COMM_WORLD, &send);
    MPI_Irecv(&answer, 1, MPI_FLOAT, 0, 2, MPI_COMM_WORLD, &receive);
    const auto start = std::chrono::steady_clock::now();
    wait_all(1, &receive, &site);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    MPI_Wait(&send, MPI_STATUS_IGNORE);
    set_wait_policy({});
    EXPECT_EQ(answer, 2.0f);
    EXPECT_LT(waited, 0.5 * kExpected) << "the rank slept through its predicted wait without moving its send";
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(Waits, ACancelFlagEndsAWaitThatWouldNeverFinish) {
  std::atomic<bool> cancel{false};
  std::thread waiter([&] {
    set_wait_cancel_flag(&cancel);
    float x = 0;
    MPI_Request r;
    MPI_Irecv(&x, 1, MPI_FLOAT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &r);  // nobody sends tag 999
    EXPECT_THROW(wait_all(1, &r), WaitCancelled);
    MPI_Cancel(&r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    set_wait_cancel_flag(nullptr);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  cancel.store(true);
  waiter.join();
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace burstpool
