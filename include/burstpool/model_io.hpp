#pragma once
// Model files. INI: one section per layer ([name] with type, inputs and the
// type's keys), plus an optional [model] section with `name`. HDF5: the same
// architecture as attributes (root: format, version, name; /layers/<name>:
// index, type, inputs and each key), and optionally weights at
// /weights/<layer>/<param> (float32). See docs/models.md.
#include <string>

#include "burstpool/model.hpp"
#include "burstpool/spec.hpp"

namespace burstpool {

bool is_hdf5_path(const std::string& path);  // by extension: .h5 / .hdf5

// Reads either form (by extension). Errors name the file and line or object.
ModelSpec load_model_spec(const std::string& path);
ModelSpec parse_model_ini(const std::string& text, const std::string& name);

void save_model_ini(const ModelSpec& spec, const std::string& path);
std::string model_ini_text(const ModelSpec& spec);

// Writes the architecture, and the weights (parameters and state) of `model` if given.
void save_model_hdf5(const ModelSpec& spec, const std::string& path, const Model* model = nullptr);

// True when the HDF5 file at `path` holds /weights.
bool has_weights(const std::string& path);
// Loads /weights/<layer>/<param> into `model`; every tensor must be present with its shape.
void load_weights(const std::string& path, Model& model);

}  // namespace burstpool
