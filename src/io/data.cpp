#include "burstpool/data.hpp"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>

#include "layers/kernels.hpp"
#include "burstpool/error.hpp"
#include "burstpool/files.hpp"
#include "io/h5.hpp"

namespace burstpool {
namespace {

// Reads a whole (possibly gzip-compressed) file; zlib reads plain files too.
std::vector<unsigned char> read_all(const std::string& path) {
  require_regular_file(path, "data");
  // Far above any IDX set (Fashion-MNIST's training images are 47 MB), far
  // below a decompression bomb's output.
  constexpr size_t kMaxBytes = size_t{4} << 30;
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw Error(fmt::format("{}: cannot open data file (missing or unreadable)", path));
  std::vector<unsigned char> out;
  unsigned char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) {
    out.insert(out.end(), buf, buf + n);
    if (out.size() > kMaxBytes) {
      gzclose(f);
      throw Error(fmt::format("{}: more than {} bytes of IDX data; not a data set this reader takes", path, kMaxBytes));
    }
  }
  int err = 0;
  const char* msg = gzerror(f, &err);
  bool failed = n < 0 || (err != Z_OK && err != Z_STREAM_END);
  std::string what = failed ? msg : "";
  gzclose(f);
  if (failed) throw Error(fmt::format("{}: read error ({}); truncated or corrupt file?", path, what));
  return out;
}

uint32_t be32(const unsigned char* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

struct Idx {
  std::vector<uint32_t> dims;
  const unsigned char* data;
  size_t count;
};

// IDX: magic 0x00 0x00 <type 0x08 = ubyte> <ndims>, big-endian dims, then data.
Idx parse_idx(const std::vector<unsigned char>& bytes, const std::string& path) {
  if (bytes.size() < 4 || bytes[0] != 0 || bytes[1] != 0)
    throw Error(fmt::format("{}: not an IDX file (bad magic number)", path));
  if (bytes[2] != 0x08) throw Error(fmt::format("{}: IDX element type 0x{:02x} is not unsigned byte", path, bytes[2]));
  Idx idx;
  const int nd = bytes[3];
  if (nd < 1 || bytes.size() < 4 + 4u * nd) throw Error(fmt::format("{}: truncated IDX header", path));
  idx.count = 1;
  for (int i = 0; i < nd; ++i) {
    idx.dims.push_back(be32(&bytes[4 + 4 * i]));
    idx.count *= idx.dims.back();
  }
  const size_t header = 4 + 4u * nd;
  if (bytes.size() - header != idx.count)
    throw Error(fmt::format("{}: truncated IDX data: header promises {} bytes, file has {}", path, idx.count,
                            bytes.size() - header));
  idx.data = bytes.data() + header;
  return idx;
}

// Labels from any integer width: each in [0, 2^31 - 2], checked in 64 bits
// before narrowing, so the class count (largest + 1) fits an int.
template <class T>
void set_labels(Dataset& d, const std::vector<T>& labels) {
  long long largest = -1;
  d.labels.resize(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    const long long l = static_cast<long long>(labels[i]);
    if (l < 0 || l > std::numeric_limits<int32_t>::max() - 1)
      throw Error(fmt::format("{}: label {} of sample {} is not a class index (0 to {})", d.source, l, i,
                              std::numeric_limits<int32_t>::max() - 1));
    largest = std::max(largest, l);
    d.labels[i] = static_cast<int32_t>(l);
  }
  d.classes = static_cast<int>(largest + 1);
}

// Samples with NaN or infinite values would train with a finite-looking loss
// or poison the model quietly.
// `sample_of(row)` names the sample that row `row` of `v` (rows of
// per_sample values) holds: its index in the file.
template <class SampleOf>
void require_finite(const std::vector<float>& v, size_t per_sample, const std::string& path, const std::string& name,
                    SampleOf sample_of) {
  const auto bad = std::find_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
  if (bad != v.end())
    throw Error(fmt::format("{}: dataset '{}' holds {} in sample {} (set [data] check_finite = false to skip this "
                            "check)",
                            path, name, *bad,
                            sample_of(static_cast<size_t>(bad - v.begin()) / std::max<size_t>(1, per_sample))));
}
void require_finite(const std::vector<float>& v, size_t per_sample, const std::string& path, const std::string& name) {
  require_finite(v, per_sample, path, name, [](size_t row) { return row; });
}

void normalise(float* v, size_t count, float scale, Normalisation norm) {
  const float a = scale / norm.std, b = -norm.mean / norm.std;
  for (size_t i = 0; i < count; ++i) v[i] = v[i] * a + b;
}
void normalise(std::vector<float>& v, float scale, Normalisation norm) { normalise(v.data(), v.size(), scale, norm); }

}  // namespace

class ImageRows {
 public:
  ImageRows(std::string path, std::string dataset, size_t per_sample, float scale, Normalisation norm, bool check_finite)
      : path_(std::move(path)), dataset_(std::move(dataset)), per_(per_sample), scale_(scale), norm_(norm),
        check_finite_(check_finite) {}

  // The images of samples indices[0..count) into out, in that order. The file
  // is opened for each read: while an HDF5 file is open its crash note stands
  // (h5.hpp), and training must not run under it.
  void read(const uint32_t* indices, int count, float* out) const {
    if (count <= 0) return;
    // HDF5 returns a selection in file order: read each sample once, in
    // order, as runs of consecutive rows, then place them as asked.
    std::vector<uint32_t> sorted(indices, indices + count);
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    std::vector<h5::Rows> runs;
    for (uint32_t i : sorted) {
      if (!runs.empty() && runs.back().first + runs.back().count == i) ++runs.back().count;
      else runs.push_back({i, 1});
    }
    std::vector<float> rows(sorted.size() * per_);
    {
      std::lock_guard<std::mutex> lock(mutex_);  // one HDF5 call at a time, whatever the library's build
      h5::read_float_rows(h5::File::open_read(path_), dataset_, runs, rows.data());
    }
    if (check_finite_) require_finite(rows, per_, path_, dataset_, [&](size_t row) { return sorted[row]; });
    for (int i = 0; i < count; ++i) {
      const size_t at = std::lower_bound(sorted.begin(), sorted.end(), indices[i]) - sorted.begin();
      std::memcpy(out + i * per_, rows.data() + at * per_, per_ * sizeof(float));
    }
    normalise(out, count * per_, scale_, norm_);
  }

 private:
  std::string path_, dataset_;
  size_t per_;
  float scale_;
  Normalisation norm_;
  bool check_finite_;
  mutable std::mutex mutex_;
};

size_t idx_sample_count(const std::string& path) {
  try {
    require_regular_file(path, "data");  // never a device node or a pipe, which could block
  } catch (const Error&) {
    return 0;
  }
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return 0;
  unsigned char header[8];
  const bool whole = gzread(f, header, sizeof header) == static_cast<int>(sizeof header);
  gzclose(f);
  return whole && header[0] == 0 && header[1] == 0 ? be32(header + 4) : 0;
}

size_t hdf5_sample_count(const std::string& path, const std::string& dataset) {
  try {
    require_regular_file(path, "data");
    const std::vector<hsize_t> dims = h5::dims_of(h5::File::open_read(path), dataset);
    return dims.empty() ? 0 : static_cast<size_t>(dims[0]);
  } catch (const Error&) {
    return 0;
  }
}

Dataset load_idx(const std::string& images_path, const std::string& labels_path, Normalisation norm) {
  std::vector<unsigned char> ib = read_all(images_path), lb = read_all(labels_path);
  Idx images = parse_idx(ib, images_path), labels = parse_idx(lb, labels_path);
  if (images.dims.size() != 3) throw Error(fmt::format("{}: expected 3 IDX dimensions (N,H,W)", images_path));
  if (labels.dims.size() != 1) throw Error(fmt::format("{}: expected 1 IDX dimension (N)", labels_path));
  if (images.dims[0] != labels.dims[0])
    throw Error(fmt::format("{} has {} images but {} has {} labels", images_path, images.dims[0], labels_path,
                            labels.dims[0]));
  Dataset d;
  d.source = images_path;
  d.sample = {1, 1, static_cast<int>(images.dims[1]), static_cast<int>(images.dims[2])};
  d.images.assign(images.data, images.data + images.count);
  normalise(d.images, 1.0f / 255.0f, norm);
  set_labels(d, std::vector<unsigned char>(labels.data, labels.data + labels.count));
  return d;
}

uint64_t hdf5_image_bytes(const std::string& path, const std::string& dataset) {
  try {
    require_regular_file(path, "data");
    uint64_t bytes = sizeof(float);
    for (hsize_t d : h5::dims_of(h5::File::open_read(path), dataset)) bytes *= d;
    return bytes;
  } catch (const Error&) {
    return 0;
  }
}

Dataset load_hdf5_dataset(const std::string& path, const std::string& images, const std::string& labels,
                          Normalisation norm, bool check_finite, ImageReading reading) {
  h5::File f = h5::File::open_read(path);
  for (const std::string& name : {images, labels}) {
    const std::vector<std::string> missing = h5::missing_virtual_sources(f, name);
    if (!missing.empty())
      throw Error(fmt::format("{}: dataset '{}' is virtual and its source file {} is missing", path, name,
                              missing.front()));
  }
  const std::string itype = h5::type_name(f, images), ltype = h5::type_name(f, labels);
  if (itype != "uint8" && itype != "float32" && itype != "float64")
    throw Error(fmt::format("{}: dataset '{}' is {}; images must be uint8 (scaled to [0, 1]) or float32/float64 "
                            "(used as they are)",
                            path, images, itype));
  if (ltype.find("int") == std::string::npos)
    throw Error(fmt::format("{}: dataset '{}' is {}; labels must be integers (class indices)", path, labels, ltype));
  const std::vector<hsize_t> idims = h5::dims_of(f, images);
  if (idims.size() != 3 && idims.size() != 4)
    throw Error(fmt::format("{}: dataset '{}' must be (N,H,W) or (N,C,H,W), it has {} dimensions", path, images,
                            idims.size()));
  std::vector<hsize_t> ldims;
  std::vector<long long> l = h5::read_int64s(f, labels, &ldims);
  if (ldims.size() != 1 || ldims[0] != idims[0])
    throw Error(fmt::format("{}: dataset '{}' must be ({}) to match '{}'", path, labels, idims[0], images));
  Dataset d;
  d.source = path;
  if (idims.size() == 3)
    d.sample = {1, 1, static_cast<int>(idims[1]), static_cast<int>(idims[2])};
  else
    d.sample = {1, static_cast<int>(idims[1]), static_cast<int>(idims[2]), static_cast<int>(idims[3])};
  set_labels(d, l);
  const bool bytes = itype == "uint8";
  const float scale = bytes ? 1.0f / 255.0f : 1.0f;
  if (reading == ImageReading::batches) {
    d.rows = std::make_shared<ImageRows>(path, images, d.sample.count(), scale, norm, check_finite && !bytes);
    return d;
  }
  d.images = h5::read_floats(f, images);
  if (check_finite && !bytes) require_finite(d.images, d.sample.count(), path, images);
  normalise(d.images, scale, norm);
  return d;
}

Dataset make_synthetic(Shape sample, int classes, size_t count, uint64_t seed, uint64_t stream) {
  BP_CHECK(classes >= 2 && count >= 1, "synthetic data needs >= 2 classes and >= 1 sample");
  Dataset d;
  d.source = "synthetic";
  d.sample = sample.with_batch(1);
  d.classes = classes;
  const size_t per = d.sample.count();
  std::vector<float> templates(per * classes);
  for (size_t i = 0; i < templates.size(); ++i) templates[i] = 2.0f * cpu::uniform01(cpu::mix64(seed) + i) - 1.0f;
  d.images.resize(per * count);
  d.labels.resize(count);
  const uint64_t noise_key = cpu::mix64(seed ^ cpu::mix64(stream + 0x5EED5EEDull));
  for (size_t s = 0; s < count; ++s) {
    const int label = static_cast<int>(cpu::mix64(noise_key + s) % classes);
    d.labels[s] = label;
    for (size_t e = 0; e < per; ++e) {
      // Sum of two uniforms: cheap, zero-mean noise of variance 1/6.
      const uint64_t k = cpu::mix64(noise_key ^ (s * 0x9E3779B97F4A7C15ull)) + e;
      const float noise = cpu::uniform01(k) + cpu::uniform01(k ^ 0xABCDEFull) - 1.0f;
      d.images[s * per + e] = templates[label * per + e] + noise;
    }
  }
  return d;
}

BatchSampler::BatchSampler(size_t dataset_size, int batch, uint64_t seed)
    : size_(dataset_size), batch_(batch), seed_(seed) {
  if (batch < 1 || static_cast<size_t>(batch) > dataset_size)
    throw Error(fmt::format("batch size {} must be between 1 and the training set size {}", batch, dataset_size));
  order_.resize(size_);
  current_.resize(batch_);
}

const std::vector<uint32_t>& BatchSampler::batch(int64_t step) {
  const int64_t epoch = step / steps_per_epoch(), b = step % steps_per_epoch();
  if (epoch != epoch_) {
    // Fisher-Yates with counter-based randoms: the permutation depends on (seed, epoch) only.
    for (size_t i = 0; i < size_; ++i) order_[i] = static_cast<uint32_t>(i);
    const uint64_t key = cpu::mix64(seed_ ^ cpu::mix64(static_cast<uint64_t>(epoch) + 0x1234567ull));
    for (size_t i = size_ - 1; i > 0; --i) {
      size_t j = cpu::mix64(key + i) % (i + 1);
      std::swap(order_[i], order_[j]);
    }
    epoch_ = epoch;
  }
  std::copy_n(order_.begin() + b * batch_, batch_, current_.begin());
  return current_;
}

void gather(const Dataset& data, const uint32_t* indices, int count, float* images, int32_t* labels) {
  const size_t per = data.sample.count();
  if (images && data.rows) data.rows->read(indices, count, images);
  for (int i = 0; i < count; ++i) {
    if (images && !data.rows) std::memcpy(images + i * per, data.images.data() + indices[i] * per, per * sizeof(float));
    if (labels) labels[i] = data.labels[indices[i]];
  }
}

}  // namespace burstpool
