// local-sgd: every learner takes plain SGD steps on its own replica; every
// local_steps iterations all replicas of all ranks are replaced by their
// mean (model averaging, "local SGD": Lin et al. 2020).
#include "burstpool/job.hpp"
#include "sync/strategy.hpp"

namespace burstpool {
namespace {

class LocalSgd final : public SyncStrategy {
 public:
  explicit LocalSgd(const JobConfig& job) : every_(job.sync.local_steps) {}

  void learner_step(Learner& l, float lr) override { l.sgd_step(lr); }
  void after_iteration(LearnerTeam& team, int64_t iteration) override {
    if ((iteration + 1) % every_ != 0) return;
    team.to_host();
    if (mean_.size() != team.n) mean_.resize(team.n);
    team.set_all(job_model(team, mean_));
  }

 private:
  const int every_;
  std::vector<float> mean_;
};

}  // namespace

std::unique_ptr<SyncStrategy> make_local_sgd_strategy(const JobConfig& job) {
  return std::make_unique<LocalSgd>(job);
}

}  // namespace burstpool
