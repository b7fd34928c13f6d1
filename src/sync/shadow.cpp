// shadow: learners never wait for the network; a thread per rank moves the
// rank's model by a background averaging rule (ShadowSync, Zheng et al.
// 2020; the rules in sync/shadow.hpp). The thread works on learner 0's host
// parameters, so they stay on the host and the loop holds this strategy's
// lock around each step and each read of them.
#include <chrono>

#include "burstpool/error.hpp"
#include "burstpool/job.hpp"
#include "comm/wait.hpp"
#include "sync/shadow.hpp"
#include "sync/strategy.hpp"

namespace burstpool {

ShadowAverager::ShadowAverager(MPI_Comm world, float* params, size_t n, std::mutex& lock, double pause_ms,
                               ShadowRule rule)
    : params_(params), n_(n), lock_(lock), pause_ms_(pause_ms), rule_(rule), snapshot_(n + 1), sum_(n + 1) {
  BP_MPI_CHECK(MPI_Comm_dup(world, &comm_));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_size(comm_, &size_);
  if (rule_.kind == ShadowRule::Kind::average) return;
  shared_.assign(params, params + n);  // the centre or the global model: the ranks' mean
  if (n > 0)
    BP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, shared_.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm_));
  for (float& v : shared_) v /= static_cast<float>(size_);
  if (rule_.kind == ShadowRule::Kind::block_momentum) update_.assign(n, 0.0f);
}

void ShadowAverager::apply() {
  const float inv = 1.0f / static_cast<float>(size_);
  switch (rule_.kind) {
    case ShadowRule::Kind::average:
      for (size_t i = 0; i < n_; ++i) params_[i] += sum_[i] * inv - snapshot_[i];
      break;
    case ShadowRule::Kind::elastic: {
      const float a = rule_.alpha, ranks = static_cast<float>(size_);
      for (size_t i = 0; i < n_; ++i) {
        params_[i] -= a * (snapshot_[i] - shared_[i]);
        shared_[i] += a * (sum_[i] - ranks * shared_[i]);
      }
      break;
    }
    case ShadowRule::Kind::block_momentum:
      for (size_t i = 0; i < n_; ++i) {
        update_[i] = rule_.block_momentum * update_[i] + rule_.block_lr * (sum_[i] * inv - shared_[i]);
        shared_[i] += update_[i];
        params_[i] += shared_[i] - snapshot_[i];
      }
      break;
  }
}

ShadowAverager::~ShadowAverager() {
  if (thread_.joinable()) finish();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
}

bool ShadowAverager::round() {
  {
    std::lock_guard<std::mutex> guard(lock_);
    std::copy(params_, params_ + n_, snapshot_.begin());
  }
  snapshot_[n_] = done_.load() ? 1.0f : 0.0f;  // ranks done so far, summed with the parameters
  MPI_Request request;
  BP_MPI_CHECK(MPI_Iallreduce(snapshot_.data(), sum_.data(), static_cast<int>(n_ + 1), MPI_FLOAT, MPI_SUM, comm_,
                              &request));
  wait_all(1, &request);  // sleeps between polls on this thread (it has a cancel flag)
  {
    std::lock_guard<std::mutex> guard(lock_);
    apply();
  }
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
  void begin(LearnerTeam& team) override {  // the centre or global model starts at the ranks' mean: collective
    averager_ = std::make_unique<ShadowAverager>(MPI_COMM_WORLD, team.first().params(), team.n, lock_, pause_ms_,
                                                 rule_);
    averager_->start();
  }
  void learner_step(Learner& l, float lr) override { l.sgd_step(lr); }
  std::mutex* replica_lock() override { return &lock_; }
  StrategyCounts finish() override { return {{"shadow_rounds", averager_ ? averager_->finish() : 0}}; }

 private:
  const ShadowRule rule_;
  const double pause_ms_;
  std::mutex lock_;  // learner 0's parameters, shared with the averaging thread
  std::unique_ptr<ShadowAverager> averager_;
};

}  // namespace

std::unique_ptr<SyncStrategy> make_shadow_strategy(const JobConfig& job) { return std::make_unique<Shadow>(job); }

}  // namespace burstpool
