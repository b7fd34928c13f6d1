#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <set>

#include "burstpool/data.hpp"
#include "burstpool/error.hpp"

namespace burstpool {
namespace {

std::string temp_path(const std::string& name) { return fmt::format("/tmp/burstpool_data_{}_{}", getpid(), name); }

std::vector<unsigned char> idx_bytes(std::vector<uint32_t> dims, const std::vector<unsigned char>& data) {
  std::vector<unsigned char> b = {0, 0, 8, static_cast<unsigned char>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<unsigned char>(d >> s));
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

void write_gz(const std::string& path, const std::vector<unsigned char>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

TEST(Idx, ReadsGzipAndPlainAndNormalises) {
  std::vector<unsigned char> pixels = {0, 255, 51, 102, 0, 0, 0, 255};
  const std::string images = temp_path("img.gz"), labels = temp_path("lab");
  write_gz(images, idx_bytes({2, 2, 2}, pixels));
  auto lb = idx_bytes({2}, {3, 1});
  std::ofstream(labels, std::ios::binary).write(reinterpret_cast<const char*>(lb.data()), lb.size());
  Dataset d = load_idx(images, labels, {0.5f, 0.25f});
  EXPECT_EQ(d.size(), 2u);
  EXPECT_EQ(d.sample, (Shape{1, 1, 2, 2}));
  EXPECT_EQ(d.classes, 4);
  EXPECT_EQ(d.labels[0], 3);
  EXPECT_NEAR(d.images[1], (1.0f - 0.5f) / 0.25f, 1e-6);
  EXPECT_NEAR(d.images[2], (0.2f - 0.5f) / 0.25f, 1e-6);
  std::remove(images.c_str());
  std::remove(labels.c_str());
}

TEST(Idx, TruncatedFileNamesTheFile) {
  const std::string images = temp_path("short.gz"), labels = temp_path("short_labels");
  write_gz(images, idx_bytes({2, 2, 2}, {1, 2, 3}));  // 3 of 8 bytes
  write_gz(labels, idx_bytes({2}, {0, 1}));
  try {
    load_idx(images, labels, {});
    FAIL() << "truncated IDX accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(images + ": truncated IDX data"), std::string::npos) << e.what();
  }
  std::remove(images.c_str());
  std::remove(labels.c_str());
}

TEST(Idx, MissingFileNamesTheFile) {
  try {
    load_idx("/nonexistent/images.gz", "/nonexistent/labels.gz", {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/images.gz"), std::string::npos);
  }
}

TEST(Hdf5Dataset, ReadsBytesAndLabels) {
  const std::string path = temp_path("set.h5");
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t idims[4] = {3, 1, 2, 2}, ldims[1] = {3};
  unsigned char pixels[12] = {0, 255, 0, 255, 10, 20, 30, 40, 1, 2, 3, 4};
  int labels[3] = {0, 2, 1};
  hid_t s1 = H5Screate_simple(4, idims, nullptr), s2 = H5Screate_simple(1, ldims, nullptr);
  hid_t d1 = H5Dcreate2(f, "images", H5T_STD_U8LE, s1, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hid_t d2 = H5Dcreate2(f, "labels", H5T_STD_I32LE, s2, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d1, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, pixels);
  H5Dwrite(d2, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels);
  H5Dclose(d1), H5Dclose(d2), H5Sclose(s1), H5Sclose(s2), H5Fclose(f);
  Dataset d = load_hdf5_dataset(path, "images", "labels", {});
  EXPECT_EQ(d.size(), 3u);
  EXPECT_EQ(d.sample, (Shape{1, 1, 2, 2}));
  EXPECT_FLOAT_EQ(d.images[1], 1.0f);
  EXPECT_EQ(d.labels[1], 2);
  EXPECT_THROW(load_hdf5_dataset(path, "pixels", "labels", {}), Error);
  std::remove(path.c_str());
}

TEST(Synthetic, DeterministicAndShaped) {
  Dataset a = make_synthetic({1, 3, 4, 4}, 5, 20, 9, 0), b = make_synthetic({1, 3, 4, 4}, 5, 20, 9, 0);
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.images.size(), 20u * 48);
  Dataset test = make_synthetic({1, 3, 4, 4}, 5, 20, 9, 1);
  EXPECT_NE(a.images, test.images);
}

TEST(BatchSampler, SeededPermutationPerEpoch) {
  BatchSampler s1(10, 3, 42), s2(10, 3, 42), other(10, 3, 43);
  EXPECT_EQ(s1.steps_per_epoch(), 3);
  std::set<uint32_t> seen;
  std::vector<uint32_t> epoch0;
  for (int step = 0; step < 3; ++step) {
    auto b = s1.batch(step);
    EXPECT_EQ(b, s2.batch(step));
    seen.insert(b.begin(), b.end());
    epoch0.insert(epoch0.end(), b.begin(), b.end());
  }
  EXPECT_EQ(seen.size(), 9u);  // no repeats within an epoch; one sample dropped
  std::vector<uint32_t> epoch1;
  for (int step = 3; step < 6; ++step) {
    auto b = s1.batch(step);
    epoch1.insert(epoch1.end(), b.begin(), b.end());
  }
  EXPECT_NE(epoch0, epoch1);
  std::vector<uint32_t> o;
  for (int step = 0; step < 3; ++step) {
    auto b = other.batch(step);
    o.insert(o.end(), b.begin(), b.end());
  }
  EXPECT_NE(epoch0, o);
  // Jumping straight to a step (as a resumed run does) gives the same batch.
  BatchSampler fresh(10, 3, 42);
  EXPECT_EQ(fresh.batch(4), s2.batch(4));
}

}  // namespace
}  // namespace burstpool
