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

// Collective over MPI_COMM_WORLD. Rank 0 takes the layer profile of this
// model, device, thread count and host from [parallel] profile_cache, or
// measures it and puts it there (a cached file that does not load is named,
// and measured again); the network profile likewise, measured by all ranks
// together (kept per rank count and host list). It plans at [parallel]
// amp_limit and amp_rule, writes the plan next to the metrics (<metrics>.plan.json)
// or into the cache, and prints a one-line summary; every rank gets the plan.
AutoPlan auto_plan(const JobConfig& job, const ModelSpec& spec, int threads);

}  // namespace burstpool
