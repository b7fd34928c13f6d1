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
// of its rate alone (at most 1), where the idle share counts each of a rank's
// idle stretches less gap_cost_s (at least 0): a background gets nothing of
// a stretch shorter than the time it takes to be woken, to be preempted and
// to have the foreground's data back in cache, and all but that of a long one.
// With gap_cost_s = 0 the idle share is the plain idle time over the step.
// The cost is fitted where the samples carry their stretches (a shaped
// network's waits run from under a millisecond to most of a second), else 0.
//
// The foreground runs foreground_slowdown times slower than alone.
// base_share is the time the simulator does not see: ranks that meet at
// batch-norm sums and gradient buckets drift apart by noise, and the one that
// arrives first waits (a data-parallel foreground, with no idle time in the
// simulation, still leaves a background some). On a CPU with one thread per
// rank a foreground kernel keeps its core busy, so busy_efficiency is 0 there
// and base_share, idle_efficiency and the slowdown are fitted; on a GPU all
// three coefficients are.
#include <string>
#include <vector>

namespace burstpool {

struct PackingModel {
  std::string device = "cpu";
  double base_share = 0;
  double idle_efficiency = 1;
  double busy_efficiency = 0;
  double foreground_slowdown = 1;
  double gap_cost_s = 0;  // what each idle stretch costs the background, seconds
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
  // Optional (the fit finds gap_cost_s only where every sample has them): the
  // simulated step and each core's idle stretches (Simulation::idle_gaps_s).
  double step_s = 0;
  std::vector<std::vector<double>> idle_gaps_s;
};

// Least squares fit of background_share = base_share + idle_efficiency *
// idle_share + busy_efficiency * slack_share with every coefficient >= 0
// (busy_efficiency held at 0 for device "cpu"), and the mean measured
// slowdown. Where every sample has its idle stretches, the idle share is the
// usable one and gap_cost_s is fitted too (searched from 0 to 20 ms in 20 us
// steps, the smallest of equal fits). Throws Error for no samples.
PackingModel fit_packing(const std::vector<PackingSample>& samples, const std::string& device);

// The mean over the lists (cores, or ranks with a core each) of
// sum(max(0, gap - gap_cost_s)) / step_s: the share of a step a background
// can use in the idle stretches. 0 for no lists or a step that is not
// positive.
double usable_idle_share(const std::vector<std::vector<double>>& idle_gaps_s, double step_s, double gap_cost_s);

// The predicted share of the background's rate alone (clamped to [0, 1]),
// from the usable idle share (usable_idle_share with the model's gap cost).
double background_share(const PackingModel& model, double idle_share, double slack_share);

// JSON files: {"format": "burstpool-packing", "device", "base_share", "idle_efficiency",
// "busy_efficiency", "foreground_slowdown", "gap_cost_s" (optional, 0 if absent),
// "calibration", "samples": [...]}; a sample's "step_s" and "idle_gaps_s" are
// optional. Errors name the file and the key.
void save_packing(const PackingModel& model, const std::vector<PackingSample>& samples, const std::string& path);
PackingModel load_packing(const std::string& path);
std::vector<PackingSample> load_packing_samples(const std::string& path);  // the "samples" list of a fit's input

}  // namespace burstpool
