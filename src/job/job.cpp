#include "burstpool/job.hpp"

#include <cmath>
#include <map>

#include "burstpool/error.hpp"
#include "burstpool/ini.hpp"
#include "sync/registry.hpp"

namespace burstpool {

const std::vector<JobKey>& job_schema() {
  static const std::vector<JobKey> keys = {
      {"job", "name", "", "text", "", "Name used in progress output and metrics; default: the job file's name"},
      {"job", "model", "", "path", "", "Model file (.ini or .h5), relative to the job file's folder. Required"},
      {"job", "seed", "1", "integer", "[0, 2147483647]", "Seed for weight initialisation, shuffling, dropout and synthetic data"},
      {"job", "device", "cpu", "cpu | cuda | twin", "", "Where layers run. cuda: the GPU of the rank's node-local rank (ranks may share one), any plan or [sync] strategy; a background job may say cuda too (docs/cuda.md); needs a build with the CUDA backend. twin: for testing, the device code paths with a second copy of the model in host memory standing in for the GPU (the CPU's results, slower; docs/cuda.md)"},
      {"job", "cuda_graphs", "false", "boolean", "", "device = cuda: capture each training step's forward and backward layers in CUDA graphs and replay them, where nothing in them waits for the host (one rank or ranks sharing a GPU, no batch-norm group sums; docs/cuda.md)"},
      {"job", "cudnn_algorithms", "heuristic", "heuristic | measured | gemm", "", "device = cuda: how each convolution's cuDNN algorithms are chosen, deterministic ones only. heuristic: cuDNN's heuristic ranking, the same on every run, so runs repeat bit for bit; measured: each candidate timed once at the start, as PyTorch's cudnn.benchmark: faster, but the choice, and with it the bits, can change from run to run; gemm: heuristic among the algorithms that sum products directly (no FFT or Winograd transforms, which round more): results within float rounding of the CPU's, slower (docs/cuda.md)"},
      {"job", "threads", "0", "threads", "[0, 1024]", "Threads per rank; 0: OMP_NUM_THREADS, else 1 under MPI with several ranks, else all cores"},
      {"job", "memory_limit_gb", "0", "GiB", "[0, 1048576]", "Memory the ranks of one node may use together, against which the run's estimate (parameters, optimizer state, activations, layer buffers, data; docs/jobs.md) is checked before anything large is allocated; 0: what the node has free (MemAvailable, or the cgroup's limit when lower, as under Slurm). A run whose estimate exceeds it is refused, naming its largest layers. On a GPU the device's free memory is checked too"},
      {"data", "source", "fashion-mnist", "fashion-mnist | hdf5 | synthetic", "", "Where samples come from"},
      {"data", "dir", "/usr/share/datasets/fashion-mnist", "path", "", "fashion-mnist: folder with the four IDX files (.gz or plain)"},
      {"data", "train_file", "", "path", "", "hdf5: training file, relative to the job file's folder"},
      {"data", "test_file", "", "path", "", "hdf5: test file; empty: no evaluation"},
      {"data", "images_dataset", "images", "HDF5 path", "", "hdf5: images dataset, (N,H,W) or (N,C,H,W), uint8 or float"},
      {"data", "labels_dataset", "labels", "HDF5 path", "", "hdf5: labels dataset, (N) integers"},
      {"data", "check_finite", "true", "boolean", "", "hdf5: refuse float images holding NaN or infinite values: at load when read whole (one pass over the data; false skips it for very large files), else as each batch is read"},
      {"data", "read", "auto", "auto | whole | batches", "", "hdf5: how images are held. whole: every rank reads all of them into memory at the start; batches: only the labels are held, and each rank reads from the file just the samples of each batch it trains on (hyperslabs; the page cache keeps a file that fits in memory there); auto: batches for a file whose images take more than 512 MiB as float32, else whole. Results are the same bit for bit"},
      {"data", "normalize_mean", "0", "pixel value", "[-1e6, 1e6]", "Subtracted after scaling bytes to [0,1]"},
      {"data", "normalize_std", "1", "pixel value", "(0, 1e6]", "Divides after subtracting the mean; > 0"},
      {"data", "synthetic_train_samples", "1024", "samples", "[1, 100000000]", "synthetic: training set size"},
      {"data", "synthetic_test_samples", "256", "samples", "[0, 100000000]", "synthetic: test set size; 0: no evaluation"},
      {"train", "batch_size", "64", "samples", "[1, 10000000]", "Global batch per step, summed over all ranks (sync.strategy = ssgd). For sma, shadow and local-sgd use learner_batch_size; batch_size still works there as each learner's batch, with a note"},
      {"train", "learner_batch_size", "0", "samples", "[0, 10000000]", "sync.strategy = sma, shadow or local-sgd: the samples each learner takes per iteration; 0: batch_size"},
      {"train", "steps", "0", "steps", "[0, 2147483647]", "Training steps; 0: epochs decide"},
      {"train", "epochs", "1", "epochs", "[1, 1000000]", "Passes over the training set when steps = 0 (last partial batch dropped)"},
      {"train", "eval_every", "0", "steps", "[0, 2147483647]", "Test-set evaluation cadence; 0: at the end of every epoch. Always at the end"},
      {"train", "log_every", "100", "steps", "[1, 2147483647]", "Progress line cadence on rank 0"},
      {"train", "target_accuracy", "0", "fraction", "[0, 1]", "Test accuracy to reach: the metrics record the training seconds and epochs to the first evaluation at or above it; 0: none"},
      {"train", "stop_at_target", "false", "boolean", "", "End training at the first evaluation that reaches target_accuracy"},
      {"optimizer", "type", "sgd", "sgd", "", "Optimizer"},
      {"optimizer", "lr", "0.1", "learning rate", "(0, 100]", "Base learning rate"},
      {"optimizer", "momentum", "0.9", "factor", "[0, 1)", "Momentum; 0 disables it"},
      {"optimizer", "nesterov", "false", "boolean", "", "Nesterov momentum"},
      {"optimizer", "weight_decay", "0", "factor", "[0, 1]", "L2 weight decay added to every parameter's gradient"},
      {"schedule", "type", "constant", "constant | step | cosine", "", "Learning-rate schedule over training steps"},
      {"schedule", "warmup_steps", "0", "steps", "[0, 2147483647]", "Linear warm-up from lr/warmup_steps to lr"},
      {"schedule", "step_size", "0", "steps", "[0, 2147483647]", "step: multiply the rate by gamma every step_size steps"},
      {"schedule", "gamma", "0.1", "factor", "(0, 1]", "step: decay factor"},
      {"schedule", "min_lr", "0", "learning rate", "[0, optimizer.lr]", "cosine: rate reached at the last step"},
      {"parallel", "plan", "", "path | auto", "", "Plan file (JSON) giving each layer its ranks; empty: data parallel over all ranks. Relative to the job file's folder. auto: planned at start-up from the layer and network profiles in profile_cache, measured there once (docs/parallel.md)"},
      {"parallel", "amp_limit", "2", "ratio", "[1, 1000000]", "plan = auto: the amplification limit: a layer gets n ranks only if n x its time on them <= amp_limit x its time on one (docs/profiles.md)"},
      {"parallel", "amp_rule", "compute", "compute | layer-time", "", "plan = auto: what the limit bounds: the layer's compute, or its compute, gradient sync and incoming transfers (DeepPool's rule)"},
      {"parallel", "profile_cache", "burstpool-profiles", "path", "", "plan = auto: folder of cached layer profiles (per model, device, threads and host) and network profiles (per rank count and hosts), relative to the working folder"},
      {"parallel", "bucket_mb", "25", "MiB", "(0, 4096]", "Gradient allreduce bucket size"},
      {"parallel", "layer_timing", "false", "boolean", "", "Report transfer and allreduce seconds per layer in the metrics; each layer's gradient allreduce then runs on its own, without overlap"},
      {"parallel", "sync_batchnorm", "true", "boolean", "", "Batch-norm statistics over all ranks of a layer (the same result as one rank); false: each rank normalises its own slice, as PyTorch DDP does without SyncBatchNorm, and no reduction runs inside the step (evaluations and checkpoints then use each layer's first rank's running statistics)"},
      {"output", "metrics", "", "path", "", "Metrics JSON written at the end (relative to the working folder); {job_id}, {job} and {ranks} expand to the Slurm job id (or 'local'), the job name and the rank count"},
      {"output", "log", "", "path", "", "Progress as JSON Lines: one record per progress line and per evaluation (wall seconds, step, epoch, loss, samples/s, learning rate, accuracy), flushed as written and appended to, so a resumed run continues it (docs/jobs.md). Placeholders as for metrics; empty: none"},
      {"output", "checkpoint", "", "path", "", "HDF5 checkpoint, written atomically at the end and at the cadences below; the previous one is kept as <path>.prev. --resume continues from the newer valid one. Placeholders as for metrics"},
      {"output", "checkpoint_every", "0", "steps", "[0, 2147483647]", "Checkpoint cadence in steps; 0: only at the end"},
      {"output", "checkpoint_seconds", "0", "seconds", "[0, 10000000]", "Checkpoint cadence in wall seconds (decided on rank 0); 0: off"},
      {"sync", "strategy", "ssgd", "ssgd | sma | shadow | local-sgd", "", "How replicas stay together (docs/learners.md): ssgd = synchronous SGD over the plan; sma = synchronous model averaging of small-batch learners; shadow = learners never wait, a thread per rank averages models in the background; local-sgd = average every local_steps. For sma, shadow and local-sgd, [train] learner_batch_size is each learner's batch"},
      {"sync", "learners", "0", "learners", "[0, 64]", "Learners (model replicas, one thread each) per rank; 0: auto-tuned for sma, 1 otherwise. shadow takes 1"},
      {"sync", "max_learners", "8", "learners", "[1, 64]", "Most learners per rank the auto-tuner tries"},
      {"sync", "autotune_threshold", "0.1", "fraction", "[0, 1]", "The auto-tuner adds a learner while throughput grows by more than this; on the first smaller gain it removes the last one and stops"},
      {"sync", "autotune_steps", "30", "iterations", "[1, 100000]", "Iterations timed per learner count while auto-tuning (after 3 untimed)"},
      {"sync", "alpha", "0.1", "factor", "(0, 1]", "sma: pull of each learner towards the average model"},
      {"sync", "average_momentum", "0.9", "factor", "[0, 1)", "sma: momentum on the average model"},
      {"sync", "sma_average", "device", "device | host", "", "sma with [job] device = cuda or twin: where each learner's copy of the average model z lives. device: z and z_prev stay on the device and move there by the same float operations as on the host, so per iteration only the learner's correction comes back and the summed correction goes up; host: z goes up before every learner step"},
      {"sync", "local_steps", "8", "iterations", "[1, 1000000]", "local-sgd: iterations between model averages"},
      {"sync", "shadow_pause_ms", "0", "milliseconds", "[0, 60000]", "shadow: pause between two background averaging rounds"},
      {"sync", "shadow_rule", "average", "average | elastic | block-momentum", "", "shadow: what each background round does with the ranks' snapshots (ShadowSync's rules, docs/learners.md): move each model to the mean; elastic averaging (each model pulled towards a centre, the centre towards the models, by shadow_alpha); or block momentum (BMUF: a global model moved by a momentum-filtered block update)"},
      {"sync", "shadow_alpha", "0.5", "factor", "(0, 1]", "shadow_rule = elastic: the pull between each model and the centre (a round moves the centre by shadow_alpha x the sum of the models' distances from it; keep shadow_alpha x ranks <= 1)"},
      {"sync", "shadow_block_momentum", "0.5", "factor", "[0, 1)", "shadow_rule = block-momentum: the momentum on the block update"},
      {"sync", "shadow_block_lr", "1", "factor", "(0, 2]", "shadow_rule = block-momentum: the block learning rate (1 with momentum 0 is plain averaging)"},
      {"background", "job", "", "path", "", "A background job file trained beside this one on the same ranks (data parallel, or a replica per rank: sync), in its own thread (at idle priority when its layers run on the CPU: thread_priority), on its own communicator (docs/multiplexing.md); empty or none: no background job (--set background.job=none switches it off). Relative to this job file's folder"},
      {"background", "calibrate_steps", "10", "steps", "[2, 1000]", "Steps each job first runs alone to measure its speed alone: a planned foreground trained data parallel (the cluster-throughput reference), the background, then the foreground under its plan; >= 2"},
      {"background", "max_slowdown", "1.1", "factor", "[1, 10]", "The background starts a piece (one layer) only while the foreground's last step took at most this times its time alone"},
      {"background", "pause_in_allreduce", "false", "boolean", "", "Also hold the background back while the foreground waits in a reduction (for devices where the two compete; on CPUs that wait is the background's chance)"},
      {"background", "wait_spin_us", "200", "microseconds", "[0, 100000]", "While a background job runs, a foreground wait polls this long before it starts sleeping"},
      {"background", "wait_sleep_us", "20", "microseconds", "[1, 100000]", "... then sleeps between polls, leaving the core to the background: at least this long"},
      {"background", "wait_predict", "0.8", "fraction", "[0, 1)", "A foreground wait at a place where the last two waits took at least T (the shorter) first sleeps this fraction of T in one piece: the background gets the foreground's idle stretch whole"},
      {"background", "sync", "data-parallel", "data-parallel | none", "", "How the background job's ranks train together: data parallel over the same ranks (its gradients summed on its own communicator), or none: each rank trains a replica of its own on the whole background batch, from the job's seed plus its rank, and meets no other rank (as DeepPool's background jobs do); its rates are then summed over the ranks, and its checkpoint holds rank 0's replica"},
      {"background", "pieces_in_flight", "2", "pieces", "[1, 8]", "On a GPU: how many of the background's pieces (a layer's forward or backward each) may be queued on its stream at once; the gate is asked before each, and the host waits for the oldest only when this many are queued (1: it waits for each piece before asking about the next)"},
      {"background", "thread_priority", "auto", "auto | idle | normal", "", "The background thread's scheduling: idle (SCHED_IDLE, else nice 19: it runs only while the foreground leaves the core free), normal, or auto: idle when the background job's layers run on the CPU, normal when they run on a device (cuda, twin), where the thread only launches work and the device's stream priorities order it"},
      {"background", "cuda_wait", "block", "block | spin", "", "With a background job and a GPU: how the process's threads wait for the GPU. block (cudaDeviceScheduleBlockingSync) sleeps, leaving the core to the other job's thread; spin polls, which answers a few microseconds sooner but holds the core. Process-wide (CUDA sets it per device): the foreground job's key decides"},
      {"background", "wait_backoff", "0.02", "fraction", "[0, 1]", "... and at least this fraction of the time waited so far, so long waits hand over the core in long pieces; the foreground then wakes at most about this fraction of its wait late"},
  };
  return keys;
}

std::string job_schema_markdown() {
  std::string out = "| section | key | default | unit | range | meaning |\n|---|---|---|---|---|---|\n";
  for (const JobKey& k : job_schema())
    out += fmt::format("| [{}] | `{}` | {} | {} | {} | {} |\n", k.section, k.key,
                       *k.fallback ? fmt::format("`{}`", k.fallback) : "(none)", k.unit,
                       *k.range ? fmt::format("`{}`", k.range) : "", k.meaning);
  return out;
}

namespace {

// One end of a JobKey range: a number, or another key as "section.key".
struct Bound {
  double value = 0;
  std::string key;
  bool open = false;
};
struct Range {
  Bound lo, hi;
};

// "[0, 1)", "[0, optimizer.lr]": the schema's own text, so a malformed one is a bug.
Range parse_range(const std::string& text) {
  const size_t comma = text.find(',');
  BP_CHECK(text.size() >= 5 && comma != std::string::npos && (text[0] == '[' || text[0] == '(') &&
               (text.back() == ']' || text.back() == ')'),
           "bad range '{}' in the job schema", text);
  auto bound = [&](std::string t, bool open) {
    Bound b;
    t = trim(t);
    b.open = open;
    float v = 0;
    if (parse_float(t, v))
      b.value = v;
    else
      b.key = t;
    return b;
  };
  return {bound(text.substr(1, comma - 1), text[0] == '('),
          bound(text.substr(comma + 1, text.size() - comma - 2), text.back() == ')')};
}

struct Value {
  std::string text;
  std::string where;  // "file:line" or "--set section.key=value"
  const char* range = "";
};

class Values {
 public:
  Values(const std::string& file) : file_(file) {
    for (const JobKey& k : job_schema()) values_[id(k.section, k.key)] = {k.fallback, "default", k.range};
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
    it->second.text = text;
    it->second.where = where;
  }
  const Value& get(const char* section, const char* key) const { return values_.at(id(section, key)); }
  // Whether the job file or an override set the key (else it has its default).
  bool given(const char* section, const char* key) const { return get(section, key).where != "default"; }

  std::string str(const char* s, const char* k) const { return get(s, k).text; }
  // Numbers, checked against the schema's range.
  int64_t integer(const char* s, const char* k) const {
    const Value& v = get(s, k);
    int out;
    if (!parse_int(v.text, out)) fail(s, k, fmt::format("'{}' is not an integer (or beyond 32 bits)", v.text));
    check_range(s, k, out);
    return out;
  }
  float number(const char* s, const char* k) const {
    const Value& v = get(s, k);
    float out;
    if (!parse_float(v.text, out) || !std::isfinite(out)) fail(s, k, fmt::format("'{}' is not a number", v.text));
    check_range(s, k, out);
    return out;
  }
  bool boolean(const char* s, const char* k) const {
    const std::string& t = get(s, k).text;
    if (t == "true" || t == "1" || t == "yes") return true;
    if (t == "false" || t == "0" || t == "no") return false;
    fail(s, k, fmt::format("'{}' is not a boolean (true/false)", t));
  }
  std::string choice(const char* s, const char* k, const std::vector<std::string>& options) const {
    const std::string& t = get(s, k).text;
    std::string list;
    for (const std::string& o : options) {
      if (t == o) return t;
      list += (list.empty() ? "" : ", ") + o;
    }
    fail(s, k, fmt::format("'{}' is not one of: {}", t, list));
  }
  // T: int or float, so that messages print the value as it was read.
  template <class T>
  void check_range(const char* s, const char* k, T x) const {
    const Value& v = get(s, k);
    BP_CHECK(*v.range, "job schema: number [{}] {} has no range", s, k);
    const Range r = parse_range(v.range);
    auto value_of = [&](const Bound& b) {  // a number, or "section.key"
      if (b.key.empty()) return b.value;
      const size_t dot = b.key.find('.');
      return static_cast<double>(number(b.key.substr(0, dot).c_str(), b.key.substr(dot + 1).c_str()));
    };
    const float lo = static_cast<float>(value_of(r.lo)), hi = static_cast<float>(value_of(r.hi));
    if (x < lo || x > hi || (r.lo.open && x == lo) || (r.hi.open && x == hi)) {
      const std::string text = v.range;
      const std::string named =
          r.lo.key.empty() && r.hi.key.empty() ? "" : fmt::format(" = {}{}, {}{}", text.front(), lo, hi, text.back());
      fail(s, k, fmt::format("{} is outside {}{}", x, v.range, named));
    }
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

// One batch key per meaning: [train] learner_batch_size is a learner's batch
// (sma, shadow, local-sgd), batch_size the global batch (ssgd). Learners still
// read batch_size as their batch when learner_batch_size is not given, with a
// note. c.batch_size ends as the batch the strategy's loop takes.
static void learner_batch(const Values& v, JobConfig& c) {
  const int learner = static_cast<int>(v.integer("train", "learner_batch_size"));
  if (c.sync.strategy == "ssgd") {
    if (learner > 0) v.fail("train", "learner_batch_size", "is for sma, shadow and local-sgd; ssgd takes batch_size");
    return;
  }
  if (learner == 0) {
    if (v.given("train", "batch_size"))
      c.batch_note = fmt::format("note: [train] batch_size = {} is read as each learner's batch (sync.strategy = {}); "
                                 "name it [train] learner_batch_size",
                                 c.batch_size, c.sync.strategy);
    return;
  }
  if (v.given("train", "batch_size") && c.batch_size != learner)
    v.fail("train", "learner_batch_size",
           fmt::format("{} and batch_size {} both give the learners' batch; keep learner_batch_size", learner,
                       c.batch_size));
  c.batch_size = learner;
}

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
  c.seed = static_cast<uint64_t>(v.integer("job", "seed"));
  c.device = v.choice("job", "device", {"cpu", "cuda", "twin"});
  c.cuda_graphs = v.boolean("job", "cuda_graphs");
  if (c.cuda_graphs && c.device != "cuda") v.fail("job", "cuda_graphs", "needs device = cuda");
  c.cudnn_algorithms = v.choice("job", "cudnn_algorithms", {"heuristic", "measured", "gemm"});
  if (c.cudnn_algorithms != "heuristic" && c.device != "cuda")
    v.fail("job", "cudnn_algorithms", c.cudnn_algorithms + " needs device = cuda");
  c.threads = static_cast<int>(v.integer("job", "threads"));
  c.memory_limit_gb = v.number("job", "memory_limit_gb");

  c.data_source = v.choice("data", "source", {"fashion-mnist", "hdf5", "synthetic"});
  c.data_dir = resolve(base, v.str("data", "dir"));
  c.train_file = resolve(base, v.str("data", "train_file"));
  c.test_file = resolve(base, v.str("data", "test_file"));
  if (c.data_source == "hdf5" && c.train_file.empty()) v.fail("data", "train_file", "required when source = hdf5");
  c.images_dataset = v.str("data", "images_dataset");
  c.check_finite = v.boolean("data", "check_finite");
  c.data_read = v.choice("data", "read", {"auto", "whole", "batches"});
  c.labels_dataset = v.str("data", "labels_dataset");
  c.norm.mean = v.number("data", "normalize_mean");
  c.norm.std = v.number("data", "normalize_std");
  c.synthetic_train = static_cast<int>(v.integer("data", "synthetic_train_samples"));
  c.synthetic_test = static_cast<int>(v.integer("data", "synthetic_test_samples"));

  c.batch_size = static_cast<int>(v.integer("train", "batch_size"));
  c.steps = v.integer("train", "steps");
  c.epochs = static_cast<int>(v.integer("train", "epochs"));
  c.eval_every = v.integer("train", "eval_every");
  c.log_every = v.integer("train", "log_every");
  c.target_accuracy = v.number("train", "target_accuracy");
  c.stop_at_target = v.boolean("train", "stop_at_target");
  if (c.stop_at_target && c.target_accuracy <= 0) v.fail("train", "stop_at_target", "needs a target_accuracy > 0");
  const bool no_test = (c.data_source == "synthetic" && c.synthetic_test == 0) ||
                       (c.data_source == "hdf5" && c.test_file.empty());
  if (c.stop_at_target && no_test) v.fail("train", "stop_at_target", "needs a test set, and this job has none");

  v.choice("optimizer", "type", {"sgd"});
  c.lr = v.number("optimizer", "lr");
  c.sgd.momentum = v.number("optimizer", "momentum");
  c.sgd.nesterov = v.boolean("optimizer", "nesterov");
  if (c.sgd.nesterov && c.sgd.momentum == 0.0f) v.fail("optimizer", "nesterov", "needs momentum > 0");
  c.sgd.weight_decay = v.number("optimizer", "weight_decay");

  bool ok = true;
  c.schedule.kind = LrSchedule::parse_kind(v.choice("schedule", "type", {"constant", "step", "cosine"}), ok);
  c.schedule.base_lr = c.lr;
  c.schedule.warmup_steps = v.integer("schedule", "warmup_steps");
  c.schedule.step_size = v.integer("schedule", "step_size");
  if (c.schedule.kind == LrSchedule::Kind::step && c.schedule.step_size < 1)
    v.fail("schedule", "step_size", "must be >= 1 when type = step");
  c.schedule.gamma = v.number("schedule", "gamma");
  c.schedule.min_lr = v.number("schedule", "min_lr");

  const std::string plan = v.str("parallel", "plan");
  c.plan_path = plan == "auto" ? plan : resolve(base, plan);
  c.amp_limit = v.number("parallel", "amp_limit");
  c.amp_rule = v.choice("parallel", "amp_rule", {"compute", "layer-time"});
  c.profile_cache = v.str("parallel", "profile_cache");
  c.bucket_bytes = static_cast<size_t>(v.number("parallel", "bucket_mb") * 1024.0f * 1024.0f);
  c.layer_timing = v.boolean("parallel", "layer_timing");
  c.sync_batchnorm = v.boolean("parallel", "sync_batchnorm");

  c.metrics_path = v.str("output", "metrics");
  c.log_path = v.str("output", "log");
  c.checkpoint_path = v.str("output", "checkpoint");
  c.checkpoint_every = v.integer("output", "checkpoint_every");
  c.checkpoint_seconds = v.number("output", "checkpoint_seconds");

  std::vector<std::string> strategies = {"ssgd"};  // and the learners' (src/sync/registry.cpp)
  for (const std::string& name : learner_strategy_names()) strategies.push_back(name);
  c.sync.strategy = v.choice("sync", "strategy", strategies);
  c.sync.learners = static_cast<int>(v.integer("sync", "learners"));
  c.sync.max_learners = static_cast<int>(v.integer("sync", "max_learners"));
  c.sync.autotune_threshold = v.number("sync", "autotune_threshold");
  c.sync.autotune_steps = static_cast<int>(v.integer("sync", "autotune_steps"));
  c.sync.alpha = v.number("sync", "alpha");
  c.sync.average_momentum = v.number("sync", "average_momentum");
  c.sync.sma_average = v.choice("sync", "sma_average", {"device", "host"});
  c.sync.local_steps = static_cast<int>(v.integer("sync", "local_steps"));
  c.sync.shadow_pause_ms = v.number("sync", "shadow_pause_ms");
  c.sync.shadow_rule = v.choice("sync", "shadow_rule", {"average", "elastic", "block-momentum"});
  c.sync.shadow_alpha = v.number("sync", "shadow_alpha");
  c.sync.shadow_block_momentum = v.number("sync", "shadow_block_momentum");
  c.sync.shadow_block_lr = v.number("sync", "shadow_block_lr");
  if (c.sync.strategy == "shadow" && c.sync.learners > 1) v.fail("sync", "learners", "shadow runs one learner per rank");
  if (c.sync.strategy != "ssgd" && c.sync.strategy != "sma" && c.sync.learners == 0) c.sync.learners = 1;
  if (c.sync.strategy == "sma" && c.sgd.nesterov) v.fail("optimizer", "nesterov", "sma uses plain momentum (the CROSSBOW update, docs/learners.md)");
  if (c.sync.strategy != "ssgd" && !c.plan_path.empty()) v.fail("parallel", "plan", "plans are for ssgd; small-batch learners each hold the whole model");
  learner_batch(v, c);
  const std::string background = v.str("background", "job");
  c.background.job_path = background == "none" ? "" : resolve(base, background);
  c.background.calibrate_steps = static_cast<int>(v.integer("background", "calibrate_steps"));
  c.background.max_slowdown = v.number("background", "max_slowdown");
  c.background.pause_in_allreduce = v.boolean("background", "pause_in_allreduce");
  c.background.wait_spin_us = static_cast<int>(v.integer("background", "wait_spin_us"));
  c.background.wait_sleep_us = static_cast<int>(v.integer("background", "wait_sleep_us"));
  c.background.wait_backoff = v.number("background", "wait_backoff");
  c.background.wait_predict = v.number("background", "wait_predict");
  c.background.sync = v.choice("background", "sync", {"data-parallel", "none"});
  c.background.pieces_in_flight = static_cast<int>(v.integer("background", "pieces_in_flight"));
  c.background.thread_priority = v.choice("background", "thread_priority", {"auto", "idle", "normal"});
  c.background.cuda_wait = v.choice("background", "cuda_wait", {"block", "spin"});
  if (!c.background.job_path.empty() && c.steps > 0 && c.background.calibrate_steps >= c.steps)
    v.fail("background", "calibrate_steps",
           fmt::format("{} must be below the run's {} steps (the foreground first runs that many alone)",
                       c.background.calibrate_steps, c.steps));
  return c;
}

}  // namespace burstpool
