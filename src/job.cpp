#include "burstpool/job.hpp"

#include <cmath>
#include <map>

#include "burstpool/error.hpp"
#include "burstpool/ini.hpp"

namespace burstpool {

const std::vector<JobKey>& job_schema() {
  static const std::vector<JobKey> keys = {
      {"job", "name", "", "text", "Name used in progress output and metrics; default: the job file's name"},
      {"job", "model", "", "path", "Model file (.ini or .h5), relative to the job file's folder. Required"},
      {"job", "seed", "1", "integer", "Seed for weight initialisation, shuffling, dropout and synthetic data"},
      {"job", "device", "cpu", "cpu | cuda | twin", "Where layers run. cuda: the GPU of the rank's node-local rank (ranks may share one), any plan or [sync] strategy; a background job may say cuda too (docs/cuda.md); needs a build with the CUDA backend. twin: for testing, the device code paths with a second copy of the model in host memory standing in for the GPU (the CPU's results, slower; docs/cuda.md)"},
      {"job", "cuda_graphs", "false", "boolean", "device = cuda: capture each training step's forward and backward layers in CUDA graphs and replay them, where nothing in them waits for the host (one rank or ranks sharing a GPU, no batch-norm group sums; docs/cuda.md)"},
      {"job", "cudnn_algorithms", "heuristic", "heuristic | measured | gemm", "device = cuda: how each convolution's cuDNN algorithms are chosen, deterministic ones only. heuristic: cuDNN's heuristic ranking, the same on every run, so runs repeat bit for bit; measured: each candidate timed once at the start, as PyTorch's cudnn.benchmark: faster, but the choice, and with it the bits, can change from run to run; gemm: heuristic among the algorithms that sum products directly (no FFT or Winograd transforms, which round more): results within float rounding of the CPU's, slower (docs/cuda.md)"},
      {"job", "threads", "0", "threads", "Threads per rank; 0: OMP_NUM_THREADS, else 1 under MPI with several ranks, else all cores"},
      {"data", "source", "fashion-mnist", "fashion-mnist | hdf5 | synthetic", "Where samples come from"},
      {"data", "dir", "/usr/share/datasets/fashion-mnist", "path", "fashion-mnist: folder with the four IDX files (.gz or plain)"},
      {"data", "train_file", "", "path", "hdf5: training file, relative to the job file's folder"},
      {"data", "test_file", "", "path", "hdf5: test file; empty: no evaluation"},
      {"data", "images_dataset", "images", "HDF5 path", "hdf5: images dataset, (N,H,W) or (N,C,H,W), uint8 or float"},
      {"data", "labels_dataset", "labels", "HDF5 path", "hdf5: labels dataset, (N) integers"},
      {"data", "normalize_mean", "0", "pixel value", "Subtracted after scaling bytes to [0,1]"},
      {"data", "normalize_std", "1", "pixel value", "Divides after subtracting the mean; > 0"},
      {"data", "synthetic_train_samples", "1024", "samples", "synthetic: training set size"},
      {"data", "synthetic_test_samples", "256", "samples", "synthetic: test set size; 0: no evaluation"},
      {"train", "batch_size", "64", "samples", "Global batch per step, summed over all ranks"},
      {"train", "steps", "0", "steps", "Training steps; 0: epochs decide"},
      {"train", "epochs", "1", "epochs", "Passes over the training set when steps = 0 (last partial batch dropped)"},
      {"train", "eval_every", "0", "steps", "Test-set evaluation cadence; 0: at the end of every epoch. Always at the end"},
      {"train", "log_every", "100", "steps", "Progress line cadence on rank 0"},
      {"train", "target_accuracy", "0", "fraction", "Test accuracy to reach: the metrics record the training seconds and epochs to the first evaluation at or above it; 0: none"},
      {"train", "stop_at_target", "false", "boolean", "End training at the first evaluation that reaches target_accuracy"},
      {"optimizer", "type", "sgd", "sgd", "Optimizer"},
      {"optimizer", "lr", "0.1", "learning rate", "Base learning rate"},
      {"optimizer", "momentum", "0.9", "factor", "Momentum; 0 disables it"},
      {"optimizer", "nesterov", "false", "boolean", "Nesterov momentum"},
      {"optimizer", "weight_decay", "0", "factor", "L2 weight decay added to every parameter's gradient"},
      {"schedule", "type", "constant", "constant | step | cosine", "Learning-rate schedule over training steps"},
      {"schedule", "warmup_steps", "0", "steps", "Linear warm-up from lr/warmup_steps to lr"},
      {"schedule", "step_size", "0", "steps", "step: multiply the rate by gamma every step_size steps"},
      {"schedule", "gamma", "0.1", "factor", "step: decay factor"},
      {"schedule", "min_lr", "0", "learning rate", "cosine: rate reached at the last step"},
      {"parallel", "plan", "", "path", "Plan file (JSON) giving each layer its ranks; empty: data parallel over all ranks. Relative to the job file's folder"},
      {"parallel", "bucket_mb", "25", "MiB", "Gradient allreduce bucket size"},
      {"parallel", "layer_timing", "false", "boolean", "Report transfer and allreduce seconds per layer in the metrics; each layer's gradient allreduce then runs on its own, without overlap"},
      {"parallel", "sync_batchnorm", "true", "boolean", "Batch-norm statistics over all ranks of a layer (the same result as one rank); false: each rank normalises its own slice, as PyTorch DDP does without SyncBatchNorm, and no reduction runs inside the step (evaluations and checkpoints then use each layer's first rank's running statistics)"},
      {"output", "metrics", "", "path", "Metrics JSON written at the end (relative to the working folder); {job_id}, {job} and {ranks} expand to the Slurm job id (or 'local'), the job name and the rank count"},
      {"output", "checkpoint", "", "path", "HDF5 checkpoint, written atomically at the end and at the cadences below; the previous one is kept as <path>.prev. --resume continues from the newer valid one. Placeholders as for metrics"},
      {"output", "checkpoint_every", "0", "steps", "Checkpoint cadence in steps; 0: only at the end"},
      {"output", "checkpoint_seconds", "0", "seconds", "Checkpoint cadence in wall seconds (decided on rank 0); 0: off"},
      {"sync", "strategy", "ssgd", "ssgd | sma | shadow | local-sgd", "How replicas stay together (docs/learners.md): ssgd = synchronous SGD over the plan; sma = synchronous model averaging of small-batch learners; shadow = learners never wait, a thread per rank averages models in the background; local-sgd = average every local_steps. For sma, shadow and local-sgd, [train] batch_size is each learner's batch"},
      {"sync", "learners", "0", "learners", "Learners (model replicas, one thread each) per rank; 0: auto-tuned for sma, 1 otherwise. shadow takes 1"},
      {"sync", "max_learners", "8", "learners", "Most learners per rank the auto-tuner tries"},
      {"sync", "autotune_threshold", "0.1", "fraction", "The auto-tuner adds a learner while throughput grows by more than this; on the first smaller gain it removes the last one and stops"},
      {"sync", "autotune_steps", "30", "iterations", "Iterations timed per learner count while auto-tuning (after 3 untimed)"},
      {"sync", "alpha", "0.1", "factor", "sma: pull of each learner towards the average model"},
      {"sync", "average_momentum", "0.9", "factor", "sma: momentum on the average model"},
      {"sync", "local_steps", "8", "iterations", "local-sgd: iterations between model averages"},
      {"sync", "shadow_pause_ms", "0", "milliseconds", "shadow: pause between two background averaging rounds"},
      {"background", "job", "", "path", "A background job file trained data parallel beside this one on the same ranks, in its own thread at idle priority, on its own communicator (docs/multiplexing.md); empty or none: no background job (--set background.job=none switches it off). Relative to this job file's folder"},
      {"background", "calibrate_steps", "10", "steps", "Steps each job first runs alone to measure its speed alone: a planned foreground trained data parallel (the cluster-throughput reference), the background, then the foreground under its plan; >= 2"},
      {"background", "max_slowdown", "1.1", "factor", "The background starts a piece (one layer) only while the foreground's last step took at most this times its time alone"},
      {"background", "pause_in_allreduce", "false", "boolean", "Also hold the background back while the foreground waits in a reduction (for devices where the two compete; on CPUs that wait is the background's chance)"},
      {"background", "wait_spin_us", "200", "microseconds", "While a background job runs, a foreground wait polls this long before it starts sleeping"},
      {"background", "wait_sleep_us", "20", "microseconds", "... then sleeps between polls, leaving the core to the background: at least this long"},
      {"background", "wait_predict", "0.8", "fraction", "A foreground wait at a place where the last two waits took at least T (the shorter) first sleeps this fraction of T in one piece: the background gets the foreground's idle stretch whole"},
      {"background", "wait_backoff", "0.02", "fraction", "... and at least this fraction of the time waited so far, so long waits hand over the core in long pieces; the foreground then wakes at most about this fraction of its wait late"},
  };
  return keys;
}

std::string job_schema_markdown() {
  std::string out = "| section | key | default | unit | meaning |\n|---|---|---|---|---|\n";
  for (const JobKey& k : job_schema())
    out += fmt::format("| [{}] | `{}` | {} | {} | {} |\n", k.section, k.key,
                       *k.fallback ? fmt::format("`{}`", k.fallback) : "(none)", k.unit, k.meaning);
  return out;
}

namespace {

struct Value {
  std::string text;
  std::string where;  // "file:line" or "--set section.key=value"
};

class Values {
 public:
  Values(const std::string& file) : file_(file) {
    for (const JobKey& k : job_schema()) values_[id(k.section, k.key)] = {k.fallback, "default"};
  }
  void set(const std::string& section, const std::string& key, const std::string& text, const std::string& where) {
    auto it = values_.find(id(section, key));
    if (it == values_.end()) {
      std::string known;
      for (const JobKey& k : job_schema())
        if (section == k.section) known += (known.empty() ? "" : ", ") + std::string(k.key);
      if (known.empty()) throw Error(fmt::format("{}: unknown section [{}]", where, section));
      throw Error(fmt::format("{}: [{}] unknown key '{}' (known: {})", where, section, key, known));
    }
    it->second = {text, where};
  }
  const Value& get(const char* section, const char* key) const { return values_.at(id(section, key)); }

  std::string str(const char* s, const char* k) const { return get(s, k).text; }
  int64_t integer(const char* s, const char* k, int64_t min) const {
    const Value& v = get(s, k);
    int out;
    if (!parse_int(v.text, out)) fail(s, k, fmt::format("'{}' is not an integer", v.text));
    if (out < min) fail(s, k, fmt::format("{} is below the minimum {}", out, min));
    return out;
  }
  float number(const char* s, const char* k, float min, bool strict = false) const {
    const Value& v = get(s, k);
    float out;
    if (!parse_float(v.text, out) || !std::isfinite(out)) fail(s, k, fmt::format("'{}' is not a number", v.text));
    if (out < min || (strict && out == min)) fail(s, k, fmt::format("{} must be {} {}", out, strict ? ">" : ">=", min));
    return out;
  }
  bool boolean(const char* s, const char* k) const {
    const std::string& t = get(s, k).text;
    if (t == "true" || t == "1" || t == "yes") return true;
    if (t == "false" || t == "0" || t == "no") return false;
    fail(s, k, fmt::format("'{}' is not a boolean (true/false)", t));
  }
  std::string choice(const char* s, const char* k, std::initializer_list<const char*> options) const {
    const std::string& t = get(s, k).text;
    std::string list;
    for (const char* o : options) {
      if (t == o) return t;
      list += (list.empty() ? "" : ", ") + std::string(o);
    }
    fail(s, k, fmt::format("'{}' is not one of: {}", t, list));
  }
  [[noreturn]] void fail(const char* s, const char* k, const std::string& message) const {
    const Value& v = get(s, k);
    throw Error(fmt::format("{}: [{}] {}: {}", v.where == "default" ? file_ : v.where, s, k, message));
  }

 private:
  static std::string id(const std::string& s, const std::string& k) { return s + "." + k; }
  std::string file_;
  std::map<std::string, Value> values_;
};

std::string folder_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

std::string resolve(const std::string& base, const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  return base + path;
}

}  // namespace

JobConfig load_job(const std::string& path, const std::vector<std::string>& overrides) {
  IniDocument doc = IniDocument::parse_file(path);
  Values v(path);
  for (const IniSection& s : doc.sections)
    for (const IniEntry& e : s.entries) v.set(s.name, e.key, e.value, doc.at(e.line).str());
  for (const std::string& o : overrides) {
    const std::string where = fmt::format("--set {}", o);
    size_t eq = o.find('='), dot = o.find('.');
    if (eq == std::string::npos || dot == std::string::npos || dot > eq || trim(o.substr(eq + 1)).empty())
      throw Error(fmt::format("{}: expected section.key=value", where));
    v.set(trim(o.substr(0, dot)), trim(o.substr(dot + 1, eq - dot - 1)), trim(o.substr(eq + 1)), where);
  }

  JobConfig c;
  c.file = path;
  const std::string base = folder_of(path);
  c.name = v.str("job", "name");
  if (c.name.empty()) {
    std::string stem = path.substr(path.find_last_of('/') + 1);
    c.name = stem.substr(0, stem.rfind('.'));
  }
  c.model_path = resolve(base, v.str("job", "model"));
  if (c.model_path.empty()) v.fail("job", "model", "missing (required)");
  c.seed = static_cast<uint64_t>(v.integer("job", "seed", 0));
  c.device = v.choice("job", "device", {"cpu", "cuda", "twin"});
  c.cuda_graphs = v.boolean("job", "cuda_graphs");
  if (c.cuda_graphs && c.device != "cuda") v.fail("job", "cuda_graphs", "needs device = cuda");
  c.cudnn_algorithms = v.choice("job", "cudnn_algorithms", {"heuristic", "measured", "gemm"});
  if (c.cudnn_algorithms != "heuristic" && c.device != "cuda")
    v.fail("job", "cudnn_algorithms", c.cudnn_algorithms + " needs device = cuda");
  c.threads = static_cast<int>(v.integer("job", "threads", 0));

  c.data_source = v.choice("data", "source", {"fashion-mnist", "hdf5", "synthetic"});
  c.data_dir = resolve(base, v.str("data", "dir"));
  c.train_file = resolve(base, v.str("data", "train_file"));
  c.test_file = resolve(base, v.str("data", "test_file"));
  if (c.data_source == "hdf5" && c.train_file.empty()) v.fail("data", "train_file", "required when source = hdf5");
  c.images_dataset = v.str("data", "images_dataset");
  c.labels_dataset = v.str("data", "labels_dataset");
  c.norm.mean = v.number("data", "normalize_mean", -1e30f);
  c.norm.std = v.number("data", "normalize_std", 0.0f, true);
  c.synthetic_train = static_cast<int>(v.integer("data", "synthetic_train_samples", 1));
  c.synthetic_test = static_cast<int>(v.integer("data", "synthetic_test_samples", 0));

  c.batch_size = static_cast<int>(v.integer("train", "batch_size", 1));
  c.steps = v.integer("train", "steps", 0);
  c.epochs = static_cast<int>(v.integer("train", "epochs", 1));
  c.eval_every = v.integer("train", "eval_every", 0);
  c.log_every = v.integer("train", "log_every", 1);
  c.target_accuracy = v.number("train", "target_accuracy", 0.0f);
  if (c.target_accuracy > 1) v.fail("train", "target_accuracy", "must be at most 1");
  c.stop_at_target = v.boolean("train", "stop_at_target");

  v.choice("optimizer", "type", {"sgd"});
  c.lr = v.number("optimizer", "lr", 0.0f, true);
  c.sgd.momentum = v.number("optimizer", "momentum", 0.0f);
  if (c.sgd.momentum >= 1.0f) v.fail("optimizer", "momentum", "must be below 1");
  c.sgd.nesterov = v.boolean("optimizer", "nesterov");
  if (c.sgd.nesterov && c.sgd.momentum == 0.0f) v.fail("optimizer", "nesterov", "needs momentum > 0");
  c.sgd.weight_decay = v.number("optimizer", "weight_decay", 0.0f);

  bool ok = true;
  c.schedule.kind = LrSchedule::parse_kind(v.choice("schedule", "type", {"constant", "step", "cosine"}), ok);
  c.schedule.base_lr = c.lr;
  c.schedule.warmup_steps = v.integer("schedule", "warmup_steps", 0);
  c.schedule.step_size = v.integer("schedule", "step_size", 0);
  if (c.schedule.kind == LrSchedule::Kind::step && c.schedule.step_size < 1)
    v.fail("schedule", "step_size", "must be >= 1 when type = step");
  c.schedule.gamma = v.number("schedule", "gamma", 0.0f, true);
  c.schedule.min_lr = v.number("schedule", "min_lr", 0.0f);

  c.plan_path = resolve(base, v.str("parallel", "plan"));
  c.bucket_bytes = static_cast<size_t>(v.number("parallel", "bucket_mb", 0.0f, true) * 1024.0f * 1024.0f);
  c.layer_timing = v.boolean("parallel", "layer_timing");
  c.sync_batchnorm = v.boolean("parallel", "sync_batchnorm");

  c.metrics_path = v.str("output", "metrics");
  c.checkpoint_path = v.str("output", "checkpoint");
  c.checkpoint_every = v.integer("output", "checkpoint_every", 0);
  c.checkpoint_seconds = v.number("output", "checkpoint_seconds", 0.0f);

  c.sync.strategy = v.choice("sync", "strategy", {"ssgd", "sma", "shadow", "local-sgd"});
  c.sync.learners = static_cast<int>(v.integer("sync", "learners", 0));
  c.sync.max_learners = static_cast<int>(v.integer("sync", "max_learners", 1));
  c.sync.autotune_threshold = v.number("sync", "autotune_threshold", 0.0f);
  c.sync.autotune_steps = static_cast<int>(v.integer("sync", "autotune_steps", 1));
  c.sync.alpha = v.number("sync", "alpha", 0.0f);
  if (c.sync.alpha > 1) v.fail("sync", "alpha", "must be at most 1");
  c.sync.average_momentum = v.number("sync", "average_momentum", 0.0f);
  if (c.sync.average_momentum >= 1) v.fail("sync", "average_momentum", "must be below 1");
  c.sync.local_steps = static_cast<int>(v.integer("sync", "local_steps", 1));
  c.sync.shadow_pause_ms = v.number("sync", "shadow_pause_ms", 0.0f);
  if (c.sync.strategy == "shadow" && c.sync.learners > 1) v.fail("sync", "learners", "shadow runs one learner per rank");
  if (c.sync.strategy != "ssgd" && c.sync.strategy != "sma" && c.sync.learners == 0) c.sync.learners = 1;
  if (c.sync.strategy == "sma" && c.sgd.nesterov) v.fail("optimizer", "nesterov", "sma uses plain momentum (the CROSSBOW update, docs/learners.md)");
  if (c.sync.strategy != "ssgd" && !c.plan_path.empty()) v.fail("parallel", "plan", "plans are for ssgd; small-batch learners each hold the whole model");
  const std::string background = v.str("background", "job");
  c.background.job_path = background == "none" ? "" : resolve(base, background);
  c.background.calibrate_steps = static_cast<int>(v.integer("background", "calibrate_steps", 2));
  c.background.max_slowdown = v.number("background", "max_slowdown", 1.0f);
  c.background.pause_in_allreduce = v.boolean("background", "pause_in_allreduce");
  c.background.wait_spin_us = static_cast<int>(v.integer("background", "wait_spin_us", 0));
  c.background.wait_sleep_us = static_cast<int>(v.integer("background", "wait_sleep_us", 1));
  c.background.wait_backoff = v.number("background", "wait_backoff", 0.0f);
  c.background.wait_predict = v.number("background", "wait_predict", 0.0f);
  if (c.background.wait_predict >= 1.0f) v.fail("background", "wait_predict", "must be below 1");
  return c;
}

}  // namespace burstpool
