#pragma once
// Profiles: what the planner and simulator need to know about this device and
// network, measured once and kept in JSON files (src/plan/profiler.cpp).
//
// A layer profile holds, for every layer of one model and every per-device
// batch measured, the forward and backward milliseconds (median of repeats
// after warm-up), plus activation and parameter bytes. It carries the model's
// fingerprint, so a profile is never used with another model.
//
// A network profile holds point-to-point and allreduce times by message size
// and group size, and a fitted latency + bytes/bandwidth model of each.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "burstpool/spec.hpp"

namespace burstpool {

struct LayerProfile {
  std::string name, type;
  double activation_bytes_per_sample = 0;  // output
  double parameter_bytes = 0;
  std::vector<double> forward_ms, backward_ms;  // one per batch in ModelProfile::batches
};

struct ModelProfile {
  std::string model, fingerprint, device;
  int threads = 1;
  std::vector<int> batches;  // per-device batch sizes measured
  std::vector<LayerProfile> layers;
  // Whole training step (forward, backward, SGD) in ms per batch, measured as
  // one piece: layers timed alone run with warm caches, so their sum falls
  // short of a real step. Empty in older profiles.
  std::vector<double> step_ms;

  // step_ms / sum of layer times at batch index k (1 without step_ms).
  double calibration(size_t k) const;
  // Seconds of a pass whose per-batch milliseconds are `ms` (a layer's
  // forward_ms or backward_ms) at `batch`: calibrated, interpolated linearly
  // between measured batches, the smallest batch's time below them and the
  // largest one's per-sample time above them; 0 for batch 0.
  double seconds(const std::vector<double>& ms, int batch) const;
};

// Stable fingerprint of an architecture (not of weights).
std::string model_fingerprint(const ModelSpec& spec);

struct ProfileOptions {
  std::vector<int> batches = {1, 2, 4, 8, 16, 32};
  int warmup = 2, repeats = 7;
  // Where the layers run: cpu, cuda (the GPU of this node-local rank) or
  // twin (the device code path in host memory); make_device_model's names.
  std::string device = "cpu";
  int threads = 0;  // OpenMP threads to measure with; 0: as configure_threads(0) chooses
  // Told after each batch size: the batch and the seconds it took (progress output).
  std::function<void(int, double)> progress;
};
ModelProfile profile_model(const ModelSpec& spec, const ProfileOptions& options);

void save_profile(const ModelProfile& profile, const std::string& path);
// Loads a profile and checks it belongs to `spec`; errors name the file.
ModelProfile load_profile(const std::string& path, const ModelSpec& spec);

// Bytes a ring allreduce of `bytes` moves through each of its `ranks` ranks:
// 2(n-1)/n x bytes, what the allreduce link model is fitted to and charged by.
inline double ring_bytes(double bytes, double ranks) { return 2.0 * (ranks - 1) / ranks * bytes; }

// The executor's default gradient bucket ([parallel] bucket_mb): the size of
// the sums a job makes, where the simulator and the network profile need one.
constexpr double kDefaultBucketBytes = 25.0 * (1 << 20);

struct LinkModel {
  LinkModel() = default;
  LinkModel(double latency, double bandwidth, double core = 0)
      : latency_s(latency), bandwidth_bytes_per_s(bandwidth), core_seconds_per_byte(core) {}

  double latency_s = 0, bandwidth_bytes_per_s = 0;  // the line: time(bytes) = latency + bytes / bandwidth
  // Core time the operation takes from the rank's computing thread per byte it
  // moves: on a CPU, MPI's copies and sums run inside the rank's own progress
  // calls, between its layers, so a gradient sum in flight slows the backward
  // pass beside it (0: none, as with sums made by the network or a GPU).
  double core_seconds_per_byte = 0;
  // The measured times themselves, (bytes moved, seconds), ascending in both
  // (measured_curve), where a profile has them: a link's time per byte need
  // not be one number over all sizes (over TCP, sums of 64 MiB have run 50%
  // slower per byte than those of 16 MiB), which one line fitted to all of
  // them averages away. Empty: the line alone.
  std::vector<std::pair<double, double>> measured;

  // Seconds to move `bytes`: with 2 or more measured points, interpolated
  // between the two around it; below the smallest, the smallest's time; past
  // the largest, extended at the last two points' rate or the line's, the
  // slower (past what was measured a link is not assumed to get faster).
  // Without them, the line.
  double seconds(double bytes) const;
};

struct NetworkSample {
  std::string kind;  // "p2p" or "allreduce"
  int group = 2;
  double bytes = 0, seconds = 0;
};

struct NetworkProfile {
  int ranks = 0;
  LinkModel p2p, allreduce;  // allreduce: fitted to 2(n-1)/n * bytes as the ring moves
  double largest_bytes = 0;  // the largest message measured (the sweep stops early on slow links)
  double seconds = 0;        // how long the measurement took
  std::vector<NetworkSample> samples;
};

// The measured points of `samples` of one kind ("p2p", "allreduce") and
// group, as LinkModel::measured wants them: x the bytes moved (a ring's
// 2(n-1)/n x bytes for an allreduce), sorted; each time at least the one
// before it (a smaller message measured slower is noise, not a faster link).
std::vector<std::pair<double, double>> measured_curve(const std::vector<NetworkSample>& samples,
                                                      const std::string& kind, int group);

struct NetworkOptions {
  double max_bytes = 64.0 * 1024 * 1024;  // largest message tried (sizes 4 B, x4 steps, then this one)
  // Sizes up to this one are measured whatever their time (each still within
  // the deadline): the largest sum a job makes, which its plan must not take
  // from a model extended past what was measured (0: the budget decides).
  double required_bytes = 0;
  int repeats = 7;                        // timed operations per size, at most; the median is kept
  double seconds_per_size = 2;            // a size's time budget: fewer repeats, and no larger sizes, past it
  double deadline_s = 30;                 // one message slower than this is an error (a stalled link)
  // The sums' core time is measured at this size (the gradient bucket's:
  // copies of sums larger than the caches cost more per byte), or at the
  // largest whose 3 repeats the fit says fit one size's budget.
  double core_bytes = kDefaultBucketBytes;
  std::function<void(const std::string&)> progress;  // rank 0: one line per size measured
};

// Collective over MPI_COMM_WORLD (needs >= 2 ranks): ping-pong between ranks 0
// and 1 and allreduce over groups 2..N, sizes 4 B up to options.max_bytes as
// time allows; fits both models. Throws (naming the size) when one message
// outlives the deadline.
NetworkProfile profile_network(const NetworkOptions& options);
// The sweep's size after `bytes`: 4x it while that is at most `max_bytes`,
// then `max_bytes` itself (in whole floats) if not yet measured; 0: done.
double next_sweep_size(double bytes, double max_bytes);
// The sweep's forecast of its next size, `next_bytes` (next_sweep_size),
// from this size's time and the previous one's (previous_bytes 0: none):
// this time plus the extra bytes at the rate the time grew. Times that did
// not grow are latency-bound, and so, until they grow, is the next size: a
// slow small message (ranks that wait a scheduler tick per message) says
// nothing about the bandwidth.
double next_size_seconds(double next_bytes, double bytes, double seconds, double previous_bytes,
                         double previous_seconds);
// One line: both fits, the largest size measured and the time it took.
std::string network_summary(const NetworkProfile& net);
void save_network(const NetworkProfile& net, const std::string& path);
// Errors name the file and the key on missing or negative numbers.
NetworkProfile load_network(const std::string& path);

// The upper median of timings (0 for none); the profilers keep it.
double median(std::vector<double> v);
// Least squares t = a + b x; returns {a, b}.
std::pair<double, double> fit_line(const std::vector<double>& x, const std::vector<double>& t);

}  // namespace burstpool
