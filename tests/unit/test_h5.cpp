// The HDF5 layer's guard against the library crashing on a corrupt file: while
// a file opened for reading is open, a crash signal ends the process with one
// line naming the file and exit status 1; once it closes, crashes are crashes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>

#include "burstpool/model_io.hpp"
#include "h5.hpp"

namespace burstpool {
namespace {

std::string model_file() {
  const std::string path = testing::TempDir() + "h5_guard_" + std::to_string(getpid()) + ".h5";
  save_model_hdf5(load_model_spec(std::string(BURSTPOOL_SOURCE_DIR) + "/jobs/models/mlp.ini"), path);
  return path;
}

TEST(H5CrashGuard, CrashWhileReadingNamesTheFile) {
  const std::string path = model_file();
  EXPECT_EXIT(
      {
        h5::File f = h5::File::open_read(path);
        std::raise(SIGSEGV);
      },
      testing::ExitedWithCode(1), "burstpool: error: .*h5_guard_[0-9]+\\.h5: corrupt HDF5 file: the HDF5 library crashed");
  std::remove(path.c_str());
}

TEST(H5CrashGuard, HandlersRestoredWhenTheFileCloses) {
  const std::string path = model_file();
  EXPECT_EXIT(
      {
        { h5::File f = h5::File::open_read(path); }
        std::raise(SIGSEGV);
      },
      // By a signal: SIGSEGV itself, or SIGABRT where a sanitizer's handler reports it first.
      [](int status) { return WIFSIGNALED(status); }, "");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace burstpool
