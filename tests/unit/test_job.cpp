#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "burstpool/error.hpp"
#include "burstpool/job.hpp"

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
            "JOB:4: [train] batch_size: -3 is below the minimum 1");
  EXPECT_EQ(error_of("[job]\nmodel = m.ini\n[optimizer]\nlr = fast\n"), "JOB:4: [optimizer] lr: 'fast' is not a number");
  EXPECT_EQ(error_of("[job]\nmodel = m.ini\n[data]\nsource = imagenet\n"),
            "JOB:4: [data] source: 'imagenet' is not one of: fashion-mnist, hdf5, synthetic");
  EXPECT_EQ(error_of("[job]\nseed = 1\n"), "JOB: [job] model: missing (required)");
  EXPECT_EQ(error_of("[jb]\nmodel = m.ini\n"), "JOB:2: unknown section [jb]");
  EXPECT_EQ(error_of("[job]\nmodel = m.ini\n", {"train.steps=x"}),
            "--set train.steps=x: [train] steps: 'x' is not an integer");
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
