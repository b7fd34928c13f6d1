#include "sync/learner_checkpoint.hpp"

#include <algorithm>
#include <bit>
#include <climits>

#include <mpi.h>

#include "burstpool/error.hpp"
#include "burstpool/runtime.hpp"
#include "io/model_store.hpp"

namespace burstpool {
namespace {

constexpr int kReplicaTag = 0x1ea7;  // replicas to rank 0, on MPI_COMM_WORLD (no other point-to-point traffic there)
constexpr int kParts = 3;
constexpr const char* kPartNames[kParts] = {"params", "state", "momentum"};

// Floats of one part of a replica of `model`.
size_t part_size(Model& model, int part) { return part == 1 ? model.state().size() : model.param_count(); }
float* part_of(const LearnerTensors& t, int part) { return part == 0 ? t.params : part == 1 ? t.state : t.momentum; }
std::string part_path(int64_t replica, int part) { return fmt::format("/learners/{}/{}", replica, kPartNames[part]); }

// Reads dataset `path` of exactly `count` floats into `out`.
void read_into(const h5::File& f, const std::string& path, float* out, size_t count) {
  const std::vector<float> v = h5::read_floats(f, path);
  if (v.size() != count)
    throw Error(fmt::format("{}: dataset '{}' has {} values, the model expects {}", f.path(), path, v.size(), count));
  std::copy(v.begin(), v.end(), out);
}

void add_progress(Checksum& c, const LearnerProgress& p) {
  c.add(p.strategy.data(), p.strategy.size());
  c.add_value(p.iteration);
  c.add_value(p.batches);
  c.add_value(p.learners);
  c.add_value(p.seed);
  c.add_value(p.reset_lr);
  c.add_value(p.tuning);
}

void write_progress(const h5::File& f, const LearnerProgress& p, const std::string& checksum) {
  h5::ensure_group(f, "/progress");
  h5::write_string_attr(f, "/progress", "strategy", p.strategy);
  h5::write_int_attr(f, "/progress", "step", p.iteration);
  h5::write_int_attr(f, "/progress", "batches", p.batches);
  h5::write_int_attr(f, "/progress", "learners", p.learners);
  h5::write_int_attr(f, "/progress", "seed", static_cast<long long>(p.seed));
  h5::write_int_attr(f, "/progress", "reset_lr", std::bit_cast<uint32_t>(p.reset_lr));
  h5::write_int_attr(f, "/progress", "tuning", p.tuning);
  write_history(f, p.history);
  h5::write_string_attr(f, "/progress", "checksum", checksum);
}

LearnerProgress read_progress(const h5::File& f) {
  LearnerProgress p;
  p.strategy = h5::read_string_attr(f, "/progress", "strategy");
  p.iteration = h5::read_int_attr(f, "/progress", "step");
  p.batches = h5::read_int_attr(f, "/progress", "batches");
  p.learners = static_cast<int>(h5::read_int_attr(f, "/progress", "learners"));
  p.seed = static_cast<uint64_t>(h5::read_int_attr(f, "/progress", "seed"));
  p.reset_lr = std::bit_cast<float>(static_cast<uint32_t>(h5::read_int_attr(f, "/progress", "reset_lr")));
  p.tuning = h5::read_int_attr(f, "/progress", "tuning") != 0;
  p.history = read_history(f);
  if (p.learners < 1 || p.iteration < 0 || p.batches < 0)
    throw Error(fmt::format("{}: /progress holds {} learners, step {}, batches {}", f.path(), p.learners, p.iteration,
                            p.batches));
  return p;
}

// The job's model as /weights, in scratch tensors shaped like `model`'s.
struct Weights {
  explicit Weights(Model& model)
      : params(Tensor::zeros({static_cast<int>(model.param_count()), 1, 1, 1})),
        state(model.state().size() ? Tensor::zeros({static_cast<int>(model.state().size()), 1, 1, 1}) : Tensor()),
        named(model.views(params, state)) {}
  void add_to(Checksum& c) const {
    for (const NamedTensor& t : named) c.add_floats(t.value.data(), t.value.size());
  }
  Tensor params, state;
  std::vector<NamedTensor> named;
};

}  // namespace

void write_learner_checkpoint(const std::string& path, Model& model, const float* job_params, const float* job_state,
                              const std::vector<LearnerTensors>& mine, const std::vector<StrategyVector>& vectors,
                              const LearnerProgress& progress) {
  const WorldInfo& w = world();
  BP_CHECK(model.param_count() <= static_cast<size_t>(INT_MAX), "{} parameters do not fit one MPI message",
           model.param_count());
  BP_CHECK(static_cast<int64_t>(mine.size()) * w.size == progress.learners, "{} replicas on each of {} ranks, not {}",
           mine.size(), w.size, progress.learners);
  if (w.rank != 0) {
    for (const LearnerTensors& t : mine)
      for (int part = 0; part < kParts; ++part)
        BP_MPI_CHECK(MPI_Send(part_of(t, part), static_cast<int>(part_size(model, part)), MPI_FLOAT, 0, kReplicaTag,
                              MPI_COMM_WORLD));
    return;
  }
  write_atomically(path, [&](const h5::File& f) {
    Checksum c;
    write_architecture(f, model.spec());
    Weights weights(model);
    std::copy(job_params, job_params + model.param_count(), weights.params.data());
    if (!weights.state.empty()) std::copy(job_state, job_state + weights.state.size(), weights.state.data());
    write_named(f, "/weights", weights.named);
    weights.add_to(c);
    std::vector<float> received(model.param_count());
    const int k = static_cast<int>(mine.size());
    for (int r = 0; r < w.size; ++r)
      for (int j = 0; j < k; ++j)
        for (int part = 0; part < kParts; ++part) {
          const size_t count = part_size(model, part);
          const float* values = part_of(mine[j], part);
          if (r > 0) {
            BP_MPI_CHECK(MPI_Recv(received.data(), static_cast<int>(count), MPI_FLOAT, r, kReplicaTag, MPI_COMM_WORLD,
                                  MPI_STATUS_IGNORE));
            values = received.data();
          }
          if (count == 0) continue;
          h5::write_floats(f, part_path(int64_t{r} * k + j, part), {count}, values);
          c.add_floats(values, count);
        }
    for (const StrategyVector& v : vectors) {
      h5::write_floats(f, v.path, {v.size}, v.data);
      c.add_floats(v.data, v.size);
    }
    add_progress(c, progress);
    write_progress(f, progress, c.hex());
  });
}

LearnerProgress check_learner_checkpoint(const std::string& path, Model& model, const std::string& strategy,
                                         const std::vector<StrategyVector>& vectors) {
  h5::File f = h5::File::open_read(path);
  require_architecture(f, model.spec());
  if (!h5::exists(f, "/learners"))
    throw Error(fmt::format("{}: checkpoint of an ssgd run; resume it with [sync] strategy = ssgd", path));
  const LearnerProgress p = read_progress(f);
  if (p.strategy != strategy)
    throw Error(fmt::format("{}: checkpoint of a [sync] strategy = {} run, the job has strategy {}", path, p.strategy,
                            strategy));
  Checksum c;
  Weights weights(model);
  read_named(f, "/weights", weights.named);
  weights.add_to(c);
  std::vector<float> values(std::max(model.param_count(), model.state().size()));
  for (int64_t g = 0; g < p.learners; ++g)
    for (int part = 0; part < kParts; ++part) {
      const size_t count = part_size(model, part);
      if (count == 0) continue;
      read_into(f, part_path(g, part), values.data(), count);
      c.add_floats(values.data(), count);
    }
  for (const StrategyVector& v : vectors) {
    std::vector<float> kept(v.size);
    read_into(f, v.path, kept.data(), v.size);
    c.add_floats(kept.data(), v.size);
  }
  add_progress(c, p);
  if (h5::read_string_attr(f, "/progress", "checksum") != c.hex())
    throw Error(fmt::format("{}: checksum mismatch (corrupt checkpoint)", path));
  return p;
}

LearnerProgress read_learner_checkpoint(const std::string& path, Model& model, int first,
                                        const std::vector<LearnerTensors>& mine,
                                        const std::vector<StrategyVector>& vectors) {
  h5::File f = h5::File::open_read(path);
  const LearnerProgress p = read_progress(f);
  if (first + static_cast<int64_t>(mine.size()) > p.learners)
    throw Error(fmt::format("{}: holds {} learners, not {}", path, p.learners, first + mine.size()));
  for (size_t j = 0; j < mine.size(); ++j)
    for (int part = 0; part < kParts; ++part) {
      const size_t count = part_size(model, part);
      if (count > 0) read_into(f, part_path(first + static_cast<int64_t>(j), part), part_of(mine[j], part), count);
    }
  for (const StrategyVector& v : vectors) read_into(f, v.path, v.data, v.size);
  return p;
}

}  // namespace burstpool
