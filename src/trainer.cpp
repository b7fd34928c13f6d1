#include "burstpool/trainer.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>

#include "burstpool/checkpoint.hpp"
#include "burstpool/error.hpp"
#include "burstpool/model.hpp"
#include "burstpool/model_io.hpp"
#include "burstpool/runtime.hpp"

namespace burstpool {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string idx_path(const std::string& dir, const std::string& stem) {
  const std::string plain = dir + "/" + stem;
  return access((plain + ".gz").c_str(), R_OK) == 0 ? plain + ".gz" : plain;
}

struct Data {
  Dataset train, test;
  bool has_test = false;
};

Data load_data(const JobConfig& job, const Model& model) {
  Data d;
  if (job.data_source == "fashion-mnist") {
    d.train = load_idx(idx_path(job.data_dir, "train-images-idx3-ubyte"), idx_path(job.data_dir, "train-labels-idx1-ubyte"),
                       job.norm);
    d.test = load_idx(idx_path(job.data_dir, "t10k-images-idx3-ubyte"), idx_path(job.data_dir, "t10k-labels-idx1-ubyte"),
                      job.norm);
    d.has_test = true;
  } else if (job.data_source == "hdf5") {
    d.train = load_hdf5_dataset(job.train_file, job.images_dataset, job.labels_dataset, job.norm);
    if (!job.test_file.empty()) {
      d.test = load_hdf5_dataset(job.test_file, job.images_dataset, job.labels_dataset, job.norm);
      d.has_test = true;
    }
  } else {
    d.train = make_synthetic(model.sample_shape(), model.classes(), job.synthetic_train, job.seed, 0);
    if (job.synthetic_test > 0) {
      d.test = make_synthetic(model.sample_shape(), model.classes(), job.synthetic_test, job.seed, 1);
      d.has_test = true;
    }
  }
  for (const Dataset* ds : {&d.train, &d.test}) {
    if (ds == &d.test && !d.has_test) continue;
    if (!(ds->sample == model.sample_shape()))
      throw Error(fmt::format("{}: samples are {} per sample, but model '{}' takes {}", ds->source, ds->sample.str(),
                              model.spec().name, model.sample_shape().str()));
    if (ds->classes > model.classes())
      throw Error(fmt::format("{}: labels go up to {}, but model '{}' has {} classes", ds->source, ds->classes - 1,
                              model.spec().name, model.classes()));
  }
  return d;
}

// Test-set accuracy and mean loss, in eval mode, in chunks of the model's batch.
EvalPoint evaluate(Model& model, const Dataset& test, const JobConfig& job) {
  std::vector<float> images(static_cast<size_t>(model.max_batch()) * test.sample.count());
  std::vector<int32_t> labels(model.max_batch());
  std::vector<uint32_t> idx(model.max_batch());
  Context ctx;
  ctx.training = false;
  ctx.seed = job.seed;
  ctx.loss_scale = 1.0 / static_cast<double>(test.size());
  size_t correct = 0;
  double loss = 0;
  const int k = model.classes();
  for (size_t start = 0; start < test.size(); start += model.max_batch()) {
    const int n = static_cast<int>(std::min<size_t>(model.max_batch(), test.size() - start));
    for (int i = 0; i < n; ++i) idx[i] = static_cast<uint32_t>(start + i);
    gather(test, idx.data(), n, images.data(), labels.data());
    model.set_batch(n);
    model.load_batch(images.data());
    ctx.labels = labels.data();
    ctx.sample_offset = static_cast<int64_t>(start);
    loss += model.forward(ctx);
    const float* z = model.activation(model.logits_layer()).data();
    for (int i = 0; i < n; ++i) {
      const float* row = z + static_cast<size_t>(i) * k;
      correct += (std::max_element(row, row + k) - row) == labels[i];
    }
  }
  model.set_batch(model.max_batch());
  EvalPoint p;
  p.accuracy = static_cast<double>(correct) / static_cast<double>(test.size());
  p.loss = loss;
  return p;
}

std::string eta(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "?";
  int s = static_cast<int>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}h{:02}m", s / 3600, s / 60 % 60) : fmt::format("{}m{:02}s", s / 60, s % 60);
}

}  // namespace

TrainResult train(const JobConfig& job) {
  const auto wall_start = Clock::now();
  const WorldInfo& w = world();
  if (w.size > 1)
    throw Error(fmt::format("'burstpool train' runs on one rank in this version; got {} ranks", w.size));
  TrainResult r;
  r.job = job.name;
  r.ranks = w.size;
  r.threads = configure_threads(job.threads);
  r.batch_size = job.batch_size;

  ModelSpec spec = load_model_spec(job.model_path);
  r.model = spec.name;
  Model model(spec, job.batch_size, job.seed);
  if (is_hdf5_path(job.model_path) && has_weights(job.model_path)) load_weights(job.model_path, model);
  Data data = load_data(job, model);
  BatchSampler sampler(data.train.size(), job.batch_size, job.seed);
  const int64_t total = job.steps > 0 ? job.steps : job.epochs * sampler.steps_per_epoch();
  LrSchedule schedule = job.schedule;
  schedule.total_steps = total;
  Sgd sgd(model, job.sgd);
  const int64_t eval_every = job.eval_every > 0 ? job.eval_every : sampler.steps_per_epoch();
  const bool chatty = w.rank == 0;
  if (chatty)
    fmt::print("burstpool: job '{}', model '{}' ({} parameters), {} training samples, batch {}, {} steps, {} thread(s)\n",
               job.name, spec.name, model.param_count(), data.train.size(), job.batch_size, total, r.threads);

  std::vector<float> images(static_cast<size_t>(job.batch_size) * data.train.sample.count());
  std::vector<int32_t> labels(job.batch_size);
  Context ctx;
  ctx.seed = job.seed;
  ctx.loss_scale = 1.0 / job.batch_size;
  double window_loss = 0;
  int64_t window_steps = 0;
  auto window_start = Clock::now();
  for (int64_t step = 0; step < total; ++step) {
    const auto t0 = Clock::now();
    const auto& idx = sampler.batch(step);
    gather(data.train, idx.data(), job.batch_size, images.data(), labels.data());
    model.load_batch(images.data());
    ctx.step = step;
    ctx.labels = labels.data();
    const float loss = model.forward(ctx);
    if (!std::isfinite(loss))
      throw Error(fmt::format("training loss became {} at step {} (try a lower [optimizer] lr)", loss, step));
    model.backward(ctx);
    sgd.step(schedule.at(step));
    r.train_seconds += seconds_since(t0);
    window_loss += loss;
    ++window_steps;

    const bool last = step + 1 == total;
    if ((step + 1) % job.log_every == 0 || last) {
      r.final_loss = window_loss / window_steps;
      const double rate = window_steps * job.batch_size / std::max(1e-9, seconds_since(window_start));
      if (chatty)
        fmt::print("step {}/{} | epoch {:.2f} | loss {:.4f} | {:.0f} samples/s | lr {:.4g} | ETA {}\n", step + 1,
                   total, static_cast<double>(step + 1) / sampler.steps_per_epoch(), r.final_loss, rate,
                   schedule.at(step), eta((total - step - 1) * job.batch_size / rate));
      std::fflush(stdout);
      window_loss = 0;
      window_steps = 0;
      window_start = Clock::now();
    }
    if (data.has_test && ((step + 1) % eval_every == 0 || last)) {
      const auto e0 = Clock::now();
      EvalPoint p = evaluate(model, data.test, job);
      p.step = step + 1;
      p.epoch = static_cast<double>(step + 1) / sampler.steps_per_epoch();
      r.evals.push_back(p);
      r.test_accuracy = p.accuracy;
      r.eval_seconds += seconds_since(e0);
      if (chatty)
        fmt::print("eval @ step {} (epoch {:.2f}): test accuracy {:.4f}, test loss {:.4f}\n", p.step, p.epoch,
                   p.accuracy, p.loss);
      std::fflush(stdout);
      window_start = Clock::now();  // evaluation is not training time
    }
  }
  r.steps = total;
  r.epochs = static_cast<double>(total) / sampler.steps_per_epoch();
  r.samples_per_second = total * job.batch_size / std::max(1e-9, r.train_seconds);
  r.forward_gflop_per_sample = model.forward_flops_per_sample() / 1e9;
  r.achieved_gflops = 3.0 * r.forward_gflop_per_sample * r.samples_per_second;
  if (!job.checkpoint_path.empty()) write_checkpoint(job.checkpoint_path, model, sgd, {total, job.seed});
  r.wall_seconds = seconds_since(wall_start);
  return r;
}

nlohmann::json metrics_json(const TrainResult& r) {
  auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json evals = nlohmann::json::array();
  for (const EvalPoint& p : r.evals)
    evals.push_back({{"step", p.step}, {"epoch", p.epoch}, {"test_accuracy", p.accuracy}, {"test_loss", p.loss}});
  return {{"job", r.job},
          {"model", r.model},
          {"ranks", r.ranks},
          {"threads_per_rank", r.threads},
          {"batch_size", r.batch_size},
          {"steps", r.steps},
          {"epochs", r.epochs},
          {"final_loss", number(r.final_loss)},
          {"test_accuracy", number(r.test_accuracy)},
          {"samples_per_second", r.samples_per_second},
          {"train_seconds", r.train_seconds},
          {"eval_seconds", r.eval_seconds},
          {"wall_seconds", r.wall_seconds},
          {"forward_gflop_per_sample", r.forward_gflop_per_sample},
          {"achieved_gflops", r.achieved_gflops},
          {"evaluations", evals}};
}

void write_json(const std::string& path, const nlohmann::json& j) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  {
    std::ofstream out(tmp);
    if (!out) throw Error(fmt::format("{}: cannot write file", tmp));
    out << j.dump(2) << "\n";
    if (!out.flush()) throw Error(fmt::format("{}: write failed", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error(fmt::format("{}: cannot move metrics file into place", path));
  }
}

}  // namespace burstpool
