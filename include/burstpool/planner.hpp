#pragma once
// The burst planner: how many ranks each layer gets.
//
// Cost model (times in seconds, global batch B, a layer on n ranks uses the
// prefix 0..n-1 and holds ceil(B/n) samples per rank):
//   G(l, n)    profiled forward+backward time at per-device batch ceil(B/n),
//              calibrated so the layers add up to the measured whole step,
//              interpolated linearly between measured batches (scaled by the
//              per-sample time of the largest one beyond it);
//   Sync(l, n) 0 for n = 1 or no parameters, else the ring allreduce
//              latency + 2(n-1)/n x parameter bytes / bandwidth;
//   Xfer(a->b) 0 if a = b, else twice (activations forward, gradients back)
//              latency + act bytes/sample x B (1/min(a,b) - 1/max(a,b)) / p2p
//              bandwidth: what the busiest rank sends or receives.
// A step costs the sum over layers of G + Sync + incoming Xfer. The
// branches between a fork and its join run either
//   in turn:  every branch layer on a prefix of its own count (the branches
//             share rank 0, one after another): their costs add up; or
//   at once:  the branches in groups, each group on one range of c ranks
//             (its branches in turn there), the main group on the prefix
//             0..c-1 and the others on disjoint ranges after it: the block
//             costs its slowest group's forward plus its slowest group's
//             backward (they meet at the join, and again at the fork), each
//             branch counting its transfer in from the fork and out to the
//             join, half in each phase
//             (off the prefix, XferApart: every sample moves, latency +
//             act bytes/sample x B / min(a,b) / bandwidth each way, an upper
//             bound where a range overlaps the fork's or join's ranks). An
//             identity branch runs beside them as its fork->join transfer.
// The executor sends slices as soon as they are made, so branches on
// disjoint ranks do run at once (over MPI; include/burstpool/executor.hpp).
// For each fork and join count the program takes the cheaper of the
// branches in turn and the best split of the ranks among them at once
// (plan/branch_split.hpp), as DeepPool (Park et al., MLSys 2022) does.
// Amplification limit A: layer l may use n ranks only if, by the rule chosen,
//   compute:    n G(l, n) <= A G(l, 1)
//   layer-time: n (G(l, n) + Sync(l, n) + incoming Xfer) <= A G(l, 1)
// (DeepPool's rule: the layer's whole time on n ranks, its gradient sum and
// the slices it waits for included). The limit is hard; --soft-limit, as
// the original's soft rule, exempts layers under 300 us.
//
// The dynamic program is exact for this cost model on models made of chains
// and single-level fork/join blocks (ResNet and Inception blocks), with one
// exception: under the layer-time rule, a join's incoming transfers come
// from the branch ends (or the split) its cost chose, so a plan whose branch
// ends move less data into the join, allowed where the chosen one is not,
// can be missed.
#include <string>
#include <vector>

#include "burstpool/plan.hpp"
#include "burstpool/profile.hpp"

namespace burstpool {

struct PlannerOptions {
  int ranks = 1;
  int global_batch = 1;
  double amp_limit = 2.0;  // >= 1; infinity: no limit
  bool soft_limit = false;
  enum class AmpRule { compute, layer_time } amp_rule = AmpRule::compute;
  // A fork's branches: always in turn; the cheaper of in turn and at once on
  // disjoint ranks (the default); or at once wherever the ranks allow it (for
  // studies and checks of such plans; plan_exhaustive searches the cheaper).
  enum class Branches { in_turn, cheaper, at_once } branches = Branches::cheaper;
  LinkModel p2p, allreduce;
};

struct PlannedLayer {
  std::string name;
  int ranks = 1;
  int first_rank = 0;  // the layer runs on first_rank..first_rank+ranks-1
  double compute_s = 0, sync_s = 0, transfer_s = 0;  // G, Sync, incoming Xfer
  double amplification = 1;                          // n G(l, n) / G(l, 1)
};

struct PlanResult {
  Plan plan;
  std::vector<PlannedLayer> layers;  // topological order
  double iteration_s = 0;            // predicted time of one step
  double device_s = 0;               // sum over layers of n x (G + Sync): rank-seconds used per step
  bool allowed = true;               // every layer within the amplification rule
};

PlanResult plan_model(const ModelSpec& spec, const ModelProfile& profile, const PlannerOptions& options);

// The rule named "compute" or "layer-time" (plan --amp-rule, [parallel] amp_rule; both check the name).
// The branches named "auto", "in-turn" or "at-once" (plan --branches, [parallel] branches).
PlannerOptions::Branches branches_named(const std::string& name);
PlannerOptions::AmpRule amp_rule_named(const std::string& name);

// The cost model, for tests and the simulator.
class CostModel {
 public:
  CostModel(const ModelSpec& spec, const ModelProfile& profile, const PlannerOptions& options);
  int layers() const { return static_cast<int>(names_.size()); }
  double compute(int layer, int n) const;  // G: forward + backward
  double forward(int layer, int n) const;
  double backward(int layer, int n) const;
  double sync(int layer, int n) const;
  double transfer(int producer, int from_n, int to_n) const;  // between prefixes
  double transfer_apart(int producer, int from_n, int to_n) const;  // a prefix and a range off it
  // Between a prefix of from_n ranks and the range to_first..to_first+to_n-1.
  double transfer_between(int producer, int from_n, int to_first, int to_n) const;
  // The amplification rule for `layer` on n ranks; incoming_s: the time its
  // incoming transfers take (used by the layer-time rule; 0 gives a bound
  // that holds for any incoming time).
  bool allowed(int layer, int n, double incoming_s = 0) const;
  const std::vector<std::vector<int>>& inputs() const { return inputs_; }  // producers, topological positions
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::vector<std::string> names_;
  std::vector<std::vector<int>> inputs_;
  std::vector<const LayerProfile*> prof_;
  const ModelProfile* profile_;  // outlives the cost model
  PlannerOptions o_;
};

// The predicted cost of a given plan of the planner's form: every layer on a
// prefix, except the branches of a fork at once (data parallel, or a plan
// written by plan_model); others are refused naming the plan.
PlanResult plan_cost(const ModelSpec& spec, const ModelProfile& profile, const PlannerOptions& options,
                     const Plan& plan);

// Exhaustive search over every assignment (small models and N only), same cost model.
PlanResult plan_exhaustive(const ModelSpec& spec, const ModelProfile& profile, const PlannerOptions& options);

}  // namespace burstpool
