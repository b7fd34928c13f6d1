#include "burstpool/job.hpp"

#include <cmath>
#include <map>

#include "burstpool/error.hpp"
#include "burstpool/ini.hpp"
#include "sync/registry.hpp"

namespace burstpool {

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

// One batch key per meaning: [train] learner_batch_size is a learner's batch
// (sma, shadow, local-sgd), batch_size the global batch (ssgd). Learners still
// read batch_size as their batch when learner_batch_size is not given, with a
// note. c.batch_size ends as the batch the strategy's loop takes.
void learner_batch(const Values& v, JobConfig& c) {
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

// Every key of the file, then the overrides (--set section.key=value).
Values read_values(const std::string& path, const std::vector<std::string>& overrides) {
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
  return v;
}

void read_job(const Values& v, const std::string& path, const std::string& base, JobConfig& c) {
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
  c.device_whole_model = v.choice("job", "device_calls", {"whole_model", "per_layer"}) == "whole_model";
  if (!c.device_whole_model && c.device == "cpu")
    v.fail("job", "device_calls", "per_layer needs device = cuda or twin (the CPU always runs layer by layer)");
  if (!c.device_whole_model && c.cuda_graphs)
    v.fail("job", "cuda_graphs", "CUDA graphs capture the whole-model calls: needs device_calls = whole_model");
  c.cudnn_algorithms = v.choice("job", "cudnn_algorithms", {"heuristic", "measured", "gemm"});
  if (c.cudnn_algorithms != "heuristic" && c.device != "cuda")
    v.fail("job", "cudnn_algorithms", c.cudnn_algorithms + " needs device = cuda");
  const std::string cache = v.str("job", "cudnn_cache");
  c.cudnn_cache = cache.empty() || cache == "none" ? cache : resolve(base, cache);
  if (!cache.empty() && cache != "none" && c.cudnn_algorithms != "measured")
    v.fail("job", "cudnn_cache", "needs cudnn_algorithms = measured (the other choices are the same on every run)");
  c.precision = v.choice("job", "precision", {"fp32", "tf32", "bf16"});
  if (c.precision == "tf32" && c.device != "cuda")
    v.fail("job", "precision", "tf32 needs device = cuda (the CPU has fp32 and bf16)");
  c.threads = static_cast<int>(v.integer("job", "threads"));
  c.memory_limit_gb = v.number("job", "memory_limit_gb");
}

void read_data(const Values& v, const std::string& base, JobConfig& c) {
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
}

void read_train(const Values& v, JobConfig& c) {
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
}

void read_optimizer(const Values& v, JobConfig& c) {
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
}

void read_parallel_and_output(const Values& v, const std::string& base, JobConfig& c) {
  const std::string plan = v.str("parallel", "plan");
  c.plan_path = plan == "auto" ? plan : resolve(base, plan);
  c.amp_limit = v.number("parallel", "amp_limit");
  c.amp_rule = v.choice("parallel", "amp_rule", {"compute", "layer-time"});
  c.auto_min_gain = v.number("parallel", "auto_min_gain");
  c.branches = v.choice("parallel", "branches", {"auto", "in-turn", "at-once"});
  c.profile_cache = v.str("parallel", "profile_cache");
  c.bucket_bytes = static_cast<size_t>(v.number("parallel", "bucket_mb") * 1024.0f * 1024.0f);
  c.progress_us = static_cast<int>(v.number("parallel", "progress_us"));
  c.layer_timing = v.boolean("parallel", "layer_timing");
  c.sync_batchnorm = v.boolean("parallel", "sync_batchnorm");

  c.metrics_path = v.str("output", "metrics");
  c.log_path = v.str("output", "log");
  c.checkpoint_path = v.str("output", "checkpoint");
  c.checkpoint_every = v.integer("output", "checkpoint_every");
  c.checkpoint_seconds = v.number("output", "checkpoint_seconds");
}

// After the optimizer and the plan, which the strategies constrain.
void read_sync(const Values& v, JobConfig& c) {
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
  c.sync.agreement_lag = static_cast<int>(v.integer("sync", "agreement_lag"));
  c.sync.shadow_pause_ms = v.number("sync", "shadow_pause_ms");
  c.sync.shadow_rule = v.choice("sync", "shadow_rule", {"average", "elastic", "block-momentum"});
  c.sync.shadow_alpha = v.number("sync", "shadow_alpha");
  c.sync.shadow_block_momentum = v.number("sync", "shadow_block_momentum");
  c.sync.shadow_block_lr = v.number("sync", "shadow_block_lr");
  if (c.sync.strategy != "ssgd" && c.sync.strategy != "sma" && c.sync.learners == 0) c.sync.learners = 1;
  if (c.sync.strategy == "sma" && c.sgd.nesterov) v.fail("optimizer", "nesterov", "sma uses plain momentum (the CROSSBOW update, docs/learners.md)");
  if (c.sync.strategy != "ssgd" && !c.plan_path.empty()) v.fail("parallel", "plan", "plans are for ssgd; small-batch learners each hold the whole model");
  learner_batch(v, c);
}

void read_background(const Values& v, const std::string& base, JobConfig& c) {
  const std::string background = v.str("background", "job");
  c.background.job_path = background == "none" ? "" : resolve(base, background);
  c.background.calibrate_steps = static_cast<int>(v.integer("background", "calibrate_steps"));
  c.background.max_slowdown = v.number("background", "max_slowdown");
  c.background.pause_in_allreduce = v.boolean("background", "pause_in_allreduce");
  c.background.wait_spin_us = static_cast<int>(v.integer("background", "wait_spin_us"));
  c.background.wait_sleep_us = static_cast<int>(v.integer("background", "wait_sleep_us"));
  c.background.wait_backoff = v.number("background", "wait_backoff");
  c.background.wait_max_sleep_us = static_cast<int>(v.integer("background", "wait_max_sleep_us"));
  c.background.wait_predict = v.number("background", "wait_predict");
  c.background.wait_predict_min_us = static_cast<int>(v.integer("background", "wait_predict_min_us"));
  c.background.sync = v.choice("background", "sync", {"data-parallel", "none"});
  c.background.pieces_in_flight = static_cast<int>(v.integer("background", "pieces_in_flight"));
  c.background.thread_priority = v.choice("background", "thread_priority", {"auto", "idle", "normal"});
  c.background.cuda_wait = v.choice("background", "cuda_wait", {"block", "spin"});
  if (!c.background.job_path.empty() && c.steps > 0 && c.background.calibrate_steps >= c.steps)
    v.fail("background", "calibrate_steps",
           fmt::format("{} must be below the run's {} steps (the foreground first runs that many alone)",
                       c.background.calibrate_steps, c.steps));
}

}  // namespace

JobConfig load_job(const std::string& path, const std::vector<std::string>& overrides) {
  const Values v = read_values(path, overrides);
  JobConfig c;
  c.file = path;
  const std::string base = folder_of(path);
  read_job(v, path, base, c);
  read_data(v, base, c);
  read_train(v, c);
  read_optimizer(v, c);
  read_parallel_and_output(v, base, c);
  read_sync(v, c);
  read_background(v, base, c);
  return c;
}

}  // namespace burstpool
