#pragma once
// A fork/join block's branches at once, for the planner's program
// (src/plan/planner.cpp; the cost model in include/burstpool/planner.hpp):
// the non-empty branches in groups, each group on a rank range of its own
// (its branches in turn there), the main group on the prefix and the others
// on disjoint ranges after it. A placement costs its slowest forward plus
// its slowest backward (plan/branch_split.hpp says why); each branch counts
// its transfers in from the fork and out to the join, half in each phase,
// and an identity branch runs beside them as its fork-to-join transfer.
#include <limits>
#include <vector>

#include "burstpool/planner.hpp"
#include "plan/blocks.hpp"
#include "plan/branch_split.hpp"

namespace burstpool {

// A block's branches at once: per branch its rank count and first rank
// (count empty: none found).
struct Placement {
  double time = std::numeric_limits<double>::infinity();  // slowest forward + slowest backward, with what runs beside
  std::vector<int> count, first;
  double into_join = 0;  // the join's incoming transfers
};

// What does not depend on the fork's and the join's counts is worked out once per block.
class BlockAtOnce {
 public:
  // `cm` and `b` must outlive it.
  BlockAtOnce(const CostModel& cm, const Block& b, int ranks, bool layer_time);
  // No placement is faster: the slowest branch's layers on their best counts.
  double lower_bound() const { return bound_; }
  // The best placement from fork count nf to join count nj, over every
  // grouping of the branches and every split of the ranks among the groups,
  // if one is cheaper than `beat`.
  Placement best(int nf, int nj, double beat) const;

 private:
  static double least_cost(const std::vector<BranchTimes>& groups, double floor);
  static std::vector<std::vector<int>> groupings(int k);
  Placement place(const std::vector<size_t>& index, const std::vector<int>& group_of, const BranchSplit& split,
                  int nj) const;

  const CostModel& cm_;
  const Block& b_;
  const int n_;
  const bool layer_time_;
  std::vector<PhaseTimes> bodies_;        // per branch: its layers' forward and backward at each count
  std::vector<std::vector<int>> ways_;    // every grouping of the non-empty branches
  int top_ = 0;                           // the largest count any branch may take
  double bound_ = 0;
};

}  // namespace burstpool
