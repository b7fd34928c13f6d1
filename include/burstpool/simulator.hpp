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

#include "burstpool/plan.hpp"
#include "burstpool/profile.hpp"

namespace burstpool {

struct Simulation {
  double iteration_s = 0;
  std::vector<double> busy_s, idle_s;  // per rank: computing, and the rest of the step
};

// cores: how many cores the ranks share (all ranks on one node, one thread
// each); 0: a core (device) per rank, the cluster case. With fewer cores than
// ranks, rank r stays on core r mod cores (Open MPI's round-robin placement;
// Linux leaves it there too, as a rank waiting at a meeting point polls and so
// keeps its core busy), and the ranks of a layer that share a core compute at
// the same time and split it evenly: each takes (ranks of the layer on its
// core) times its profiled time. Waiting ranks are assumed to yield their
// core (Open MPI does when oversubscribed). For validating on a machine with
// fewer cores than ranks.
Simulation simulate(const ModelSpec& spec, const ModelProfile& profile, const Plan& plan, const LinkModel& p2p,
                    const LinkModel& allreduce, int cores = 0);

// A background job training data parallel on the same ranks, filling the
// time the foreground leaves idle (the model assumes it uses idle time fully
// and never delays the foreground).
struct BackgroundPrediction {
  double alone_samples_per_second = 0;   // the background on all ranks by itself
  double shared_samples_per_second = 0;  // in the foreground's idle time
  double idle_share = 0;                 // sum of idle / (ranks x foreground step)
  double cluster_throughput = 0;         // 1 (foreground unchanged) + shared / alone
};
BackgroundPrediction predict_background(const Simulation& foreground, const ModelSpec& spec,
                                        const ModelProfile& profile, int ranks, int global_batch,
                                        const LinkModel& p2p, const LinkModel& allreduce);

}  // namespace burstpool
