// shadow: learners never wait for the network; a thread per rank moves the
// rank's learners by a background averaging rule (ShadowSync, Zheng et al.
// 2020; the rules in sync/shadow.hpp). The thread works on the learners'
// host parameters, so they stay on the host, and the loop holds each
// learner's lock around that learner's step and each read of its replica:
// learners of one rank step at the same time, each waiting only for the
// thread's copy of its own replica.
#include <chrono>
#include <deque>

#include "burstpool/error.hpp"
#include "burstpool/job.hpp"
#include "comm/wait.hpp"
#include "sync/shadow.hpp"
#include "sync/strategy.hpp"

namespace burstpool {

ShadowAverager::ShadowAverager(MPI_Comm world, std::vector<ShadowReplica> replicas, size_t n, double pause_ms,
                               ShadowRule rule)
    : mine_(std::move(replicas)), n_(n), pause_ms_(pause_ms), rule_(rule), snapshot_(mine_.size() * n + 1),
      sum_(n + 1) {
  BP_CHECK(!mine_.empty(), "shadow: no replica to average");
  BP_MPI_CHECK(MPI_Comm_dup(world, &comm_));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_size(comm_, &size_);
  if (mine_.size() > 1) local_.resize(n + 1);
  replicas_ = static_cast<float>(mine_.size());
  BP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &replicas_, 1, MPI_FLOAT, MPI_SUM, comm_));
  if (rule_.kind == ShadowRule::Kind::average) return;
  shared_.assign(n, 0.0f);  // the centre or the global model: the mean of every replica
  for (const ShadowReplica& r : mine_)
    for (size_t i = 0; i < n; ++i) shared_[i] += r.params[i];
  if (n > 0)
    BP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, shared_.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm_));
  for (float& v : shared_) v /= replicas_;
  if (rule_.kind == ShadowRule::Kind::block_momentum) update_.assign(n, 0.0f);
}

// The shared model moves once a round; each replica by its own snapshot, under its lock.
void ShadowAverager::apply() {
  const float inv = 1.0f / replicas_;
  if (rule_.kind == ShadowRule::Kind::block_momentum)
    for (size_t i = 0; i < n_; ++i) {
      update_[i] = rule_.block_momentum * update_[i] + rule_.block_lr * (sum_[i] * inv - shared_[i]);
      shared_[i] += update_[i];
    }
  for (size_t j = 0; j < mine_.size(); ++j) {
    float* x = mine_[j].params;
    const float* s = snapshot_.data() + j * n_;
    std::lock_guard<std::mutex> guard(*mine_[j].lock);
    switch (rule_.kind) {
      case ShadowRule::Kind::average:
        for (size_t i = 0; i < n_; ++i) x[i] += sum_[i] * inv - s[i];
        break;
      case ShadowRule::Kind::elastic:
        for (size_t i = 0; i < n_; ++i) x[i] -= rule_.alpha * (s[i] - shared_[i]);
        break;
      case ShadowRule::Kind::block_momentum:
        for (size_t i = 0; i < n_; ++i) x[i] += shared_[i] - s[i];
        break;
    }
  }
  if (rule_.kind == ShadowRule::Kind::elastic)
    for (size_t i = 0; i < n_; ++i) shared_[i] += rule_.alpha * (sum_[i] - replicas_ * shared_[i]);
}

ShadowAverager::~ShadowAverager() {
  if (thread_.joinable()) finish();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
}

bool ShadowAverager::round() {
  for (size_t j = 0; j < mine_.size(); ++j) {
    std::lock_guard<std::mutex> guard(*mine_[j].lock);
    std::copy(mine_[j].params, mine_[j].params + n_, snapshot_.begin() + j * n_);
  }
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
  wait_all(1, &request);  // sleeps between polls on this thread (it has a cancel flag)
  apply();
  rounds_.fetch_add(1);
  return sum_[n_] >= static_cast<float>(size_);
}

void ShadowAverager::start() {
  thread_ = std::thread([this] {
    set_wait_cancel_flag(&never_);  // a flag that is never raised: waits sleep instead of spinning
    while (!round())
      if (pause_ms_ > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(pause_ms_));
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

  bool device_resident() const override { return false; }
  void prepare(Learner&) override { locks_.emplace_back(); }  // learner j's lock is the j-th
  void begin(LearnerTeam& team) override {  // the centre or global model starts at the replicas' mean: collective
    std::vector<ShadowReplica> replicas;
    for (size_t j = 0; j < team.all.size(); ++j) replicas.push_back({team.all[j]->params(), &locks_[j]});
    averager_ = std::make_unique<ShadowAverager>(MPI_COMM_WORLD, std::move(replicas), team.n, pause_ms_, rule_);
    averager_->start();
  }
  void learner_step(Learner& l, float lr) override { l.sgd_step(lr); }
  std::mutex* replica_lock(int learner) override { return &locks_.at(learner); }
  StrategyCounts finish() override { return {{"shadow_rounds", averager_ ? averager_->finish() : 0}}; }

 private:
  const ShadowRule rule_;
  const double pause_ms_;
  std::deque<std::mutex> locks_;  // per learner: its parameters, shared with the averaging thread
  std::unique_ptr<ShadowAverager> averager_;
};

}  // namespace

std::unique_ptr<SyncStrategy> make_shadow_strategy(const JobConfig& job) { return std::make_unique<Shadow>(job); }

}  // namespace burstpool
