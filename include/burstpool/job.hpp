#pragma once
// Job files (INI): what to train, on what data, how, and where results go.
// Every key is declared once in a schema (src/job/job.cpp) with its default, unit
// and meaning; `burstpool keys` prints that table and docs/jobs.md holds it.
#include <cstdint>
#include <string>
#include <vector>

#include "burstpool/data.hpp"
#include "burstpool/optimizer.hpp"

namespace burstpool {

struct JobKey {
  const char* section;
  const char* key;
  const char* fallback;  // default, as text ("" = none)
  const char* unit;
  // Allowed values of a number, in interval notation ("[0, 1)", "(0, 100]");
  // "" for text, paths, choices and booleans. An end may name another key of
  // key ("[0, optimizer.lr]"): checked once both are known. Every number is
  // checked against it, and `burstpool keys` and docs/jobs.md show it.
  const char* range;
  const char* meaning;
};
const std::vector<JobKey>& job_schema();
std::string job_schema_markdown();

// [background]: a second job sharing the ranks (docs/multiplexing.md).
struct BackgroundConfig {
  std::string job_path;  // empty: none
  int calibrate_steps = 10;
  double max_slowdown = 1.1;
  bool pause_in_allreduce = false;
  int wait_spin_us = 200, wait_sleep_us = 20, wait_max_sleep_us = 1000, wait_predict_min_us = 2000;
  double wait_backoff = 0.02, wait_predict = 0.8;
  std::string thread_priority = "auto";  // auto | idle | normal: the background thread's scheduling
  std::string cuda_wait = "block";       // block | spin: how host threads wait for the GPU, with a background job
  std::string sync = "data-parallel";    // data-parallel | none (each rank trains a replica of its own)
  int pieces_in_flight = 2;              // on a GPU: the background's pieces queued at once
};

// [sync]: how replicas stay together (docs/learners.md).
struct SyncConfig {
  std::string strategy = "ssgd";  // ssgd | sma | shadow | local-sgd
  int learners = 0;               // per rank; 0: auto-tuned (sma) or 1
  int max_learners = 8;
  double autotune_threshold = 0.1;
  int autotune_steps = 30;
  float alpha = 0.1f, average_momentum = 0.9f;
  std::string sma_average = "device";  // device | host: where a device learner's copy of z lives
  int local_steps = 8;
  int agreement_lag = 32;  // iterations before an iteration's agreement is awaited (RunSteps::agreement_lag)
  double shadow_pause_ms = 0;
  std::string shadow_rule = "average";  // average | elastic | block-momentum
  float shadow_alpha = 0, shadow_block_momentum = 0.5f, shadow_block_lr = 1.0f;
};

struct JobConfig {
  std::string file;  // the job file, for messages

  // [job]
  std::string name;
  std::string model_path;  // resolved against the job file's folder
  uint64_t seed = 1;
  std::string device = "cpu";
  bool cuda_graphs = false;  // [job] cuda_graphs
  bool device_whole_model = true;  // [job] device_calls: whole_model (true) | per_layer
  std::string cudnn_algorithms = "heuristic";  // [job] cudnn_algorithms: heuristic | measured | gemm
  std::string cudnn_cache;  // [job] cudnn_cache: a path; "": beside the checkpoint; "none": no cache
  std::string precision = "fp32";              // [job] precision: fp32 | tf32 (cuda) | bf16
  int threads = 0;  // 0: automatic
  double memory_limit_gb = 0;  // per node; 0: detected (src/plan/memory.cpp)

  // [data]
  std::string data_source;  // fashion-mnist | hdf5 | synthetic
  std::string data_dir;
  std::string train_file, test_file, images_dataset, labels_dataset;
  bool check_finite = true;  // [data] check_finite
  std::string data_read = "auto";  // [data] read: auto | whole | batches (HDF5 images)
  Normalisation norm;
  int synthetic_train = 0, synthetic_test = 0;

  // [train]
  int batch_size = 64;  // global batch (ssgd), or each learner's batch (sma, shadow, local-sgd: learner_batch_size)
  std::string batch_note;  // said once at the start: batch_size read as the learners' batch
  int64_t steps = 0;    // 0: epochs decide
  int epochs = 1;
  int64_t eval_every = 0;  // steps; 0: at the end of every epoch
  int64_t log_every = 100;
  double target_accuracy = 0;  // 0: none
  bool stop_at_target = false;

  // [optimizer], [schedule]
  float lr = 0.1f;
  SgdOptions sgd;
  LrSchedule schedule;

  // [parallel]
  std::string plan_path;            // empty: data parallel over every rank; "auto": planned at start-up
  double amp_limit = 2.0;           // [parallel] amp_limit, for plan = auto
  std::string amp_rule = "compute";  // [parallel] amp_rule: compute | layer-time
  double auto_min_gain = 0.1;        // [parallel] auto_min_gain: plan = auto's lead over data parallel (data_parallel_instead)
  std::string branches = "auto";     // [parallel] branches: auto | in-turn
  std::string profile_cache;        // [parallel] profile_cache folder, for plan = auto
  size_t bucket_bytes = 25u << 20;  // gradient allreduce bucket
  int progress_us = 1000;           // [parallel] progress_us: MPI progress helper's period; 0: none
  bool layer_timing = false;        // per-layer transfer/allreduce seconds (no overlap)
  bool sync_batchnorm = true;       // batch-norm statistics over each layer's group

  // [output]
  std::string metrics_path, checkpoint_path, log_path;
  int64_t checkpoint_every = 0;   // steps; 0: only at the end
  double checkpoint_seconds = 0;  // wall seconds; 0: off

  BackgroundConfig background;
  SyncConfig sync;

  // Command line only: continue from the newest valid checkpoint at checkpoint_path.
  bool resume = false;
  // train --trace FILE [--trace-steps A:B]: a per-rank timeline of steps [A, B)
  // (B < 0: to the end) in the trace-event format (include/burstpool/trace.hpp).
  std::string trace_path;
  int64_t trace_first = 0, trace_end = -1;
};

// Reads `path` and applies `overrides` ("section.key=value", from --set or
// other flags). Errors name the file and line, or the override.
JobConfig load_job(const std::string& path, const std::vector<std::string>& overrides = {});

}  // namespace burstpool
