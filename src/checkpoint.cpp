#include "burstpool/checkpoint.hpp"

#include <unistd.h>

#include <cstdio>

#include "burstpool/error.hpp"
#include "model_store.hpp"

namespace burstpool {

void write_checkpoint(const std::string& path, Model& model, Sgd& sgd, CheckpointInfo info) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  try {
    h5::File f = h5::File::create(tmp);
    write_architecture(f, model.spec());
    write_named(f, "/weights", model.tensors());
    write_named(f, "/optimizer/velocity", model.param_views(sgd.velocity()));
    h5::ensure_group(f, "/progress");
    h5::write_int_attr(f, "/progress", "step", info.step);
    h5::write_int_attr(f, "/progress", "seed", static_cast<long long>(info.seed));
    f.close();
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error(fmt::format("{}: cannot move checkpoint into place", path));
  }
}

CheckpointInfo read_checkpoint(const std::string& path, Model& model, Sgd& sgd) {
  h5::File f = h5::File::open_read(path);
  read_named(f, "/weights", model.tensors());
  read_named(f, "/optimizer/velocity", model.param_views(sgd.velocity()));
  CheckpointInfo info;
  info.step = h5::read_int_attr(f, "/progress", "step");
  info.seed = static_cast<uint64_t>(h5::read_int_attr(f, "/progress", "seed"));
  return info;
}

}  // namespace burstpool
