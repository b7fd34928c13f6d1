#pragma once
// Background synchronisation in the manner of ShadowSync (Zheng et al.,
// 2020): the trainers never wait for the network. A thread per rank
// repeatedly takes a snapshot s of each of the rank's replicas (its
// trainers' parameters), sums the snapshots of all N replicas of all ranks
// on its own duplicate of the world communicator, and moves each replica by
// what its rule says, added to it, so training done meanwhile is kept. The
// rules (ShadowSync's three), for each replica x:
//   average:        x += mean(s) - s
//   elastic:        x -= alpha (s - c);  c += alpha (sum(s) - N c)
//                   (c: the centre, every rank's copy equal, starting at the
//                   ranks' mean: elastic averaging, each model pulled towards
//                   the centre and the centre towards the models)
//   block-momentum: D = momentum D + block_lr (mean(s) - g);  g += D;  x += g - s
//                   (g: the global model, starting at the ranks' mean; D: the
//                   block update, 0 at the start: block-wise model-update
//                   filtering, BMUF; momentum 0 and block_lr 1 is averaging)
//
// The hand-over. The thread never touches a replica while its trainer is in
// a step (between begin_step and end_step); no lock is held for a step. To
// read or move replicas the thread first marks them wanted, then takes each
// in the gap after its step ends (while the rank agrees on the step, say),
// under the replica's lock; a trainer starting a step on a wanted replica
// waits for that copy or addition, never for the network (the sums across
// ranks run with no replica held). So each replica waits at most one step
// for a round's snapshot and one for its correction.
#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace burstpool {

class DeviceModel;

// One replica as the averaging thread reaches it, wherever it lives: `read`
// copies its n floats out to host memory, `add` adds n host floats to it.
// Called only while the replica is still (see the hand-over above).
struct ShadowReplica {
  std::function<void(float*)> read;
  std::function<void(const float*)> add;
};
// The n floats at `params`, in host memory.
ShadowReplica host_replica(float* params, size_t n);
// A device's whole parameter array: read downloads it; add uploads into
// the device's scratch_a and adds it there (no other copy of the parameters).
ShadowReplica device_replica(DeviceModel& device, size_t n);

// The elastic rule's alpha for N replicas: 1 / N for 0; an alpha at or
// above 2 / (N + 1), with which training diverges, throws Error naming the
// job key.
float elastic_alpha(float alpha, float replicas);

struct ShadowRule {
  enum class Kind { average, elastic, block_momentum } kind = Kind::average;
  float alpha = 0;                              // elastic; 0: 1 / N
  float block_momentum = 0.5f, block_lr = 1.0f;  // block-momentum
};

class ShadowAverager {
 public:
  // Collective over `world` (the centre or global model starts at the mean
  // of every replica). Each replica has n floats; every rank passes as many.
  ShadowAverager(MPI_Comm world, std::vector<ShadowReplica> replicas, size_t n, double pause_ms, ShadowRule rule = {});
  ~ShadowAverager();
  ShadowAverager(const ShadowAverager&) = delete;
  ShadowAverager& operator=(const ShadowAverager&) = delete;

  void start();
  // This rank's trainer is done. Rounds go on until every rank is done, then
  // the thread ends; returns the rounds this rank ran. Not collective itself,
  // but every rank must call it, with no replica in a step.
  int64_t finish();
  // One averaging round (collective over the duplicate); true when every rank
  // had said it is done. The thread calls it; tests may call it directly.
  bool round();
  int64_t rounds() const { return rounds_.load(); }
  // Seconds the thread waited for its rounds' allreduce (the network, and
  // ranks that were later to the round). Read after finish().
  double network_seconds() const { return network_seconds_; }

  // Replica j's trainer, on its own thread, around a step that reads and
  // changes the replica (end_step also when the step failed). begin_step
  // waits while the thread wants the replica.
  void begin_step(int j);
  void end_step(int j);
  // Held by another thread reading or changing replica j outside a step
  // (evaluation, checkpoints): the averaging thread waits meanwhile.
  std::unique_lock<std::mutex> hold(int j) { return std::unique_lock<std::mutex>(ports_[j].lock); }

 private:
  struct Port {  // one replica's hand-over, guarded by `lock`
    std::mutex lock;
    std::condition_variable changed;  // in_step or wanted
    bool in_step = false, wanted = false;
  };
  // Every replica marked wanted, then work(j) on each as soon as it is out of a step.
  void with_each_replica_still(const std::function<void(size_t)>& work);
  void apply();  // the rule, from snapshot_ and sum_

  MPI_Comm comm_ = MPI_COMM_NULL;
  int size_ = 1;       // ranks
  float replicas_ = 1;  // N: replicas of all ranks
  std::vector<ShadowReplica> mine_;
  std::deque<Port> ports_;  // one per replica
  size_t n_;
  double pause_ms_;
  ShadowRule rule_;
  // snapshot_: each replica's n floats; local_: their sum and the done flag
  // (with one replica, snapshot_ itself); sum_: local_ summed over the ranks.
  std::vector<float> snapshot_, local_, sum_, delta_;
  std::vector<float> shared_, update_;  // elastic: the centre; block-momentum: the global model and D
  std::atomic<bool> done_{false};
  std::atomic<bool> abandon_{false};  // raised by the destructor without finish: the thread's waits give up
  bool cancelled_ = false;            // the thread gave up a round (its allreduce is still pending)
  std::atomic<int64_t> rounds_{0};
  double network_seconds_ = 0;  // the thread's alone until finish() joins it
  std::thread thread_;
};

}  // namespace burstpool
