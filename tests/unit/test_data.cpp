#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstring>
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

// Writes a file with an images dataset (n x 4 values of `itype`) and a labels
// dataset (n values of `ltype`), both from doubles.
// With `chunked`, images are stored in compressed chunks of 3 samples.
void write_set(const std::string& path, hid_t itype, const std::vector<double>& pixels, hid_t ltype,
               const std::vector<double>& labels, bool chunked = false) {
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t idims[3] = {labels.size(), 2, 2}, ldims[1] = {labels.size()}, chunk[3] = {3, 2, 2};
  hid_t s1 = H5Screate_simple(3, idims, nullptr), s2 = H5Screate_simple(1, ldims, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (chunked) H5Pset_chunk(dcpl, 3, chunk), H5Pset_deflate(dcpl, 4);
  hid_t d1 = H5Dcreate2(f, "images", itype, s1, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Pclose(dcpl);
  hid_t d2 = H5Dcreate2(f, "labels", ltype, s2, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d1, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, pixels.data());
  H5Dwrite(d2, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels.data());
  H5Dclose(d1), H5Dclose(d2), H5Sclose(s1), H5Sclose(s2), H5Fclose(f);
}

std::string load_error(const std::string& path, bool check_finite = true) {
  try {
    load_hdf5_dataset(path, "images", "labels", {}, check_finite);
  } catch (const Error& e) {
    return std::string(e.what()).substr(path.size());
  }
  return "no error";
}

// Types, labels and values are checked at load, naming the file and dataset.
TEST(Hdf5Dataset, RefusesWhatWouldTrainWrongly) {
  const std::string path = temp_path("checked.h5");
  const std::vector<double> px(8, 0.5), two = {0, 1};
  write_set(path, H5T_IEEE_F32LE, px, H5T_STD_I64LE, two);
  EXPECT_EQ(load_error(path), "no error");
  write_set(path, H5T_IEEE_F64LE, px, H5T_STD_U16LE, two);
  EXPECT_EQ(load_error(path), "no error") << "float64 images, any integer labels";
  write_set(path, H5T_STD_I32LE, std::vector<double>(8, 200), H5T_STD_I32LE, two);
  EXPECT_EQ(load_error(path),
            ": dataset 'images' is int32; images must be uint8 (scaled to [0, 1]) or float32/float64 (used as they are)");
  write_set(path, H5T_STD_U16LE, px, H5T_STD_I32LE, two);
  EXPECT_EQ(load_error(path).substr(0, 29), ": dataset 'images' is uint16;");
  write_set(path, H5T_IEEE_F32LE, px, H5T_IEEE_F32LE, {0, 0.5});
  EXPECT_EQ(load_error(path), ": dataset 'labels' is float32; labels must be integers (class indices)");
  write_set(path, H5T_IEEE_F32LE, px, H5T_STD_I64LE, {0, 1099511627776.0});
  EXPECT_EQ(load_error(path), ": label 1099511627776 of sample 1 is not a class index (0 to 2147483646)");
  write_set(path, H5T_IEEE_F32LE, px, H5T_STD_I32LE, {-1, 1});
  EXPECT_EQ(load_error(path), ": label -1 of sample 0 is not a class index (0 to 2147483646)");
  std::vector<double> nan = px;
  nan[6] = NAN;
  write_set(path, H5T_IEEE_F32LE, nan, H5T_STD_I32LE, two);
  EXPECT_EQ(load_error(path),
            ": dataset 'images' holds nan in sample 1 (set [data] check_finite = false to skip this check)");
  EXPECT_EQ(load_error(path, false), "no error") << "the check can be skipped for very large files";
  std::remove(path.c_str());
}

// Read per batch, any samples in any order (repeats included) come out as the
// whole read's floats, bit for bit, for bytes (scaled), float32 and float64
// alike, stored contiguous (read with pread) or in compressed chunks (read
// through HDF5), normalised the same way; only the labels are held.
TEST(Hdf5Dataset, BatchReadsEqualTheWholeRead) {
  const std::string path = temp_path("rows.h5");
  const int n = 37;
  std::vector<double> labels(n), pixels(n * 4);
  for (int i = 0; i < n; ++i) labels[i] = i % 5;
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<double>((i * 37) % 256);
  const Normalisation norm{0.2860f, 0.3530f};
  for (const auto& [type, chunked] : {std::pair{H5T_STD_U8LE, false}, std::pair{H5T_IEEE_F32LE, false},
                                       std::pair{H5T_IEEE_F64LE, false}, std::pair{H5T_STD_U8LE, true}}) {
    write_set(path, type, pixels, H5T_STD_I32LE, labels, chunked);
    const Dataset whole = load_hdf5_dataset(path, "images", "labels", norm);
    const Dataset rows = load_hdf5_dataset(path, "images", "labels", norm, true, ImageReading::batches);
    EXPECT_TRUE(rows.images.empty()) << "per-batch reading holds no images";
    EXPECT_EQ(rows.labels, whole.labels);
    EXPECT_EQ(rows.classes, 5);
    ASSERT_EQ(rows.sample, whole.sample);
    const std::vector<uint32_t> idx = {36, 0, 5, 6, 7, 2, 5, 35, 1};  // runs, gaps, a repeat, both ends
    const int k = static_cast<int>(idx.size());
    std::vector<float> a(k * 4), b(k * 4);
    std::vector<int32_t> la(k), lb(k);
    gather(whole, idx.data(), k, a.data(), la.data());
    gather(rows, idx.data(), k, b.data(), lb.data());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "type " << type << " chunked "
                                                                              << chunked;
    EXPECT_EQ(la, lb);
  }
  std::remove(path.c_str());
}

// Read per batch, a NaN is refused when its sample is first drawn, naming it.
TEST(Hdf5Dataset, BatchReadsRefuseNaNWhenDrawn) {
  const std::string path = temp_path("rows_nan.h5");
  std::vector<double> px(12, 0.5);
  px[9] = NAN;  // sample 2
  write_set(path, H5T_IEEE_F32LE, px, H5T_STD_I32LE, {0, 1, 0});
  const Dataset d = load_hdf5_dataset(path, "images", "labels", {}, true, ImageReading::batches);
  std::vector<float> out(8);
  const uint32_t clean[2] = {1, 0}, bad[2] = {0, 2};
  EXPECT_NO_THROW(gather(d, clean, 2, out.data(), nullptr));
  try {
    gather(d, bad, 2, out.data(), nullptr);
    ADD_FAILURE() << "a NaN sample was read";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": dataset 'images' holds nan in sample 2 (set [data] check_finite = "
                                            "false to skip this check)");
  }
  const Dataset unchecked = load_hdf5_dataset(path, "images", "labels", {}, false, ImageReading::batches);
  EXPECT_NO_THROW(gather(unchecked, bad, 2, out.data(), nullptr));
  std::remove(path.c_str());
}

// A virtual dataset whose source file is gone would read as zeros (its fill value).
TEST(Hdf5Dataset, RefusesAVirtualDatasetWithoutItsSource) {
  const std::string source = temp_path("source.h5"), path = temp_path("virtual.h5");
  write_set(source, H5T_IEEE_F32LE, std::vector<double>(8, 0.5), H5T_STD_I32LE, {0, 1});
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t idims[3] = {2, 2, 2}, ldims[1] = {2};
  hid_t vs = H5Screate_simple(3, idims, nullptr), src = H5Screate_simple(3, idims, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_virtual(dcpl, vs, source.c_str(), "images", src);
  hid_t d1 = H5Dcreate2(f, "images", H5T_IEEE_F32LE, vs, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  hid_t ls = H5Screate_simple(1, ldims, nullptr);
  hid_t d2 = H5Dcreate2(f, "labels", H5T_STD_I32LE, ls, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const int labels[2] = {0, 1};
  H5Dwrite(d2, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels);
  H5Dclose(d1), H5Dclose(d2), H5Pclose(dcpl), H5Sclose(vs), H5Sclose(src), H5Sclose(ls), H5Fclose(f);
  EXPECT_EQ(load_error(path), "no error") << "the source is there";
  std::remove(source.c_str());
  EXPECT_EQ(load_error(path), fmt::format(": dataset 'images' is virtual and its source file {} is missing", source));
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
