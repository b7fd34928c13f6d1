#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "burstpool/algorithm_cache.hpp"
#include "burstpool/json_io.hpp"

namespace burstpool {
namespace {

std::string fresh_path(const char* name) {
  const std::string path = ::testing::TempDir() + name + std::to_string(getpid()) + ".json";
  std::remove(path.c_str());
  return path;
}

// The file's life: written as choices are measured, reused by a later run on
// the same GPU and cuDNN, refused (one line naming both) and rebuilt on
// another GPU or cuDNN version.
TEST(AlgorithmCache, WrittenReusedAndRebuiltForAnotherGpuOrCudnn) {
  const std::string path = fresh_path("cudnn_cache");
  {
    AlgorithmCache first(path, "NVIDIA H200", 91000, true);
    EXPECT_EQ(first.refused(), "");
    EXPECT_FALSE(first.find("n32c3h32w32 fp32"));
    first.add("n32c3h32w32 fp32", {1, 1, 3, 3, 3, 3});
    first.add("n32c64h16w16 tf32", {6, 4, 5, 1, 0, 1});
    EXPECT_EQ(first.added(), 2);
  }
  AlgorithmCache again(path, "NVIDIA H200", 91000, true);
  EXPECT_EQ(again.refused(), "");
  EXPECT_EQ(again.entries(), 2u);
  EXPECT_EQ(again.find("n32c64h16w16 tf32"), (AlgorithmChoice{6, 4, 5, 1, 0, 1}));
  EXPECT_FALSE(again.find("n32c64h16w16 fp32")) << "another precision is another entry";
  EXPECT_EQ(again.reused(), 1);

  AlgorithmCache other_gpu(path, "NVIDIA A100-SXM4-80GB", 91000, true);
  EXPECT_EQ(other_gpu.refused(), path + ": made on NVIDIA H200 with cuDNN 91000, this is NVIDIA A100-SXM4-80GB "
                                        "with cuDNN 91000");
  EXPECT_EQ(other_gpu.entries(), 0u);
  other_gpu.add("n32c3h32w32 fp32", {0, 0, 0, 3, 3, 3});  // rebuilt for this GPU
  const nlohmann::json rebuilt = read_json(path, "cudnn cache");
  EXPECT_EQ(rebuilt["gpu"], "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(rebuilt["entries"].size(), 1u);

  AlgorithmCache other_cudnn(path, "NVIDIA A100-SXM4-80GB", 90800, true);
  EXPECT_NE(other_cudnn.refused().find("with cuDNN 91000, this is NVIDIA A100-SXM4-80GB with cuDNN 90800"),
            std::string::npos);
  EXPECT_FALSE(other_cudnn.find("n32c3h32w32 fp32"));
  std::remove(path.c_str());
}

TEST(AlgorithmCache, AnUnreadableFileIsRefusedAndANonWriterLeavesTheFileAlone) {
  const std::string path = fresh_path("cudnn_cache_bad");
  std::ofstream(path) << "{\"format\": \"burstpool cudnn algorithm cache\", \"version\": 2, \"gpu\": \"g\", "
                         "\"cudnn\": 1, \"entries\": {\"k\": [1, 2]}}\n";
  AlgorithmCache bad(path, "g", 1, false);
  EXPECT_NE(bad.refused().find(path), std::string::npos) << bad.refused();
  EXPECT_EQ(bad.entries(), 0u) << "a half-valid file is refused whole";
  bad.add("k", {1, 2, 3, 3, 3, 3});
  EXPECT_EQ(bad.find("k"), (AlgorithmChoice{1, 2, 3, 3, 3, 3})) << "kept in memory";
  EXPECT_EQ(read_json(path, "cudnn cache")["entries"]["k"].size(), 2u) << "not the writer: the file is as it was";

  // Version 1 kept the algorithms without the math type each was timed
  // with: such a file is refused and measured again, not half used.
  std::ofstream(path) << "{\"format\": \"burstpool cudnn algorithm cache\", \"version\": 1, \"gpu\": \"g\", "
                         "\"cudnn\": 1, \"entries\": {\"k\": [1, 2, 3]}}\n";
  AlgorithmCache old(path, "g", 1, false);
  EXPECT_NE(old.refused().find("not a burstpool cudnn cache of version 2"), std::string::npos) << old.refused();
  EXPECT_FALSE(old.find("k"));

  std::ofstream(path) << "not json";
  AlgorithmCache garbage(path, "g", 1, true);
  EXPECT_NE(garbage.refused().find("not valid JSON"), std::string::npos) << garbage.refused();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace burstpool
