#include "burstpool/tensor.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

#include "burstpool/error.hpp"

namespace burstpool {

std::string Shape::str() const { return fmt::format("({},{},{},{})", n, c, h, w); }

Storage::Storage(size_t floats, Device device) : floats_(floats), device_(device) {
  BP_CHECK(device == Device::cpu, "this build has no CUDA backend");
  // 64-byte alignment: a cache line, and what AVX-512 loads want.
  size_t bytes = ((floats * sizeof(float) + 63) / 64) * 64;
  if (bytes == 0) bytes = 64;
  data_ = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (!data_) throw std::bad_alloc();
  std::memset(data_, 0, bytes);
}

Storage::~Storage() { std::free(data_); }

Tensor Tensor::zeros(Shape shape, Device device) {
  Tensor t;
  t.storage_ = std::make_shared<Storage>(shape.count(), device);
  t.data_ = t.storage_->data();
  t.capacity_ = shape.count();
  t.shape_ = shape;
  return t;
}

Tensor Tensor::slice_flat(size_t offset, Shape shape) const {
  BP_CHECK(offset + shape.count() <= capacity_, "slice {}+{} beyond tensor of {}", offset,
           shape.count(), capacity_);
  Tensor t = *this;
  t.data_ = data_ + offset;
  t.capacity_ = capacity_ - offset;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::view(Shape shape) const { return slice_flat(0, shape); }

void Tensor::fill(float value) {
  float* p = data_;
  const size_t n = size();
  for (size_t i = 0; i < n; ++i) p[i] = value;
}

}  // namespace burstpool
