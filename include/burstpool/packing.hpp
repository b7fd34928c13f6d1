#pragma once
// The packing model: how much of a device a background job gets beside the
// foreground, per device kind, fitted to measured multiplexed runs rather
// than assumed.
//
// From a simulated foreground step it takes, per rank, the idle share (no
// foreground work: waiting for slices, reductions or the other ranks) and the
// slack share (inside foreground kernels, the capacity that a small per-rank
// batch leaves unused: 1 - utilisation, with utilisation = the layer's
// per-sample time at the largest profiled batch over its per-sample time at
// the batch it runs). The background then progresses at
//
//   share = base_share + idle_efficiency * idle share + busy_efficiency * slack share
//
// of its rate alone (at most 1), and the foreground runs foreground_slowdown
// times slower than alone. base_share is the time the simulator does not see:
// ranks that meet at batch-norm sums and gradient buckets drift apart by
// noise, and the one that arrives first waits (a data-parallel foreground,
// with no idle time in the simulation, still leaves a background some). On a
// CPU with one thread per rank a foreground kernel keeps its core busy, so
// busy_efficiency is 0 there and base_share, idle_efficiency and the slowdown
// are fitted; on a GPU all three coefficients are.
#include <string>
#include <vector>

namespace burstpool {

struct PackingModel {
  std::string device = "cpu";
  double base_share = 0;
  double idle_efficiency = 1;
  double busy_efficiency = 0;
  double foreground_slowdown = 1;
  // What it was fitted to, or why it is not ("uncalibrated: ...").
  std::string calibration = "uncalibrated: the background uses all idle time and nothing else, at no cost";
};

// One measured multiplexed run, beside the simulator's prediction for it.
struct PackingSample {
  std::string label;
  double idle_share = 0;           // simulated, mean over the ranks
  double slack_share = 0;          // simulated, likewise
  double background_share = 0;     // measured: background shared / alone
  double foreground_slowdown = 1;  // measured: foreground alone / shared rate
};

// Least squares fit of background_share = base_share + idle_efficiency *
// idle_share + busy_efficiency * slack_share with every coefficient >= 0
// (busy_efficiency held at 0 for device "cpu"), and the mean measured
// slowdown. Throws Error for no samples.
PackingModel fit_packing(const std::vector<PackingSample>& samples, const std::string& device);

// The predicted share of the background's rate alone (clamped to [0, 1]).
double background_share(const PackingModel& model, double idle_share, double slack_share);

// JSON files: {"format": "burstpool-packing", "device", "base_share", "idle_efficiency",
// "busy_efficiency", "foreground_slowdown", "calibration", "samples": [...]}.
// Errors name the file and the key.
void save_packing(const PackingModel& model, const std::vector<PackingSample>& samples, const std::string& path);
PackingModel load_packing(const std::string& path);
std::vector<PackingSample> load_packing_samples(const std::string& path);  // the "samples" list of a fit's input

}  // namespace burstpool
