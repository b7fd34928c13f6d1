#include "burstpool/checkpoint.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "burstpool/error.hpp"
#include "burstpool/model_io.hpp"
#include "io/model_store.hpp"

namespace burstpool {
namespace {

// Every tensor a checkpoint restores, and the step.
std::string checksum(const Model& model, const Tensor& velocity, int64_t step) {
  Checksum c;
  for (const NamedTensor& t : model.tensors()) c.add_floats(t.value.data(), t.value.size());
  c.add_floats(velocity.data(), velocity.size());
  c.add_value(step);
  return c.hex();
}

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

}  // namespace

namespace {
std::string text_checksum(const std::string& text) {
  Checksum c;
  c.add(text.data(), text.size());
  return c.hex();
}
}  // namespace

void write_history(const h5::File& f, const std::string& history) {
  if (history.empty()) return;
  h5::ensure_group(f, "/history");
  h5::write_string_attr(f, "/history", "run", history);
  h5::write_string_attr(f, "/history", "checksum", text_checksum(history));
}

std::string read_history(const h5::File& f) {
  if (!h5::exists(f, "/history")) return "";
  const std::string history = h5::read_string_attr(f, "/history", "run");
  if (h5::read_string_attr(f, "/history", "checksum") != text_checksum(history))
    throw Error(fmt::format("{}: checksum mismatch in /history (corrupt checkpoint)", f.path()));
  return history;
}

void require_architecture(const h5::File& f, const ModelSpec& spec) {
  if (model_ini_text(read_architecture(f)) != model_ini_text(spec))
    throw Error(fmt::format("{}: checkpoint of a different model than '{}'", f.path(), spec.name));
}

std::string Checksum::hex() const { return fmt::format("{:016x}", h_); }

void write_atomically(const std::string& path, const std::function<void(const h5::File&)>& fill) {
  // A background job writes its checkpoints from its own thread, maybe while
  // the foreground writes; one at a time, whether or not HDF5 is thread-safe.
  static std::mutex one_writer;
  std::lock_guard<std::mutex> lock(one_writer);
  const std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  try {
    h5::File f = h5::File::create(tmp);
    fill(f);
    f.close();
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  // Test hook: hold the complete temporary file before it is moved into place,
  // so tests can kill the process in the middle of a checkpoint.
  if (const char* pause = std::getenv("BURSTPOOL_TEST_CHECKPOINT_PAUSE_MS"))
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(pause)));
  if (exists(path) && std::rename(path.c_str(), (path + ".prev").c_str()) != 0)
    throw Error(fmt::format("{}: cannot keep the previous checkpoint as {}.prev", path, path));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error(fmt::format("{}: cannot move checkpoint into place", path));
  }
}

void write_checkpoint(const std::string& path, Model& model, Sgd& sgd, CheckpointInfo info) {
  write_atomically(path, [&](const h5::File& f) {
    write_architecture(f, model.spec());
    write_named(f, "/weights", model.tensors());
    write_named(f, "/optimizer/velocity", model.param_views(sgd.velocity()));
    h5::ensure_group(f, "/progress");
    h5::write_int_attr(f, "/progress", "step", info.step);
    h5::write_int_attr(f, "/progress", "seed", static_cast<long long>(info.seed));
    write_history(f, info.history);
    h5::write_string_attr(f, "/progress", "checksum", checksum(model, sgd.velocity(), info.step));
  });
}

CheckpointInfo read_checkpoint(const std::string& path, Model& model, Sgd& sgd) {
  h5::File f = h5::File::open_read(path);
  require_architecture(f, model.spec());
  if (h5::exists(f, "/learners"))
    throw Error(fmt::format("{}: checkpoint of a small-batch run ([sync] strategy = {}); resume it with that strategy",
                            path, h5::read_string_attr(f, "/progress", "strategy")));
  read_named(f, "/weights", model.tensors());
  read_named(f, "/optimizer/velocity", model.param_views(sgd.velocity()));
  CheckpointInfo info;
  info.step = h5::read_int_attr(f, "/progress", "step");
  info.seed = static_cast<uint64_t>(h5::read_int_attr(f, "/progress", "seed"));
  info.history = read_history(f);
  if (h5::read_string_attr(f, "/progress", "checksum") != checksum(model, sgd.velocity(), info.step))
    throw Error(fmt::format("{}: checksum mismatch (corrupt checkpoint)", path));
  return info;
}

std::optional<Resumed> newest_checkpoint(const std::string& path,
                                         const std::function<int64_t(const std::string&)>& validate,
                                         std::vector<std::string>& rejected) {
  std::optional<Resumed> best;
  bool any = false;
  for (const std::string& candidate : {path, path + ".prev"}) {
    if (!exists(candidate)) continue;
    any = true;
    try {
      const int64_t step = validate(candidate);
      if (!best || step > best->step) best = Resumed{step, candidate, {}};
    } catch (const Error& e) {
      rejected.push_back(e.what());
    }
  }
  if (!any) return std::nullopt;
  if (!best) throw Error(fmt::format("{}: no valid checkpoint to resume from ({})", path, rejected.front()));
  return best;
}

}  // namespace burstpool
