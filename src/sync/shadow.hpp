#pragma once
// Background synchronisation in the manner of ShadowSync (Zheng et al.,
// 2020): the trainer never waits for the network. A thread per rank repeatedly
// takes a snapshot s of the rank's parameters, sums the snapshots of all N
// ranks on its own duplicate of the world communicator, and moves the
// parameters by what its rule says, added to them, so training done meanwhile
// is kept. The rules (ShadowSync's three):
//   average:        x += mean(s) - s
//   elastic:        x -= alpha (s - c);  c += alpha (sum(s) - N c)
//                   (c: the centre, every rank's copy equal, starting at the
//                   ranks' mean: elastic averaging, each model pulled towards
//                   the centre and the centre towards the models)
//   block-momentum: D = momentum D + block_lr (mean(s) - g);  g += D;  x += g - s
//                   (g: the global model, starting at the ranks' mean; D: the
//                   block update, 0 at the start: block-wise model-update
//                   filtering, BMUF; momentum 0 and block_lr 1 is averaging)
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace burstpool {

struct ShadowRule {
  enum class Kind { average, elastic, block_momentum } kind = Kind::average;
  float alpha = 0.5f;                          // elastic
  float block_momentum = 0.5f, block_lr = 1.0f;  // block-momentum
};

class ShadowAverager {
 public:
  // Collective over `world` (the centre or global model starts at the ranks'
  // mean). `params` (n floats) is the rank's model; the trainer holds `lock`
  // while it reads or writes them.
  ShadowAverager(MPI_Comm world, float* params, size_t n, std::mutex& lock, double pause_ms, ShadowRule rule = {});
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
  ShadowRule rule_;
  std::vector<float> snapshot_, sum_;
  std::vector<float> shared_, update_;  // elastic: the centre; block-momentum: the global model and D
  void apply();  // the rule, from snapshot_ and sum_ (under lock_)
  std::atomic<bool> done_{false}, never_{false};
  std::atomic<int64_t> rounds_{0};
  std::thread thread_;
};

}  // namespace burstpool
