#pragma once
// Factories of the layer families, one per file in layers/. The registry in
// layers/registry.cpp maps type names to these.
#include <memory>

#include "burstpool/layer.hpp"

namespace burstpool::layers {

std::unique_ptr<Layer> make_input(const LayerSpec&, SpecReader&);
std::unique_ptr<Layer> make_linear(const LayerSpec&, SpecReader&);
std::unique_ptr<Layer> make_conv2d(const LayerSpec&, SpecReader&);
std::unique_ptr<Layer> make_relu(const LayerSpec&, SpecReader&);
std::unique_ptr<Layer> make_dropout(const LayerSpec&, SpecReader&);
std::unique_ptr<Layer> make_maxpool2d(const LayerSpec&, SpecReader&);
std::unique_ptr<Layer> make_avgpool2d(const LayerSpec&, SpecReader&);
std::unique_ptr<Layer> make_global_avgpool(const LayerSpec&, SpecReader&);
std::unique_ptr<Layer> make_flatten(const LayerSpec&, SpecReader&);
std::unique_ptr<Layer> make_batchnorm2d(const LayerSpec&, SpecReader&);
std::unique_ptr<Layer> make_add(const LayerSpec&, SpecReader&);
std::unique_ptr<Layer> make_concat(const LayerSpec&, SpecReader&);
std::unique_ptr<Layer> make_softmax_cross_entropy(const LayerSpec&, SpecReader&);

}  // namespace burstpool::layers
