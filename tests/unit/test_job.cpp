#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "burstpool/error.hpp"
#include "burstpool/job.hpp"
#include "burstpool/trainer.hpp"

namespace burstpool {
namespace {

std::string write_job(const std::string& text) {
  static int counter = 0;
  std::string path = fmt::format("/tmp/burstpool_job_{}_{}.ini", getpid(), counter++);
  std::ofstream(path) << text;
  return path;
}

std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  std::string path = write_job(text);
  try {
    load_job(path, overrides);
  } catch (const Error& e) {
    std::remove(path.c_str());
    std::string what = e.what();
    return what.rfind(path, 0) == 0 ? "JOB" + what.substr(path.size()) : what;
  }
  std::remove(path.c_str());
  return "no error";
}

TEST(Job, DefaultsAndOverrides) {
  std::string path = write_job("[job]\nmodel = m.ini\n[train]\nbatch_size = 32\n");
  JobConfig c = load_job(path, {"train.steps=5", "optimizer.lr = 0.01"});
  EXPECT_EQ(c.batch_size, 32);
  EXPECT_EQ(c.steps, 5);
  EXPECT_FLOAT_EQ(c.lr, 0.01f);
  EXPECT_EQ(c.data_source, "fashion-mnist");
  EXPECT_EQ(c.model_path, "/tmp/m.ini");  // relative to the job file
  std::remove(path.c_str());
}

TEST(Job, ErrorsNameFileLineAndKey) {
  EXPECT_EQ(error_of("[job]\nmodel = m.ini\n[train]\nbatchsize = 3\n").substr(0, 39),
            "JOB:4: [train] unknown key 'batchsize' ");
  EXPECT_EQ(error_of("[job]\nmodel = m.ini\n[train]\nbatch_size = -3\n"),
            "JOB:4: [train] batch_size: -3 is outside [1, 10000000]");
  EXPECT_EQ(error_of("[job]\nmodel = m.ini\n[optimizer]\nlr = fast\n"), "JOB:4: [optimizer] lr: 'fast' is not a number");
  EXPECT_EQ(error_of("[job]\nmodel = m.ini\n[data]\nsource = imagenet\n"),
            "JOB:4: [data] source: 'imagenet' is not one of: fashion-mnist, hdf5, synthetic");
  EXPECT_EQ(error_of("[job]\nseed = 1\n"), "JOB: [job] model: missing (required)");
  EXPECT_EQ(error_of("[jb]\nmodel = m.ini\n"), "JOB:2: unknown section [jb]");
  EXPECT_EQ(error_of("[job]\nmodel = m.ini\n", {"train.steps=x"}),
            "--set train.steps=x: [train] steps: 'x' is not an integer (or beyond 32 bits)");
}

// Every number has a documented range, and values that would stall a run, blow
// it up or leave it doing nothing are refused before it starts.
TEST(Job, NumbersAreCheckedAgainstTheirRanges) {
  const std::string job = "[job]\nmodel = m.ini\n";
  auto with = [&](const std::string& set) { return error_of(job, {set}); };
  EXPECT_EQ(with("optimizer.lr=1e12"), "--set optimizer.lr=1e12: [optimizer] lr: 1000000000000 is outside (0, 100]");
  EXPECT_EQ(with("optimizer.weight_decay=1e12"),
            "--set optimizer.weight_decay=1e12: [optimizer] weight_decay: 1000000000000 is outside [0, 1]");
  EXPECT_EQ(with("sync.alpha=0"), "--set sync.alpha=0: [sync] alpha: 0 is outside (0, 1]");
  EXPECT_EQ(with("sync.shadow_pause_ms=1e12"),
            "--set sync.shadow_pause_ms=1e12: [sync] shadow_pause_ms: 1000000000000 is outside [0, 60000]");
  EXPECT_EQ(with("background.wait_backoff=10"),
            "--set background.wait_backoff=10: [background] wait_backoff: 10 is outside [0, 1]");
  EXPECT_EQ(with("background.wait_sleep_us=100000000"),
            "--set background.wait_sleep_us=100000000: [background] wait_sleep_us: 100000000 is outside [1, 100000]");
  EXPECT_EQ(with("background.wait_max_sleep_us=0"),
            "--set background.wait_max_sleep_us=0: [background] wait_max_sleep_us: 0 is outside [1, 1000000]");
  EXPECT_EQ(with("background.calibrate_steps=1000000"),
            "--set background.calibrate_steps=1000000: [background] calibrate_steps: 1000000 is outside [2, 1000]");
  EXPECT_EQ(with("train.steps=4294967297"),
            "--set train.steps=4294967297: [train] steps: '4294967297' is not an integer (or beyond 32 bits)");
  EXPECT_EQ(with("job.seed=-1"), "--set job.seed=-1: [job] seed: -1 is outside [0, 2147483647]");
  // An end that names another key: min_lr may not pass lr.
  EXPECT_EQ(error_of(job + "[optimizer]\nlr = 0.1\n[schedule]\ntype = cosine\nmin_lr = 0.5\n"),
            "JOB:7: [schedule] min_lr: 0.5 is outside [0, optimizer.lr] = [0, 0.1]");
  EXPECT_EQ(error_of(job + "[schedule]\nmin_lr = 0.05\n"), "no error");
}

TEST(Job, RulesAcrossKeys) {
  const std::string job = "[job]\nmodel = m.ini\n[data]\nsource = synthetic\nsynthetic_test_samples = 0\n";
  EXPECT_EQ(error_of(job + "[train]\ntarget_accuracy = 0.9\nstop_at_target = true\n"),
            "JOB:8: [train] stop_at_target: needs a test set, and this job has none");
  EXPECT_EQ(error_of("[job]\nmodel = m.ini\n[train]\nstop_at_target = true\n"),
            "JOB:4: [train] stop_at_target: needs a target_accuracy > 0");
  EXPECT_EQ(error_of("[job]\nmodel = m.ini\n[train]\nsteps = 5\n[background]\njob = bg.ini\ncalibrate_steps = 5\n"),
            "JOB:7: [background] calibrate_steps: 5 must be below the run's 5 steps (the foreground first runs that "
            "many alone)");
  EXPECT_EQ(error_of("[job]\nmodel = m.ini\ndevice = cuda\ncudnn_cache = algos.json\n"),
            "JOB:4: [job] cudnn_cache: needs cudnn_algorithms = measured (the other choices are the same on every run)");
  const std::string path = write_job("[job]\nmodel = m.ini\ndevice = cuda\ncudnn_algorithms = measured\n"
                                     "cudnn_cache = algos.json\n");
  EXPECT_EQ(load_job(path, {}).cudnn_cache, "/tmp/algos.json") << "relative to the job file";
  EXPECT_EQ(load_job(path, {"job.cudnn_cache=none"}).cudnn_cache, "none");
  std::remove(path.c_str());
  EXPECT_EQ(error_of("[job]\nmodel = m.ini\nprecision = tf32\n"),
            "JOB:3: [job] precision: tf32 needs device = cuda (the CPU has fp32 and bf16)");
  EXPECT_EQ(error_of("[job]\nmodel = m.ini\ndevice_calls = per_layer\n"),
            "JOB:3: [job] device_calls: per_layer needs device = cuda or twin (the CPU always runs layer by layer)");
  EXPECT_EQ(error_of("[job]\nmodel = m.ini\ndevice = cuda\ncuda_graphs = true\ndevice_calls = per_layer\n"),
            "JOB:4: [job] cuda_graphs: CUDA graphs capture the whole-model calls: needs device_calls = whole_model");
  const std::string per_layer = write_job("[job]\nmodel = m.ini\ndevice = twin\ndevice_calls = per_layer\n");
  EXPECT_FALSE(load_job(per_layer, {}).device_whole_model);
  EXPECT_TRUE(load_job(per_layer, {"job.device_calls=whole_model"}).device_whole_model);
  std::remove(per_layer.c_str());
}

// One key per meaning: learner_batch_size for the learners, batch_size for
// ssgd; batch_size still works for learners, with a note; both at once must agree.
TEST(Job, LearnerBatchSize) {
  const std::string job = "[job]\nmodel = m.ini\n[sync]\nstrategy = sma\n[train]\n";
  auto load = [](const std::string& text) {
    const std::string path = write_job(text);
    JobConfig c = load_job(path);
    std::remove(path.c_str());
    return c;
  };
  JobConfig c = load(job + "learner_batch_size = 16\n");
  EXPECT_EQ(c.batch_size, 16);
  EXPECT_EQ(c.batch_note, "");
  c = load(job + "batch_size = 8\n");
  EXPECT_EQ(c.batch_size, 8);
  EXPECT_EQ(c.batch_note, "note: [train] batch_size = 8 is read as each learner's batch (sync.strategy = sma); name it "
                          "[train] learner_batch_size");
  EXPECT_EQ(load(job + "epochs = 1\n").batch_note, "") << "nothing given: the default, no note";
  EXPECT_EQ(load(job + "batch_size = 16\nlearner_batch_size = 16\n").batch_size, 16);
  EXPECT_EQ(error_of(job + "batch_size = 32\nlearner_batch_size = 16\n"),
            "JOB:7: [train] learner_batch_size: 16 and batch_size 32 both give the learners' batch; keep "
            "learner_batch_size");
  EXPECT_EQ(error_of("[job]\nmodel = m.ini\n[train]\nlearner_batch_size = 16\n"),
            "JOB:4: [train] learner_batch_size: is for sma, shadow and local-sgd; ssgd takes batch_size");
}

// A diverged model (NaN test loss) ends the run with an error instead of exit 0.
TEST(Job, NonFiniteTestLossEndsTheRun) {
  JobConfig job;
  job.file = "j.ini";
  TrainResult r;
  EXPECT_FALSE(record_evaluation(r, job, {10, 0.5, 0.8, 0.4}, "step", 0, 0, false));
  try {
    record_evaluation(r, job, {20, 1.0, 0.1, NAN}, "step", 0, 0, false);
    FAIL() << "a NaN test loss was recorded";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "j.ini: the test loss became nan at step 20 (epoch 1.00): the model diverged; lower [optimizer] lr or "
              "weight_decay");
  }
  EXPECT_EQ(r.evals.size(), 1u);
}

// docs/jobs.md and `burstpool keys` show each number's range.
TEST(Job, EveryNumberHasARangeInTheTable) {
  const std::string table = job_schema_markdown();
  EXPECT_NE(table.find("| [optimizer] | `lr` | `0.1` | learning rate | `(0, 100]` |"), std::string::npos);
  for (const JobKey& k : job_schema()) {
    const std::string unit = k.unit;
    const bool numeric = unit != "boolean" && unit != "path" && unit != "text" && unit != "HDF5 path" &&
                         unit.find('|') == std::string::npos && unit != "sgd";
    EXPECT_EQ(numeric, *k.range != 0) << "[" << k.section << "] " << k.key << " (" << unit << ")";
  }
}

// docs/jobs.md must list every key the schema knows, so no key goes undocumented.
TEST(Job, EveryKeyIsDocumented) {
  std::ifstream in(fmt::format("{}/docs/jobs.md", BURSTPOOL_SOURCE_DIR));
  ASSERT_TRUE(in) << "docs/jobs.md missing";
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find(job_schema_markdown()), std::string::npos)
      << "docs/jobs.md does not contain the current key table; regenerate it with 'burstpool keys'";
}

}  // namespace
}  // namespace burstpool
