// shadow: learners never wait for the network; a thread per rank moves the
// rank's model by a background averaging rule (ShadowSync, Zheng et al.
// 2020; the rules in src/shadow.hpp). The thread works on learner 0's host
// parameters, so they stay on the host and the loop holds this strategy's
// lock around each step and each read of them.
#include "burstpool/job.hpp"
#include "../shadow.hpp"
#include "strategy.hpp"

namespace burstpool {
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
