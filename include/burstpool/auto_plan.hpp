#pragma once
// [parallel] plan = auto (train --plan auto): the plan made at start-up, so
// that burst parallelism needs no profiling and planning by hand.
#include <string>

#include "burstpool/job.hpp"
#include "burstpool/plan.hpp"

namespace burstpool {

struct AutoPlan {
  Plan plan;
  double predicted_step_s = 0, data_parallel_step_s = 0;  // the planner's cost model
  std::string path;                                       // where the plan was written
};

// What plan = auto weighs: the planner's plan under the amplification limit
// and data parallel on the same ranks.
struct AutoCandidates {
  double plan_step_s = 0, data_parallel_step_s = 0;  // predicted steps, by one model for both
  // With a background job: each one's cluster_throughput_bound
  // (include/burstpool/simulator.hpp), from simulated steps.
  double plan_cluster = 0, data_parallel_cluster = 0;
};

// plan = auto's rule: data parallel runs instead of the plan unless the plan
// is predicted at least `min_gain` ([parallel] auto_min_gain) better at what
// the run is for. Without a background job that is the step (plan_step_s at
// most (1 - min_gain) x data parallel's): nothing uses the rank time a plan
// frees. With one it is cluster throughput (plan_cluster at least
// (1 + min_gain) x data parallel's): a plan that frees rank time but slows the
// foreground more than the background gains is no better than data parallel
// beside the same background. The predictions err by about 10% either way
// (docs/results.md), so a plan predicted barely better can do worse. Returns
// why data parallel runs (one line), or an empty string when the plan does.
std::string data_parallel_instead(const AutoCandidates& candidates, bool background, double min_gain);

// The largest gradient sum a job with this layer profile makes in buckets
// of `bucket_bytes` ([parallel] bucket_mb): a bucket closes before a layer
// would take it past that size, so a sum is a bucket (at most that, or all
// the parameters) or one layer larger than a bucket alone. plan = auto
// measures the network up to it.
struct ModelProfile;
double largest_sum_bytes(const ModelProfile& profile, double bucket_bytes);

// Collective over MPI_COMM_WORLD. Rank 0 takes the layer profile of this
// model, device, thread count and host from [parallel] profile_cache, or
// measures it and puts it there (a cached file that does not load is named,
// and measured again); the network profile likewise, measured by all ranks
// together up to the job's largest sum (kept per rank count and host list;
// measured again where the cached one stopped short of that sum). It plans at [parallel]
// amp_limit and amp_rule, keeps the plan or data parallel by
// data_parallel_instead, writes the plan next to the metrics (<metrics>.plan.json)
// or into the cache, and prints a one-line summary; every rank gets the plan.
AutoPlan auto_plan(const JobConfig& job, const ModelSpec& spec, int threads);

}  // namespace burstpool
