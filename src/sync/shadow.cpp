// shadow: learners never wait for the network; a thread per rank moves the
// rank's learners by a background averaging rule (ShadowSync, Zheng et al.
// 2020; the rules and the hand-over in sync/shadow.hpp). With a device the
// replicas stay there (parameters, momentum and update): the thread takes a
// snapshot and gives a correction once a round, between two of the
// replica's steps, never a copy per step.
#include <chrono>
#include <deque>

#include "burstpool/device_model.hpp"
#include "burstpool/error.hpp"
#include "burstpool/job.hpp"
#include "comm/wait.hpp"
#include "sync/shadow.hpp"
#include "sync/strategy.hpp"

namespace burstpool {

ShadowReplica host_replica(float* params, size_t n) {
  return {[params, n](float* out) { std::copy(params, params + n, out); },
          [params, n](const float* delta) {
            for (size_t i = 0; i < n; ++i) params[i] += delta[i];
          }};
}

ShadowReplica device_replica(DeviceModel& device, size_t n) {
  using B = DeviceModel::Buffer;
  return {[&device, n](float* out) { device.copy_out(B::parameters, -1, 0, out, n); },
          [&device, n](const float* delta) {
            device.copy_in(B::scratch_a, -1, 0, delta, n);
            device.axpby(1.0f, B::scratch_a, 1.0f, B::parameters);
          }};
}

// A round moves the gap between the models' mean and the centre by the
// factor 1 - alpha (N + 1) (the models move alpha towards the centre, the
// centre alpha N towards their mean), so at alpha >= 2 / (N + 1) the gap grows
// every round and training diverges, whatever the learning rate. Every rank
// computes the same N, so every rank refuses alike.
float elastic_alpha(float alpha, float replicas) {
  if (alpha <= 0) return 1.0f / replicas;
  if (alpha * (replicas + 1) >= 2)
    throw Error(fmt::format("[sync] shadow_alpha = {} with {} models averaged: the centre and the models' mean move "
                            "apart every round and training diverges; it must stay under 2 / (models + 1) = {:.3g}, "
                            "or leave it 0 for 1 / models",
                            alpha, replicas, 2 / (replicas + 1)));
  return alpha;
}

ShadowAverager::ShadowAverager(MPI_Comm world, std::vector<ShadowReplica> replicas, size_t n, double pause_ms,
                               ShadowRule rule)
    : mine_(std::move(replicas)), ports_(mine_.size()), n_(n), pause_ms_(pause_ms), rule_(rule),
      snapshot_(mine_.size() * n + 1), sum_(n + 1), delta_(n) {
  BP_CHECK(!mine_.empty(), "shadow: no replica to average");
  BP_MPI_CHECK(MPI_Comm_dup(world, &comm_));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_size(comm_, &size_);
  if (mine_.size() > 1) local_.resize(n + 1);
  replicas_ = static_cast<float>(mine_.size());
  BP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &replicas_, 1, MPI_FLOAT, MPI_SUM, comm_));
  if (rule_.kind == ShadowRule::Kind::average) return;
  if (rule_.kind == ShadowRule::Kind::elastic) rule_.alpha = elastic_alpha(rule_.alpha, replicas_);
  shared_.assign(n, 0.0f);  // the centre or the global model: the mean of every replica
  for (const ShadowReplica& r : mine_) {
    r.read(delta_.data());
    for (size_t i = 0; i < n; ++i) shared_[i] += delta_[i];
  }
  if (n > 0)
    BP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, shared_.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm_));
  for (float& v : shared_) v /= replicas_;
  if (rule_.kind == ShadowRule::Kind::block_momentum) update_.assign(n, 0.0f);
}

void ShadowAverager::begin_step(int j) {
  Port& p = ports_[j];
  std::unique_lock<std::mutex> guard(p.lock);
  p.changed.wait(guard, [&] { return !p.wanted; });
  p.in_step = true;
}

void ShadowAverager::end_step(int j) {
  Port& p = ports_[j];
  {
    std::lock_guard<std::mutex> guard(p.lock);
    p.in_step = false;
  }
  p.changed.notify_all();
}

// All wanted first: a trainer whose step ends meanwhile waits for its turn
// instead of starting another step the thread would have to wait out.
void ShadowAverager::with_each_replica_still(const std::function<void(size_t)>& work) {
  for (Port& p : ports_) {
    std::lock_guard<std::mutex> guard(p.lock);
    p.wanted = true;
  }
  for (size_t j = 0; j < ports_.size(); ++j) {
    Port& p = ports_[j];
    {
      std::unique_lock<std::mutex> guard(p.lock);
      p.changed.wait(guard, [&] { return !p.in_step; });
      work(j);
      p.wanted = false;
    }
    p.changed.notify_all();
  }
}

// The shared model moves once a round; each replica by its own snapshot.
void ShadowAverager::apply() {
  const float inv = 1.0f / replicas_;
  if (rule_.kind == ShadowRule::Kind::block_momentum)
    for (size_t i = 0; i < n_; ++i) {
      update_[i] = rule_.block_momentum * update_[i] + rule_.block_lr * (sum_[i] * inv - shared_[i]);
      shared_[i] += update_[i];
    }
  with_each_replica_still([&](size_t j) {
    const float* s = snapshot_.data() + j * n_;
    float* d = delta_.data();
    switch (rule_.kind) {
      case ShadowRule::Kind::average:
        for (size_t i = 0; i < n_; ++i) d[i] = sum_[i] * inv - s[i];
        break;
      case ShadowRule::Kind::elastic:
        for (size_t i = 0; i < n_; ++i) d[i] = -rule_.alpha * (s[i] - shared_[i]);
        break;
      case ShadowRule::Kind::block_momentum:
        for (size_t i = 0; i < n_; ++i) d[i] = shared_[i] - s[i];
        break;
    }
    mine_[j].add(d);
  });
  if (rule_.kind == ShadowRule::Kind::elastic)
    for (size_t i = 0; i < n_; ++i) shared_[i] += rule_.alpha * (sum_[i] - replicas_ * shared_[i]);
}

// Without finish (a failure unwinds the run): the thread must not wait for
// rounds that the other ranks may never finish, so its wait is cancelled.
// A cancelled allreduce stays pending, and MPI may still write into its
// buffers and use the communicator: those are left allocated, as the
// process is on its way to MPI_Abort.
ShadowAverager::~ShadowAverager() {
  if (thread_.joinable()) {
    abandon_.store(true);
    thread_.join();
  }
  if (cancelled_) {
    new std::vector<float>(std::move(sum_));  // leaked on purpose (see above)
    new std::vector<float>(std::move(snapshot_));
    new std::vector<float>(std::move(local_));
    return;
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
}

bool ShadowAverager::round() {
  with_each_replica_still([&](size_t j) { mine_[j].read(snapshot_.data() + j * n_); });
  std::vector<float>& send = mine_.size() == 1 ? snapshot_ : local_;
  if (mine_.size() > 1) {  // the rank's replicas summed, in their order
    std::copy(snapshot_.begin(), snapshot_.begin() + n_, local_.begin());
    for (size_t j = 1; j < mine_.size(); ++j)
      for (size_t i = 0; i < n_; ++i) local_[i] += snapshot_[j * n_ + i];
  }
  send[n_] = done_.load() ? 1.0f : 0.0f;  // ranks done so far, summed with the parameters
  MPI_Request request;
  BP_MPI_CHECK(
      MPI_Iallreduce(send.data(), sum_.data(), static_cast<int>(n_ + 1), MPI_FLOAT, MPI_SUM, comm_, &request));
  const auto t0 = std::chrono::steady_clock::now();
  wait_all(1, &request);  // sleeps between polls on this thread (it has a cancel flag)
  network_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  apply();
  rounds_.fetch_add(1);
  return sum_[n_] >= static_cast<float>(size_);
}

void ShadowAverager::start() {
  thread_ = std::thread([this] {
    set_wait_cancel_flag(&abandon_);  // also makes waits sleep between polls instead of spinning
    try {
      while (!round() && !abandon_.load())
        if (pause_ms_ > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(pause_ms_));
    } catch (const WaitCancelled&) {
      cancelled_ = true;
    }
    set_wait_cancel_flag(nullptr);
  });
}

int64_t ShadowAverager::finish() {
  done_.store(true);
  if (thread_.joinable()) thread_.join();
  return rounds_.load();
}

namespace {

ShadowRule rule_of(const SyncConfig& sc) {
  ShadowRule rule;
  rule.kind = sc.shadow_rule == "elastic"          ? ShadowRule::Kind::elastic
              : sc.shadow_rule == "block-momentum" ? ShadowRule::Kind::block_momentum
                                                   : ShadowRule::Kind::average;
  rule.alpha = sc.shadow_alpha;
  rule.block_momentum = sc.shadow_block_momentum;
  rule.block_lr = sc.shadow_block_lr;
  return rule;
}

class Shadow final : public SyncStrategy {
 public:
  explicit Shadow(const JobConfig& job) : rule_(rule_of(job.sync)), pause_ms_(job.sync.shadow_pause_ms) {}

  void begin(LearnerTeam& team) override {  // the centre or global model starts at the replicas' mean: collective
    std::vector<ShadowReplica> replicas;
    for (auto& l : team.all)
      replicas.push_back(l->device_step ? device_replica(l->exec->device(), team.n) : host_replica(l->params(), team.n));
    averager_ = std::make_unique<ShadowAverager>(MPI_COMM_WORLD, std::move(replicas), team.n, pause_ms_, rule_);
    averager_->start();
  }
  void learner_begins(int j) override { averager_->begin_step(j); }
  void learner_step(Learner& l, float lr) override { l.sgd_step(lr); }
  void learner_ends(int j) override { averager_->end_step(j); }
  std::unique_lock<std::mutex> hold_replica(int j) override {
    return averager_ ? averager_->hold(j) : std::unique_lock<std::mutex>();
  }
  StrategyCounts finish() override { return {{"shadow_rounds", averager_ ? averager_->finish() : 0}}; }
  double background_seconds() const override { return averager_ ? averager_->network_seconds() : 0; }

 private:
  const ShadowRule rule_;
  const double pause_ms_;
  std::unique_ptr<ShadowAverager> averager_;
};

}  // namespace

std::unique_ptr<SyncStrategy> make_shadow_strategy(const JobConfig& job) { return std::make_unique<Shadow>(job); }

}  // namespace burstpool
