#pragma once
// [job] cudnn_cache: the convolution algorithms that cudnn_algorithms =
// measured chose, kept in a JSON file so that later runs use the same ones
// (and so repeat bit for bit) without timing the candidates again. An entry
// is keyed by the convolution's shape, batch included, and its precision;
// the file holds the GPU's name and the cuDNN version it was made with, and
// a file made for another GPU or cuDNN version, or one that cannot be read
// as a cache, is refused with one warning line and rebuilt. Written
// atomically after each new entry (the CUDA model's: cuda/gpu_model.cpp).
// Implemented in src/base/algorithm_cache.cpp (no CUDA in it, so the CPU
// tests cover the file's life).
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace burstpool {

// Forward, backward-data and backward-filter algorithms, then the math type
// each was ranked and timed with (cudnnMathType_t), as cuDNN's enum values.
using AlgorithmChoice = std::array<int, 6>;

class AlgorithmCache {
 public:
  // Reads `path` if it exists. gpu: the device's name; cudnn: the library's
  // version (cudnnGetVersion). writer: whether this process writes the file
  // (one per node: the others read it and keep what they add in memory).
  AlgorithmCache(std::string path, std::string gpu, long cudnn, bool writer);

  std::optional<AlgorithmChoice> find(const std::string& key);
  // A choice just measured: kept, and the file rewritten (by the writer).
  void add(const std::string& key, const AlgorithmChoice& choice);

  const std::string& path() const { return path_; }
  size_t entries() const { return entries_.size(); }
  int reused() const { return reused_; }  // find() answers so far
  int added() const { return added_; }
  // Why the file on disk was not used ("" when it was, or there was none):
  // one line for the log.
  const std::string& refused() const { return refused_; }

 private:
  void load();
  void write() const;

  std::string path_, gpu_;
  long cudnn_;
  bool writer_;
  std::map<std::string, AlgorithmChoice> entries_;
  int reused_ = 0, added_ = 0;
  std::string refused_;
};

}  // namespace burstpool
