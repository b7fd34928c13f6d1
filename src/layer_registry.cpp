#include <map>

#include "../layers/families.hpp"
#include "burstpool/error.hpp"

namespace burstpool {
namespace {

using Factory = std::unique_ptr<Layer> (*)(const LayerSpec&, SpecReader&);

const std::map<std::string, Factory>& registry() {
  static const std::map<std::string, Factory> table = {
      {"input", layers::make_input},
      {"linear", layers::make_linear},
      {"conv2d", layers::make_conv2d},
      {"relu", layers::make_relu},
      {"dropout", layers::make_dropout},
      {"maxpool2d", layers::make_maxpool2d},
      {"avgpool2d", layers::make_avgpool2d},
      {"global_avgpool", layers::make_global_avgpool},
      {"flatten", layers::make_flatten},
      {"batchnorm2d", layers::make_batchnorm2d},
      {"add", layers::make_add},
      {"concat", layers::make_concat},
      {"softmax_cross_entropy", layers::make_softmax_cross_entropy},
  };
  return table;
}

}  // namespace

std::vector<std::string> layer_types() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : registry()) names.push_back(name);
  return names;
}

std::unique_ptr<Layer> make_layer(const LayerSpec& spec) {
  auto it = registry().find(spec.type);
  if (it == registry().end()) {
    std::string known;
    for (const auto& name : layer_types()) known += (known.empty() ? "" : ", ") + name;
    throw Error(fmt::format("{}: layer '{}' has unknown type '{}' (known: {})", spec.where("type").str(),
                            spec.name, spec.type, known));
  }
  SpecReader reader(spec);
  std::unique_ptr<Layer> layer = it->second(spec, reader);
  reader.finish();
  return layer;
}

}  // namespace burstpool
