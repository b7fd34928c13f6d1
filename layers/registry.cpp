// The one table from layer type names to kinds and factories: the only place
// that compares type names (everything else compares LayerKind).
#include <algorithm>
#include <array>

#include "layers/families.hpp"
#include "burstpool/error.hpp"

namespace burstpool {
namespace {

using Factory = std::unique_ptr<Layer> (*)(const LayerSpec&, SpecReader&);

struct Entry {
  std::string name;
  LayerKind kind;
  Factory make;
};

// In LayerKind's order (checked below), so a kind indexes its entry.
const std::array<Entry, 13>& registry() {
  static const std::array<Entry, 13> table = {{
      {"input", LayerKind::input, layers::make_input},
      {"linear", LayerKind::linear, layers::make_linear},
      {"conv2d", LayerKind::conv2d, layers::make_conv2d},
      {"relu", LayerKind::relu, layers::make_relu},
      {"dropout", LayerKind::dropout, layers::make_dropout},
      {"maxpool2d", LayerKind::maxpool2d, layers::make_maxpool2d},
      {"avgpool2d", LayerKind::avgpool2d, layers::make_avgpool2d},
      {"global_avgpool", LayerKind::global_avgpool, layers::make_global_avgpool},
      {"flatten", LayerKind::flatten, layers::make_flatten},
      {"batchnorm2d", LayerKind::batchnorm2d, layers::make_batchnorm2d},
      {"add", LayerKind::add, layers::make_add},
      {"concat", LayerKind::concat, layers::make_concat},
      {"softmax_cross_entropy", LayerKind::softmax_cross_entropy, layers::make_softmax_cross_entropy},
  }};
  return table;
}

const Entry* find(const std::string& type) {
  for (const Entry& e : registry())
    if (e.name == type) return &e;
  return nullptr;
}

}  // namespace

std::optional<LayerKind> layer_kind(const std::string& type) {
  const Entry* e = find(type);
  return e ? std::optional<LayerKind>(e->kind) : std::nullopt;
}

const std::string& layer_kind_name(LayerKind kind) {
  const Entry& e = registry().at(static_cast<size_t>(kind));
  BP_CHECK(e.kind == kind, "the layer registry is out of LayerKind's order at {}", e.name);
  return e.name;
}

std::vector<std::string> layer_types() {
  std::vector<std::string> names;
  for (const Entry& e : registry()) names.push_back(e.name);
  std::sort(names.begin(), names.end());
  return names;
}

std::unique_ptr<Layer> make_layer(const LayerSpec& spec) {
  const Entry* e = find(spec.type);
  if (!e) {
    std::string known;
    for (const auto& name : layer_types()) known += (known.empty() ? "" : ", ") + name;
    throw Error(fmt::format("{}: layer '{}' has unknown type '{}' (known: {})", spec.where("type").str(),
                            spec.name, spec.type, known));
  }
  SpecReader reader(spec);
  std::unique_ptr<Layer> layer = e->make(spec, reader);
  reader.finish();
  layer->kind_ = e->kind;
  return layer;
}

}  // namespace burstpool
