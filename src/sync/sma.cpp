// sma: synchronous model averaging (CROSSBOW, Koliousis et al. 2019; the
// update in include/burstpool/sma.hpp). Learners step towards the average
// model z; after every iteration their corrections are summed over the rank,
// then over the ranks (one allreduce), and every rank moves the same z. On a
// learning-rate drop every replica restarts from z.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include "burstpool/device_model.hpp"
#include "burstpool/error.hpp"
#include "burstpool/job.hpp"
#include "burstpool/runtime.hpp"
#include "burstpool/sma.hpp"
#include "sync/strategy.hpp"

namespace burstpool {

void sma_learner_step(const SmaOptions& o, float* w, float* u, const float* grad, const float* z, float lr,
                      float* delta, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) {
    const float g = grad[i] + o.weight_decay * w[i];
    u[i] = -lr * g + o.momentum * u[i];
    const float c = o.alpha * (w[i] - z[i]);  // w[i] is still w_old here
    w[i] = w[i] + u[i] - c;
    delta[i] += c;
  }
}

void sma_device_step(DeviceModel& d, const SmaOptions& o, float lr, const float* z, float* c, size_t n) {
  d.copy_in(DeviceModel::Buffer::scratch_a, -1, 0, z, n);
  sma_device_resident_step(d, o, lr, c, n);
}

void sma_device_load_average(DeviceModel& d, const float* z, const float* z_prev, size_t n) {
  d.copy_in(DeviceModel::Buffer::scratch_a, -1, 0, z, n);
  d.copy_in(DeviceModel::Buffer::scratch_c, -1, 0, z_prev, n);
}

void sma_device_resident_step(DeviceModel& d, const SmaOptions& o, float lr, float* c, size_t n) {
  using B = DeviceModel::Buffer;
  d.axpby(o.weight_decay, B::parameters, 1.0f, B::parameter_gradient);  // g = grad + wd w
  d.axpby(-lr, B::parameter_gradient, o.momentum, B::momentum);         // u = -lr g + momentum u
  d.axpby(1.0f, B::parameters, 0.0f, B::scratch_b);                      // c = w
  d.axpby(-1.0f, B::scratch_a, 1.0f, B::scratch_b);                      // c = w - z
  d.axpby(o.alpha, B::scratch_b, 0.0f, B::scratch_b);                    // c = alpha (w - z)
  d.axpby(1.0f, B::momentum, 1.0f, B::parameters);                       // w = w + u
  d.axpby(-1.0f, B::scratch_b, 1.0f, B::parameters);                     // w = w + u - c
  d.copy_out(B::scratch_b, -1, 0, c, n);
}

void sma_device_average_step(DeviceModel& d, float mu, const float* delta, size_t n) {
  using B = DeviceModel::Buffer;  // a: z, c: z_prev, d: Delta, b: the momentum term
  d.copy_in(B::scratch_d, -1, 0, delta, n);
  d.axpby(1.0f, B::scratch_a, 0.0f, B::scratch_b);   // t = z
  d.axpby(-1.0f, B::scratch_c, 1.0f, B::scratch_b);  // t = z - z_prev
  d.axpby(mu, B::scratch_b, 0.0f, B::scratch_b);     // t = mu (z - z_prev)
  d.axpby(1.0f, B::scratch_a, 0.0f, B::scratch_c);   // z_prev = z
  d.axpby(1.0f, B::scratch_d, 1.0f, B::scratch_a);   // z = z + Delta
  d.axpby(1.0f, B::scratch_b, 1.0f, B::scratch_a);   // z = z + Delta + mu (z - z_prev)
}

AverageModel::AverageModel(const float* init, size_t n, float average_momentum)
    : mu_(average_momentum), z_(init, init + n), z_prev_(init, init + n) {}

void AverageModel::step(const float* delta) {
  for (size_t i = 0; i < z_.size(); ++i) {
    const float z = z_[i];
    z_[i] = z + delta[i] + mu_ * (z - z_prev_[i]);
    z_prev_[i] = z;
  }
}

namespace {

// Whether z is bitwise equal on every rank (collective); throws if not.
void require_same_on_every_rank(const float* z, size_t n, int64_t iteration) {
  std::vector<float> lo(z, z + n), hi(z, z + n);
  BP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, lo.data(), static_cast<int>(n), MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD));
  BP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, hi.data(), static_cast<int>(n), MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD));
  if (lo != hi) throw Error(fmt::format("the average model differs between ranks after iteration {}", iteration));
}

class Sma final : public SyncStrategy {
 public:
  explicit Sma(const JobConfig& job)
      : options_{job.sync.alpha, job.sgd.momentum, job.sync.average_momentum, job.sgd.weight_decay},
        reset_lr_(job.schedule.at(0)),
        resident_(job.sync.sma_average == "device"),
        check_(std::getenv("BURSTPOOL_TEST_CHECK_AVERAGE") != nullptr) {}

  void prepare(Learner& l) override {
    l.momentum.assign(l.model().param_count(), 0.0f);
    l.scratch.assign(l.model().param_count(), 0.0f);
    loaded_.erase(&l);  // a new learner, maybe where a removed one was
  }
  void attach(LearnerTeam& team) override {
    z_ = std::make_unique<AverageModel>(team.first().params(), team.n, options_.average_momentum);
  }
  const float* starting_values(LearnerTeam&) override { return z_->data(); }

  void before_iteration(LearnerTeam& team, float lr) override {
    if (resident_)  // here, on the loop's thread: learner_step then only reads loaded_
      for (auto& l : team.all)
        if (l->device_step && loaded_.insert(l.get()).second)
          sma_device_load_average(l->exec->device(), z_->z(), z_->previous(), team.n);
    if (lr >= 0.5f * reset_lr_) return;
    team.to_host();  // a learning-rate drop: replicas restart from the average
    team.set_all(z_->data());
    reset_lr_ = lr;
  }
  void learner_step(Learner& l, float lr) override {
    const size_t n = l.model().param_count();
    if (l.device_step && resident_) {  // per step only c_j comes back
      sma_device_resident_step(l.exec->device(), options_, lr, l.scratch.data(), n);
      return;
    }
    if (l.device_step) {  // per step z goes up and c_j comes back
      sma_device_step(l.exec->device(), options_, lr, z_->data(), l.scratch.data(), n);
      return;
    }
    std::fill(l.scratch.begin(), l.scratch.end(), 0.0f);
    sma_learner_step(options_, l.params(), l.momentum.data(), l.model().grads().data(), z_->data(), lr,
                     l.scratch.data(), n);
  }
  void after_iteration(LearnerTeam& team, int64_t iteration) override {
    float* delta = team.first().scratch.data();  // corrections: summed on the rank, then one allreduce
    for (size_t j = 1; j < team.all.size(); ++j)
      for (size_t i = 0; i < team.n; ++i) delta[i] += team.all[j]->scratch[i];
    sum_over_world(delta, team.n);
    z_->step(delta);
    for (auto& l : team.all)  // the devices' copies of z take the same step
      if (l->device_step && loaded_.count(l.get()))
        sma_device_average_step(l->exec->device(), options_.average_momentum, delta, team.n);
    if (check_) {  // test hook: z bitwise the same on every rank after every synchronisation
      require_same_on_every_rank(z_->data(), team.n, iteration);
      ++checked_;
    }
  }
  const float* job_model(LearnerTeam&, std::vector<float>&) override { return z_->data(); }

  std::vector<StrategyVector> checkpoint_vectors() override {
    return {{"/average/z", z_->z(), z_->size()}, {"/average/z_prev", z_->previous(), z_->size()}};
  }
  void save(LearnerProgress& p) const override { p.reset_lr = reset_lr_; }
  void restore(const LearnerProgress& p) override {
    reset_lr_ = p.reset_lr;
    loaded_.clear();  // z came from the checkpoint: the devices load it again
  }
  StrategyCounts finish() override {
    if (check_ && world().rank == 0)
      fmt::print("average model identical on every rank after each of {} synchronisations\n", checked_);
    return {};
  }

 private:
  const SmaOptions options_;
  std::unique_ptr<AverageModel> z_;
  float reset_lr_;  // the learning rate at the last restart from z
  const bool resident_;                // [sync] sma_average = device
  std::set<const Learner*> loaded_;    // device learners holding the current z (resident_)
  const bool check_;
  int64_t checked_ = 0;
};

}  // namespace

std::unique_ptr<SyncStrategy> make_sma_strategy(const JobConfig& job) { return std::make_unique<Sma>(job); }

}  // namespace burstpool
