#pragma once
// Background synchronisation in the manner of ShadowSync (Zheng et al.,
// 2020): the trainers never wait for the network. A thread per rank
// repeatedly takes a snapshot s of each of the rank's replicas (its
// trainers' parameters, one lock each), sums the snapshots of all N
// replicas of all ranks on its own duplicate of the world communicator, and
// moves each replica by what its rule says, added to it, so training done
// meanwhile is kept. The rules (ShadowSync's three), for each replica x:
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

// One trainer's parameters and the lock its trainer holds while it reads or writes them.
struct ShadowReplica {
  float* params;
  std::mutex* lock;
};

struct ShadowRule {
  enum class Kind { average, elastic, block_momentum } kind = Kind::average;
  float alpha = 0.5f;                          // elastic
  float block_momentum = 0.5f, block_lr = 1.0f;  // block-momentum
};

class ShadowAverager {
 public:
  // Collective over `world` (the centre or global model starts at the mean
  // of every replica). Each replica has n floats; every rank passes as many.
  ShadowAverager(MPI_Comm world, std::vector<ShadowReplica> replicas, size_t n, double pause_ms, ShadowRule rule = {});
  // One replica: `params`, guarded by `lock`.
  ShadowAverager(MPI_Comm world, float* params, size_t n, std::mutex& lock, double pause_ms, ShadowRule rule = {})
      : ShadowAverager(world, {{params, &lock}}, n, pause_ms, rule) {}
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
  int size_ = 1;       // ranks
  float replicas_ = 1;  // N: replicas of all ranks
  std::vector<ShadowReplica> mine_;
  size_t n_;
  double pause_ms_;
  ShadowRule rule_;
  // snapshot_: each replica's n floats; local_: their sum and the done flag
  // (with one replica, snapshot_ itself); sum_: local_ summed over the ranks.
  std::vector<float> snapshot_, local_, sum_;
  std::vector<float> shared_, update_;  // elastic: the centre; block-momentum: the global model and D
  void apply();  // the rule, from snapshot_ and sum_, each replica under its lock
  std::atomic<bool> done_{false}, never_{false};
  std::atomic<int64_t> rounds_{0};
  std::thread thread_;
};

}  // namespace burstpool
