#include "burstpool/model_io.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "burstpool/error.hpp"
#include "burstpool/layer.hpp"
#include "burstpool/ini.hpp"
#include "io/model_store.hpp"

namespace burstpool {
namespace {

const char* kFormat = "burstpool-model";
constexpr long long kVersion = 1;

ModelSpec spec_from_ini(const IniDocument& doc) {
  ModelSpec spec;
  spec.source = doc.file;
  for (const IniSection& s : doc.sections) {
    if (s.name == "model") {
      for (const IniEntry& e : s.entries) {
        if (e.key != "name")
          throw Error(fmt::format("{}: [model] unknown key '{}' (known: name)", doc.at(e.line).str(), e.key));
        spec.name = e.value;
      }
      continue;
    }
    LayerSpec l;
    l.name = s.name;
    l.loc = doc.at(s.line);
    for (const IniEntry& e : s.entries) {
      l.attr_loc[e.key] = doc.at(e.line);
      if (e.key == "type") {
        l.type = e.value;
      } else if (e.key == "inputs") {
        l.inputs = split_list(e.value);
      } else {
        l.attrs.emplace_back(e.key, e.value);
      }
    }
    if (l.type.empty()) throw Error(fmt::format("{}: layer '{}' has no 'type' key", l.loc.str(), l.name));
    if (layer_kind(l.type) != LayerKind::input && l.inputs.empty())
      throw Error(fmt::format("{}: layer '{}' has no 'inputs' key", l.loc.str(), l.name));
    spec.layers.push_back(std::move(l));
  }
  if (spec.name.empty()) {
    std::string base = doc.file.substr(doc.file.find_last_of('/') + 1);
    spec.name = base.substr(0, base.find('.'));
  }
  spec.topological_order();  // reject unknown inputs and cycles now, with lines
  return spec;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

bool is_hdf5_path(const std::string& path) {
  auto ends = [&](const std::string& ext) {
    return path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
  };
  return ends(".h5") || ends(".hdf5");
}

ModelSpec parse_model_ini(const std::string& text, const std::string& name) {
  return spec_from_ini(IniDocument::parse_text(text, name));
}

ModelSpec load_model_spec(const std::string& path) {
  if (is_hdf5_path(path)) {
    h5::File f = h5::File::open_read(path);
    return read_architecture(f);
  }
  return spec_from_ini(IniDocument::parse_file(path));
}

std::string model_ini_text(const ModelSpec& spec) {
  std::ostringstream out;
  out << "# burstpool model '" << spec.name << "'\n[model]\nname = " << spec.name << "\n";
  for (const LayerSpec& l : spec.layers) {
    out << "\n[" << l.name << "]\ntype = " << l.type << "\n";
    if (!l.inputs.empty()) out << "inputs = " << join(l.inputs) << "\n";
    for (const auto& [k, v] : l.attrs) out << k << " = " << v << "\n";
  }
  return out.str();
}

void save_model_ini(const ModelSpec& spec, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw Error(fmt::format("{}: cannot write file", path));
  out << model_ini_text(spec);
  if (!out.flush()) throw Error(fmt::format("{}: write failed", path));
}

void write_architecture(const h5::File& f, const ModelSpec& spec) {
  h5::write_string_attr(f, "/", "format", kFormat);
  h5::write_int_attr(f, "/", "version", kVersion);
  h5::write_string_attr(f, "/", "name", spec.name);
  h5::ensure_group(f, "/layers");
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    const std::string g = "/layers/" + l.name;
    h5::ensure_group(f, g);
    h5::write_int_attr(f, g, "index", static_cast<long long>(i));
    h5::write_string_attr(f, g, "type", l.type);
    h5::write_string_attr(f, g, "inputs", join(l.inputs));
    for (const auto& [k, v] : l.attrs) h5::write_string_attr(f, g, k, v);
  }
}

ModelSpec read_architecture(const h5::File& f) {
  if (!h5::has_attr(f, "/", "format") || h5::read_string_attr(f, "/", "format") != kFormat)
    throw Error(fmt::format("{}: not a burstpool model (root attribute 'format' is not '{}')", f.path(), kFormat));
  long long version = h5::read_int_attr(f, "/", "version");
  if (version != kVersion)
    throw Error(fmt::format("{}: model format version {} is not supported (this build reads {})", f.path(), version,
                            kVersion));
  ModelSpec spec;
  spec.source = f.path();
  spec.name = h5::read_string_attr(f, "/", "name");
  std::vector<std::pair<long long, LayerSpec>> layers;
  for (const std::string& name : h5::children(f, "/layers")) {
    const std::string g = "/layers/" + name;
    LayerSpec l;
    l.name = name;
    l.loc = {f.path() + ":" + g, 0};
    long long index = -1;
    for (const std::string& key : h5::attr_names(f, g)) {
      l.attr_loc[key] = l.loc;
      if (key == "index")
        index = h5::read_int_attr(f, g, key);
      else if (key == "type")
        l.type = h5::read_string_attr(f, g, key);
      else if (key == "inputs")
        l.inputs = split_list(h5::read_string_attr(f, g, key));
      else
        l.attrs.emplace_back(key, h5::read_string_attr(f, g, key));
    }
    if (index < 0 || l.type.empty())
      throw Error(fmt::format("{}: group '{}' lacks its 'index' or 'type' attribute", f.path(), g));
    layers.emplace_back(index, std::move(l));
  }
  std::sort(layers.begin(), layers.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [index, l] : layers) spec.layers.push_back(std::move(l));
  spec.topological_order();
  return spec;
}

namespace {

// A tensor's dims as stored: (n, c, h, w) with trailing 1s dropped.
std::vector<hsize_t> stored_dims(const Shape& s) {
  std::vector<hsize_t> dims{static_cast<hsize_t>(s.n), static_cast<hsize_t>(s.c), static_cast<hsize_t>(s.h),
                            static_cast<hsize_t>(s.w)};
  while (dims.size() > 1 && dims.back() == 1) dims.pop_back();
  return dims;
}

std::string dims_text(std::vector<hsize_t> dims) {
  while (dims.size() > 1 && dims.back() == 1) dims.pop_back();
  std::string out = "(";
  for (size_t i = 0; i < dims.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", dims[i]);
  return out + ")";
}

// Every dataset below `group`, as paths relative to `root`.
// Weights nest three deep (root/layer/name); a corrupt file can link a group
// into itself, so deeper nesting is refused rather than followed for ever.
constexpr int kMaxGroupDepth = 8;

void datasets_below(const h5::File& f, const std::string& root, const std::string& group, std::vector<std::string>& out,
                    int depth = 0) {
  if (depth > kMaxGroupDepth)
    throw Error(fmt::format("{}: groups below '{}' nest deeper than {} (a group linked into itself in a corrupt file?)",
                            f.path(), root, kMaxGroupDepth));
  for (const std::string& name : h5::children(f, group)) {
    const std::string path = group + "/" + name;
    if (h5::is_group(f, path))
      datasets_below(f, root, path, out, depth + 1);
    else
      out.push_back(path.substr(root.size() + 1));
  }
}

}  // namespace

void write_named(const h5::File& f, const std::string& root, const std::vector<NamedTensor>& tensors) {
  for (const NamedTensor& t : tensors) h5::write_floats(f, root + "/" + t.path(), stored_dims(t.value.shape()), t.value.data());
}

void read_named(const h5::File& f, const std::string& root, const std::vector<NamedTensor>& tensors) {
  std::set<std::string> expected;
  for (const NamedTensor& t : tensors) expected.insert(t.path());
  std::vector<std::string> present;
  if (h5::exists(f, root)) datasets_below(f, root, root, present);
  for (const std::string& p : present)
    if (!expected.count(p))
      throw Error(fmt::format("{}: dataset '{}/{}' belongs to no layer or parameter of the model", f.path(), root, p));
  for (const NamedTensor& t : tensors) {
    const std::string path = root + "/" + t.path();
    if (!h5::is_floating(f, path))
      throw Error(fmt::format("{}: dataset '{}' is not floating point; weights are stored as float32", f.path(), path));
    // Trailing 1s may be dropped (a bias stored as (n) or (n, 1)); anything
    // else must match, checked before reading (a corrupt shape can be huge).
    const std::vector<hsize_t> dims = h5::dims_of(f, path);
    if (dims_text(dims) != dims_text(stored_dims(t.value.shape())))
      throw Error(fmt::format("{}: dataset '{}' has shape {}, the model expects {}", f.path(), path, dims_text(dims),
                              dims_text(stored_dims(t.value.shape()))));
    std::vector<float> v = h5::read_floats(f, path);
    const auto bad = std::find_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
    if (bad != v.end())
      throw Error(fmt::format("{}: dataset '{}' holds a non-finite value ({} at index {})", f.path(), path, *bad,
                              bad - v.begin()));
    Tensor dst = t.value;  // shares storage
    std::copy(v.begin(), v.end(), dst.data());
  }
}

void save_model_hdf5(const ModelSpec& spec, const std::string& path, const Model* model) {
  h5::File f = h5::File::create(path);
  write_architecture(f, spec);
  if (model) write_named(f, "/weights", model->tensors());
  f.close();
}

bool has_weights(const std::string& path) {
  h5::File f = h5::File::open_read(path);
  return h5::exists(f, "/weights");
}

void load_weights(const std::string& path, Model& model) {
  h5::File f = h5::File::open_read(path);
  read_named(f, "/weights", model.tensors());
}

}  // namespace burstpool
