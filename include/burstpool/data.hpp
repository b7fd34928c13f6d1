#pragma once
// Training data held in memory as normalised float32 samples plus int labels,
// and the seeded sampler that orders it.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "burstpool/tensor.hpp"

namespace burstpool {

// The images of an HDF5 data file read on demand (data.cpp): the samples
// asked for, as hyperslabs, normalised as a whole load would normalise them.
class ImageRows;

// Labels are always held in memory (4 bytes a sample); images either are too
// (`images`), or stay in their HDF5 file and each gather reads the samples it
// asks for (`rows`), so that a rank holds only what it trains on.
struct Dataset {
  std::string source;            // file(s) or "synthetic", for messages
  Shape sample;                  // per-sample (n = 1)
  std::vector<float> images;     // size() * sample.count(); empty when `rows` reads them
  std::vector<int32_t> labels;   // size()
  int classes = 0;               // 1 + max label
  std::shared_ptr<const ImageRows> rows;  // set: images are read from the file by gather()

  size_t size() const { return labels.size(); }
};

struct Normalisation {
  float mean = 0.0f, std = 1.0f;  // x' = (x - mean) / std, after scaling bytes to [0, 1]
};

// How an HDF5 data file's images are held: all in memory (read once, at the
// start), or read per batch, each rank only the samples it trains on.
enum class ImageReading { whole, batches };

// IDX files (as in the MNIST family), optionally gzip-compressed.
Dataset load_idx(const std::string& images_path, const std::string& labels_path, Normalisation norm);
// An HDF5 file with an images dataset (N,H,W) or (N,C,H,W), uint8 (scaled to
// [0,1]) or float32/float64, and a labels dataset (N) of integers in [0, 2^31 - 2].
// Refused, naming the file and dataset: other types, a virtual dataset whose
// source file is missing, and (with check_finite) NaN or infinite pixels.
// With ImageReading::batches only the labels are read now; gather() reads the
// images it is asked for (and checks those for NaN and infinities), giving
// the same floats bit for bit as a whole read.
Dataset load_hdf5_dataset(const std::string& path, const std::string& images, const std::string& labels,
                          Normalisation norm, bool check_finite = true, ImageReading reading = ImageReading::whole);
// The bytes an HDF5 data file's images take in memory as float32; 0 when it
// cannot be read (its loader says why).
uint64_t hdf5_image_bytes(const std::string& path, const std::string& dataset);
// How many samples a data file holds, from the IDX header alone or the HDF5
// dataset's first dimension; 0 when it cannot be read (its loader says why).
// For the memory estimate made before loading.
size_t idx_sample_count(const std::string& path);
size_t hdf5_sample_count(const std::string& path, const std::string& dataset);
// Learnable synthetic data: one random template per class (fixed by `seed`)
// plus noise drawn from (seed, stream): use stream 0 for training, 1 for test.
Dataset make_synthetic(Shape sample, int classes, size_t count, uint64_t seed, uint64_t stream);

// Seeded, deterministic shuffling. Epoch e visits a permutation that depends
// only on (seed, e); batch b of epoch e is positions [b*B, (b+1)*B) of it.
// The last partial batch of an epoch is dropped so every step has B samples.
class BatchSampler {
 public:
  BatchSampler(size_t dataset_size, int batch, uint64_t seed);
  int64_t steps_per_epoch() const { return static_cast<int64_t>(size_ / batch_); }
  // Sample indices of global step `step` (epoch = step / steps_per_epoch).
  const std::vector<uint32_t>& batch(int64_t step);

 private:
  size_t size_;
  int batch_;
  uint64_t seed_;
  int64_t epoch_ = -1;
  std::vector<uint32_t> order_, current_;
};

// Copies `count` samples (by index) into contiguous images and labels; either
// may be null. Safe to call from several threads on the same Dataset.
void gather(const Dataset& data, const uint32_t* indices, int count, float* images, int32_t* labels);

}  // namespace burstpool
