#pragma once
// Cluster throughput: how much training two jobs sharing ranks get done,
// counted in "clusters' worth" of each job alone. Header-only: two inline
// formulas, shared by the multiplexer and the simulator.
//
//   cluster throughput = fg shared / fg reference + bg shared / bg alone
//
// The honest reference for the foreground is the same model and global batch
// trained data parallel over the same ranks, alone: that is what a user would
// run without burstpool's modes, and a burst plan that is slower than data
// parallel must pay for itself out of the background's share. The figure
// against the foreground's own plan alone is kept beside it, as it separates
// what the background costs from what the plan costs. Header-only: two
// divisions, used by the trainer's metrics and by the simulator alike.

namespace burstpool {

// Each term is 0 when its reference rate is not positive (nothing measured).
inline double cluster_throughput(double fg_shared, double fg_reference, double bg_shared, double bg_alone) {
  const double fg = fg_reference > 0 ? fg_shared / fg_reference : 0;
  const double bg = bg_alone > 0 ? bg_shared / bg_alone : 0;
  return fg + bg;
}

}  // namespace burstpool
