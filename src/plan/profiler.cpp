#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "layers/kernels.hpp"
#include "burstpool/device_model.hpp"
#include "burstpool/error.hpp"
#include "burstpool/json_io.hpp"
#include "burstpool/model.hpp"
#include "burstpool/model_io.hpp"
#include "burstpool/optimizer.hpp"
#include "burstpool/profile.hpp"
#include "burstpool/runtime.hpp"

namespace burstpool {
namespace {

using Clock = std::chrono::steady_clock;

// Median milliseconds of `fn` over `repeats` runs after `warmup` runs.
template <class F>
double time_ms(F&& fn, int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = Clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return median(ms);
}

// What is timed for one batch size: each layer's forward and backward alone
// on real activations, and a whole training step, each returning once its
// work is done.
struct TimedPasses {
  std::function<void(int)> forward_layer, backward_layer;
  std::function<void()> step;
};

// The CPU layers of `m`, with `m`'s activations filled by one step.
TimedPasses on_cpu(Model& m, Sgd& sgd, const float* images, const Context& ctx) {
  m.load_batch(images);
  m.forward(ctx);  // fills every activation the layers read
  m.backward(ctx);
  return {[&m, &ctx](int i) { m.forward_layer(i, ctx); }, [&m, &ctx](int i) { m.backward_layer(i, ctx); },
          [&m, &sgd, images, &ctx] {
            m.load_batch(images);
            m.forward(ctx);
            m.backward(ctx);
            sgd.step(0.0f);  // the optimizer's work, without changing the model
          }};
}

// The same through a device model's per-layer calls (as the executor runs a
// burst plan) and whole-model calls (a data-parallel step), waiting for the
// device after each; the input layer has nothing to run there.
TimedPasses on_device(DeviceModel& d, Model& m, const float* images, const int32_t* labels, const Context& ctx) {
  const int b = m.batch();
  std::vector<std::vector<bool>> direct;  // every input from the producer's own buffers
  for (int i = 0; i < m.size(); ++i) direct.emplace_back(m.inputs(i).size(), true);
  d.use_slot_buffers(direct);
  d.load_input(images, b, labels, b, ctx);
  for (int i = 0; i < m.size(); ++i)
    if (i != m.input_layer()) d.forward_layer(i, ctx);
  for (int i = m.size() - 1; i >= 0; --i)
    if (i != m.input_layer()) d.backward_layer(i, ctx);
  d.synchronize();
  const int input = m.input_layer();
  const std::vector<std::pair<size_t, size_t>> all{{0, m.param_count()}};
  return {[&d, &ctx, input](int i) {
            if (i == input) return;
            d.forward_layer(i, ctx);
            d.synchronize();
          },
          [&d, &ctx, input](int i) {
            if (i == input) return;
            d.backward_layer(i, ctx);
            d.synchronize();
          },
          [&d, &ctx, images, labels, b, all] {
            d.forward(b, images, labels, ctx);
            d.backward(ctx);
            d.sgd_step(0.0f, SgdOptions{}, all);  // the optimizer's work, without changing the model
            d.synchronize();
          }};
}

}  // namespace

std::string model_fingerprint(const ModelSpec& spec) {
  ModelSpec unnamed = spec;
  unnamed.name.clear();  // the architecture, not what the file calls it
  return fmt::format("{:016x}", cpu::hash_name(model_ini_text(unnamed)));
}

ModelProfile profile_model(const ModelSpec& spec, const ProfileOptions& options) {
  ModelProfile p;
  p.model = spec.name;
  p.fingerprint = model_fingerprint(spec);
  p.device = options.device;
  p.threads = configure_threads(options.threads);
  p.batches = options.batches;
  for (int b : options.batches) {
    if (b < 1) throw Error(fmt::format("--batches: {} is not a positive batch size", b));
    const auto started = Clock::now();
    Model m(spec, b, 1);
    std::vector<float> images(m.sample_shape().count() * b);
    for (size_t i = 0; i < images.size(); ++i) images[i] = 2 * cpu::uniform01(i) - 1;
    std::vector<int32_t> labels(b);
    for (int i = 0; i < b; ++i) labels[i] = i % m.classes();
    Context ctx;
    ctx.labels = labels.data();
    ctx.loss_scale = 1.0 / b;
    std::unique_ptr<DeviceModel> device;
    try {
      device = make_device_model(options.device, m, world().local_rank);
    } catch (const Error& e) {
      throw Error(fmt::format("--device {}: {}", options.device, e.what()));
    }
    std::optional<Sgd> sgd;  // the CPU's optimizer; a device has its own
    if (!device) sgd.emplace(m, SgdOptions{});
    const TimedPasses run = device ? on_device(*device, m, images.data(), labels.data(), ctx)
                                   : on_cpu(m, *sgd, images.data(), ctx);
    if (p.layers.empty())
      for (int i = 0; i < m.size(); ++i) {
        LayerProfile l;
        l.name = m.layer(i).name();
        l.type = m.layer(i).type();
        l.activation_bytes_per_sample = m.layer(i).is_loss() ? 4.0 : 4.0 * m.layer(i).output_shape().per_sample();
        l.parameter_bytes = 4.0 * m.param_range(i).second;
        p.layers.push_back(l);
      }
    for (int i = 0; i < m.size(); ++i) {
      p.layers[i].forward_ms.push_back(time_ms([&] { run.forward_layer(i); }, options.warmup, options.repeats));
      p.layers[i].backward_ms.push_back(time_ms([&] { run.backward_layer(i); }, options.warmup, options.repeats));
    }
    p.step_ms.push_back(time_ms(run.step, options.warmup, options.repeats));
    if (options.progress) options.progress(b, seconds_since(started));
  }
  return p;
}

double ModelProfile::seconds(const std::vector<double>& ms, int batch) const {
  if (batch <= 0) return 0.0;
  const size_t last = batches.size() - 1;
  auto at = [&](size_t k) { return ms[k] * calibration(k) * 1e-3; };
  if (batch <= batches[0]) return at(0);
  if (batch >= batches[last]) return at(last) * batch / batches[last];
  size_t k = 0;
  while (batches[k + 1] < batch) ++k;
  const double f = static_cast<double>(batch - batches[k]) / (batches[k + 1] - batches[k]);
  return at(k) + f * (at(k + 1) - at(k));
}

double ModelProfile::calibration(size_t k) const {
  if (k >= step_ms.size()) return 1.0;
  double sum = 0;
  for (const LayerProfile& l : layers) sum += l.forward_ms[k] + l.backward_ms[k];
  return sum > 0 ? step_ms[k] / sum : 1.0;
}

void save_profile(const ModelProfile& p, const std::string& path) {
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerProfile& l : p.layers)
    layers.push_back({{"name", l.name}, {"type", l.type}, {"activation_bytes_per_sample", l.activation_bytes_per_sample},
                      {"parameter_bytes", l.parameter_bytes}, {"forward_ms", l.forward_ms},
                      {"backward_ms", l.backward_ms}});
  write_json(path, {{"format", "burstpool-profile"}, {"version", 1}, {"model", p.model},
                         {"fingerprint", p.fingerprint}, {"device", p.device}, {"threads", p.threads},
                         {"batches", p.batches}, {"step_ms", p.step_ms}, {"layers", layers}});
}

ModelProfile load_profile(const std::string& path, const ModelSpec& spec) {
  const nlohmann::json j = read_json(path, "profile");
  try {
    if (j.at("format") != "burstpool-profile") throw Error(fmt::format("{}: not a burstpool layer profile", path));
    ModelProfile p;
    p.model = j.at("model");
    p.fingerprint = j.at("fingerprint");
    p.device = j.at("device");
    p.threads = j.at("threads");
    p.batches = j.at("batches").get<std::vector<int>>();
    if (j.contains("step_ms")) p.step_ms = j.at("step_ms").get<std::vector<double>>();
    if (!p.step_ms.empty() && p.step_ms.size() != p.batches.size())
      throw Error(fmt::format("{}: {} step times for {} batches", path, p.step_ms.size(), p.batches.size()));
    if (p.fingerprint != model_fingerprint(spec))
      throw Error(fmt::format("{}: this profile belongs to model '{}' (fingerprint {}), not to '{}' from {}", path,
                              p.model, p.fingerprint, spec.name, spec.source));
    for (const auto& l : j.at("layers")) {
      LayerProfile lp;
      lp.name = l.at("name");
      lp.type = l.at("type");
      lp.activation_bytes_per_sample = l.at("activation_bytes_per_sample");
      lp.parameter_bytes = l.at("parameter_bytes");
      lp.forward_ms = l.at("forward_ms").get<std::vector<double>>();
      lp.backward_ms = l.at("backward_ms").get<std::vector<double>>();
      if (lp.forward_ms.size() != p.batches.size() || lp.backward_ms.size() != p.batches.size())
        throw Error(fmt::format("{}: layer '{}' has {} timings for {} batches", path, lp.name, lp.forward_ms.size(),
                                p.batches.size()));
      p.layers.push_back(lp);
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: malformed profile ({})", path, e.what()));
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

std::pair<double, double> fit_line(const std::vector<double>& x, const std::vector<double>& t) {
  const double n = static_cast<double>(x.size());
  double sx = 0, st = 0, sxx = 0, sxt = 0;
  for (size_t i = 0; i < x.size(); ++i) sx += x[i], st += t[i], sxx += x[i] * x[i], sxt += x[i] * t[i];
  const double den = n * sxx - sx * sx;
  if (n < 2 || den == 0) return {n > 0 ? st / n : 0.0, 0.0};
  const double b = (n * sxt - sx * st) / den;
  return {(st - b * sx) / n, b};
}

}  // namespace burstpool
