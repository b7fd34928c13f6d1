#pragma once
// HDF5 pieces shared by model files and checkpoints (internal).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "burstpool/model.hpp"
#include "io/h5.hpp"

namespace burstpool {

void write_architecture(const h5::File& f, const ModelSpec& spec);
ModelSpec read_architecture(const h5::File& f);
// Writes each named tensor of `model` as float32 at <root>/<layer>/<param>.
void write_named(const h5::File& f, const std::string& root, const std::vector<NamedTensor>& tensors);
// Reads them back; each must exist with exactly the tensor's element count.
void read_named(const h5::File& f, const std::string& root, const std::vector<NamedTensor>& tensors);

// Throws Error naming the file unless its architecture is `spec`'s.
void require_architecture(const h5::File& f, const ModelSpec& spec);

// A run's record (run_history, trainer.hpp) in a checkpoint: the "run"
// attribute of group /history with a checksum of its own, apart from
// /progress and its checksum, so that comparisons of the training state can
// leave it out. read_history throws Error on a mismatch; "" when absent
// (older files).
void write_history(const h5::File& f, const std::string& history);
std::string read_history(const h5::File& f);

// FNV-1a over the bytes a checkpoint restores, in the order they are written.
class Checksum {
 public:
  void add(const void* data, size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; ++i) h_ = (h_ ^ p[i]) * 1099511628211ull;
  }
  void add_floats(const float* data, size_t count) { add(data, count * sizeof(float)); }
  template <class T>
  void add_value(const T& value) {
    add(&value, sizeof value);
  }
  std::string hex() const;

 private:
  uint64_t h_ = 1469598103934665603ull;
};

// Writes a checkpoint atomically: fill() writes "<path>.tmp.<pid>", which is
// flushed, then "<path>" becomes "<path>.prev" and the new file "<path>".
// Whenever the process dies, "<path>" or "<path>.prev" is complete.
// Thread-safe: one write at a time in the process.
void write_atomically(const std::string& path, const std::function<void(const h5::File&)>& fill);

}  // namespace burstpool
