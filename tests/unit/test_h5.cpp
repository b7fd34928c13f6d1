// The HDF5 layer's guard against the library crashing on a corrupt file: while
// a file opened for reading is open, a crash signal ends the process with one
// line naming the file and exit status 1; once it closes, crashes are crashes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>

#include "burstpool/error.hpp"
#include "burstpool/model_io.hpp"
#include "io/h5.hpp"

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

// A chunked dataset claims 2^40 floats but stores none (HDF5 allocates chunks
// only when written): reading it is refused by its claimed size, not by a
// failed allocation.
TEST(H5Read, ShapeBeyondFreeMemoryIsRefusedBeforeAllocating) {
  const std::string path = testing::TempDir() + "h5_huge_" + std::to_string(getpid()) + ".h5";
  {
    h5::File f = h5::File::create(path);
    const hsize_t dims[1] = {hsize_t{1} << 40}, chunk[1] = {1024};
    hid_t space = H5Screate_simple(1, dims, nullptr), plist = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(plist, 1, chunk);
    hid_t ds = H5Dcreate2(f.id(), "huge", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, plist, H5P_DEFAULT);
    ASSERT_GE(ds, 0);
    H5Dclose(ds);
    H5Pclose(plist);
    H5Sclose(space);
    f.close();
  }
  try {
    h5::read_floats(h5::File::open_read(path), "huge");
    FAIL() << "a 4 TiB dataset was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dataset 'huge' claims shape 1099511627776 (1099511627776 values), more than "
                                         "the memory free here holds"),
              std::string::npos)
        << e.what();
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace burstpool
