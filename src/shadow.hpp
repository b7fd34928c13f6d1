#pragma once
// Background model averaging in the manner of ShadowSync (Zheng et al.,
// 2020): the trainer never waits for the network. A thread per rank repeatedly
// takes a snapshot of the rank's parameters, sums the snapshots of all ranks
// on its own duplicate of the world communicator, and moves the parameters
// by (average - snapshot), so training done meanwhile is kept.
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace burstpool {

class ShadowAverager {
 public:
  // Collective over `world`. `params` (n floats) is the rank's model; the
  // trainer holds `lock` while it reads or writes them.
  ShadowAverager(MPI_Comm world, float* params, size_t n, std::mutex& lock, double pause_ms);
  ~ShadowAverager();
  ShadowAverager(const ShadowAverager&) = delete;
  ShadowAverager& operator=(const ShadowAverager&) = delete;

  void start();
  // This rank's trainer is done. Rounds go on until every rank is done, then
  // the thread ends; returns the rounds this rank ran. Not collective itself,
  // but every rank must call it.
  int64_t finish();
  // One averaging round (collective over the duplicate); true when every rank
  // had said it is done. The thread calls it; tests may call it directly.
  bool round();
  int64_t rounds() const { return rounds_.load(); }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int size_ = 1;
  float* params_;
  size_t n_;
  std::mutex& lock_;
  double pause_ms_;
  std::vector<float> snapshot_, sum_;
  std::atomic<bool> done_{false}, never_{false};
  std::atomic<int64_t> rounds_{0};
  std::thread thread_;
};

}  // namespace burstpool
