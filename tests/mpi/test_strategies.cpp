// The sync strategy interface (src/sync/strategy.hpp), proved by a strategy
// written here in a few lines: "average every step" (each learner an SGD
// step, then every replica of every rank replaced by their mean) must train
// exactly as local-sgd with local_steps = 1, every replica and its momentum
// bit for bit, on any rank count.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "burstpool/job.hpp"
#include "burstpool/trainer.hpp"
#include "io/h5.hpp"
#include "sync/strategy.hpp"

namespace burstpool {
namespace {

class AverageEveryStep final : public SyncStrategy {
 public:
  void learner_step(Learner& l, float lr) override { l.sgd_step(lr); }
  void after_iteration(LearnerTeam& team, int64_t) override {
    team.to_host();
    mean_.resize(team.n);
    team.set_all(team.mean(mean_, [](Learner& l) { return l.params(); }));
  }

 private:
  std::vector<float> mean_;
};

// A folder every rank sees under the same name (made by rank 0).
std::string shared_folder() {
  char name[256] = "/tmp/bp_strategy_XXXXXX";
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0 && !mkdtemp(name)) name[0] = '\0';
  MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
  return name;
}

// Trains a 2-learners-per-rank job with `strategy` (and local_steps) into dir/NAME.h5.
std::string train_with(const std::string& dir, const std::string& strategy, int local_steps) {
  const std::string job = dir + "/job.ini", checkpoint = dir + "/" + strategy + std::to_string(local_steps) + ".h5";
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0)
    std::ofstream(job) << "[job]\nmodel = " << dir << "/model.ini\nseed = 3\n[data]\nsource = synthetic\n"
                       << "synthetic_train_samples = 256\nsynthetic_test_samples = 32\n[train]\n"
                       << "learner_batch_size = 4\nsteps = 12\nlog_every = 100\n[optimizer]\nlr = 0.05\n"
                       << "momentum = 0.9\nweight_decay = 0.001\n[sync]\nlearners = 2\n";
  if (rank == 0)
    std::ofstream(dir + "/model.ini") << "[data]\ntype = input\nshape = 6\n[fc]\ntype = linear\ninputs = data\n"
                                      << "out_features = 4\n[loss]\ntype = softmax_cross_entropy\ninputs = fc\n";
  MPI_Barrier(MPI_COMM_WORLD);
  const JobConfig c = load_job(job, {"sync.strategy=" + strategy, "sync.local_steps=" + std::to_string(local_steps),
                                     "output.checkpoint=" + checkpoint});
  train(c);
  MPI_Barrier(MPI_COMM_WORLD);  // rank 0 writes the checkpoint after the others have returned
  return checkpoint;
}

// Every replica's parameters and momentum, in replica order.
std::vector<float> replicas(const std::string& file) {
  const h5::File f = h5::File::open_read(file);
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::vector<float> all;
  for (int g = 0; g < 2 * ranks; ++g)
    for (const char* part : {"params", "momentum"}) {
      const std::vector<float> v = h5::read_floats(f, "/learners/" + std::to_string(g) + "/" + part);
      all.insert(all.end(), v.begin(), v.end());
    }
  return all;
}

TEST(Strategies, AToyStrategyTrainsExactlyAsLocalSgdWithOneStep) {
  register_sync_strategy("average-every-step", [](const JobConfig&) { return std::make_unique<AverageEveryStep>(); });
  const std::string dir = shared_folder();
  ASSERT_FALSE(dir.empty());
  const std::vector<float> toy = replicas(train_with(dir, "average-every-step", 1));
  const std::vector<float> local1 = replicas(train_with(dir, "local-sgd", 1));
  const std::vector<float> local3 = replicas(train_with(dir, "local-sgd", 3));
  ASSERT_EQ(toy.size(), local1.size());
  EXPECT_TRUE(toy == local1) << "average-every-step differs from local-sgd with local_steps = 1";
  EXPECT_FALSE(toy == local3) << "the comparison cannot tell strategies apart";
  MPI_Barrier(MPI_COMM_WORLD);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) EXPECT_EQ(std::system(("rm -r " + dir).c_str()), 0);
}

}  // namespace
}  // namespace burstpool
