#pragma once
// HDF5 pieces shared by model files and checkpoints (internal).
#include <string>
#include <vector>

#include "burstpool/model.hpp"
#include "h5.hpp"

namespace burstpool {

void write_architecture(const h5::File& f, const ModelSpec& spec);
ModelSpec read_architecture(const h5::File& f);
// Writes each named tensor of `model` as float32 at <root>/<layer>/<param>.
void write_named(const h5::File& f, const std::string& root, const std::vector<NamedTensor>& tensors);
// Reads them back; each must exist with exactly the tensor's element count.
void read_named(const h5::File& f, const std::string& root, const std::vector<NamedTensor>& tensors);

}  // namespace burstpool
