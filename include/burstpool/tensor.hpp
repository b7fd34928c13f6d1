#pragma once
// float32 NCHW tensors.
//
// A Tensor is a shaped view of a reference-counted Storage. Copies share storage;
// `view` re-shapes without copying. Every tensor names the device its storage
// lives on: the CPU backend only creates Device::cpu storage, and the CUDA
// backend (a later issue) adds Device::cuda storage through the same type, so
// layers and models can hold tensors on either.
#include <cstddef>
#include <memory>
#include <string>

namespace burstpool {

enum class Device { cpu, cuda };

// NCHW extents. Matrices are (N, features, 1, 1); a scalar is (1, 1, 1, 1).
struct Shape {
  int n = 0, c = 0, h = 1, w = 1;

  size_t count() const { return static_cast<size_t>(n) * c * h * w; }
  size_t per_sample() const { return static_cast<size_t>(c) * h * w; }
  Shape with_batch(int batch) const { return {batch, c, h, w}; }
  bool operator==(const Shape&) const = default;
  std::string str() const;  // "(N,C,H,W)"
};

// Owns device memory; freed when the last Tensor viewing it goes away.
class Storage {
 public:
  Storage(size_t floats, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  float* data() const { return data_; }
  size_t floats() const { return floats_; }
  Device device() const { return device_; }

 private:
  float* data_ = nullptr;
  size_t floats_ = 0;
  Device device_;
};

class Tensor {
 public:
  Tensor() = default;
  // New zero-filled tensor.
  static Tensor zeros(Shape shape, Device device = Device::cpu);
  // A view of `floats` elements starting at `offset` of this tensor's storage.
  Tensor slice_flat(size_t offset, Shape shape) const;
  // Same storage and offset, another shape of at most the same element count.
  Tensor view(Shape shape) const;

  float* data() { return data_; }
  const float* data() const { return data_; }
  const Shape& shape() const { return shape_; }
  size_t size() const { return shape_.count(); }
  bool empty() const { return data_ == nullptr; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu; }

  void fill(float value);

 private:
  std::shared_ptr<Storage> storage_;
  float* data_ = nullptr;
  size_t capacity_ = 0;  // floats available from data_ to the end of storage
  Shape shape_{};
};

}  // namespace burstpool
