#pragma once
// The simulator: what a plan does per rank, step by step, without running it.
//
// It replays the executor's schedule on one clock per rank: forward in
// topological order (slice pieces between differing rank sets complete when
// both sides are ready plus latency + bytes / bandwidth; each rank of a layer
// computes its slice for the profiled forward time; batch norm waits for its
// group), then backward in reverse with the profiled backward times and the
// gradient pieces sent back. Each layer's gradient allreduce starts when the
// last rank of its group finishes the layer, runs while backward goes on
// (one at a time per group), and the step ends on a rank when its compute and
// its reductions are done.
#include <string>
#include <vector>

#include "burstpool/packing.hpp"
#include "burstpool/plan.hpp"
#include "burstpool/profile.hpp"
#include "burstpool/trace.hpp"

namespace burstpool {

struct Simulation {
  double iteration_s = 0;
  std::vector<double> busy_s, idle_s;  // per rank: computing, and the rest of the step
  // Per rank, of busy_s: the capacity that its kernels leave unused at their
  // batch, busy seconds x (1 - utilisation) (include/burstpool/packing.hpp).
  std::vector<double> slack_s;
  // Per core the ranks run on (with `cores`, the first min(cores, ranks),
  // rank r on core r mod cores; else one per rank): the core time their work
  // takes, each rank's profiled compute as if alone on the core (two ranks of
  // a layer sharing a core each take twice as long, so the core works once
  // per rank) and the gradient sums' copies. A core's free time is the step
  // less this: what a background can have there.
  std::vector<double> core_busy_s;
  // Per core (as core_busy_s; with a core per rank, per rank): the stretches
  // of the step in which the core does none of the foreground's work (no
  // layer, no sums' copies of any of its ranks): its ranks waiting for
  // slices, for batch-norm and gradient sums, for the other ranks. Steps
  // follow each other, so a core's stretch at the end of the step and the one
  // at its start are one (listed last). With a core per rank they add up to
  // idle_s; a rank idle while its core-mate works has none there. What a
  // background gets of them depends on how long each is
  // (PackingModel::gap_cost_s).
  std::vector<std::vector<double>> idle_gaps_s;
  // With `timeline`, the step as a timeline, in the form train --trace writes: each rank's
  // layers (busy), the time it spends in slice transfers and in the final
  // wait for gradient sums (busy, as the metrics count them), the sums in
  // flight (gradient sync track, not busy) and its idle gaps.
  std::vector<TraceEvent> events;
};

// How much of the device a pass (a layer's forward_ms or backward_ms) uses at
// `batch`: its per-sample time at the profile's largest batch over its
// per-sample time at `batch`, in [0, 1]; 1 at or above the largest batch.
double utilisation(const ModelProfile& profile, const std::vector<double>& ms, int batch);

// cores: how many cores the ranks share (all ranks on one node, one thread
// each); 0: a core (device) per rank, the cluster case. With fewer cores than
// ranks, rank r stays on core r mod cores (Open MPI's round-robin placement;
// Linux leaves it there too, as a rank waiting at a meeting point polls and so
// keeps its core busy), and the ranks of a layer that share a core compute at
// the same time and split it evenly: each takes (ranks of the layer on its
// core) times its profiled time. Waiting ranks are assumed to yield their
// core (Open MPI does when oversubscribed). For validating on a machine with
// fewer cores than ranks.
// timeline: fill Simulation::events (simulate --trace).
// bucket_bytes: the executor's gradient bucket ([parallel] bucket_mb): a small
// model's gradients all go in one bucket, summed only once backward ends.
Simulation simulate(const ModelSpec& spec, const ModelProfile& profile, const Plan& plan, const LinkModel& p2p,
                    const LinkModel& allreduce, int cores = 0, bool timeline = false,
                    double bucket_bytes = kDefaultBucketBytes);

// The mean over ranks of the share of the step a rank spends without
// foreground work (idle_s / iteration_s): the most of its rate alone a
// background job on those ranks could get.
double idle_share(const Simulation& sim);

// The mean over cores of the share of the step a core has free
// (1 - core_busy_s / iteration_s, at least 0). With a core per rank it is
// idle_share; with ranks sharing cores it is less: a rank idle while its
// core-mate computes frees nothing.
double free_core_share(const Simulation& sim);

// The cluster throughput against data parallel alone
// (include/burstpool/cluster_throughput.hpp) of a foreground simulated as
// `fg`, at its own speed, beside a background that fills all of its free core
// time: data_parallel's step over fg's, plus free_core_share(fg). An upper
// bound (a packing model scales the background's part down); it compares
// plans for a run with a background, as plan = auto does.
double cluster_throughput_bound(const Simulation& fg, const Simulation& data_parallel);

// A background job on the same ranks as a simulated foreground, through a
// packing model (include/burstpool/packing.hpp) fitted to measured runs.
struct ForegroundRun {
  Simulation own_plan;       // the foreground under its plan
  Simulation data_parallel;  // the same model and global batch, data_parallel_plan_within the same ranks
  int global_batch = 0;
};
struct BackgroundRun {
  const ModelSpec* spec = nullptr;
  const ModelProfile* profile = nullptr;
  int batch = 0;             // global batch if data parallel, per rank if independent
  bool independent = false;  // a replica per rank, no gradient sums (local training, as DeepPool's background)
};
struct BackgroundPrediction {
  double alone_samples_per_second = 0;   // the background on all ranks (and their cores) by itself
  double shared_samples_per_second = 0;  // beside the foreground
  double idle_share = 0;                 // mean over ranks of idle / foreground step
  double usable_idle_share = 0;          // mean over cores of their idle stretches less the packing model's gap cost
  double slack_share = 0;                // mean over ranks of slack / foreground step
  double foreground_slowdown = 1;        // the packing model's
  double foreground_alone_samples_per_second = 0;          // under its plan
  double foreground_shared_samples_per_second = 0;         // under its plan, beside the background
  double foreground_data_parallel_samples_per_second = 0;  // data parallel alone: the reference
  double cluster_throughput_vs_data_parallel = 0;          // include/burstpool/cluster_throughput.hpp
  double cluster_throughput_vs_own_plan = 0;
};
BackgroundPrediction predict_background(const ForegroundRun& foreground, const BackgroundRun& background,
                                        const PackingModel& packing, const LinkModel& p2p, const LinkModel& allreduce);

}  // namespace burstpool
