// Waits under the polite policy (while a background job runs): they still
// deliver the data, the thread level is what a background job needs, and a
// thread's cancel flag gets it out of a wait that would never end.
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
  set_wait_policy({true, 0, 20, 0.5, 0.8});  // sleep at once, with long back-off: the slow path
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
